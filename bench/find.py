"""A cold `find` over a local tree of 200 arrays in 20 groups (consolidated; the shape of
bench/remote.py's `find` scenario, without S3), against another checkout of zarrfs (say,
main) and the FUSE ceiling in the same run: the sides alternate, each on a fresh mount;
medians, and the ratio other ÷ this (above 1: this one is faster).

    python bench/find.py [--other ../main] [--runs 5] [--imported]

Two figures per side:
  find  wall seconds of `find MOUNTPOINT` on a mount just made
  cpu   CPU seconds (user + system, all threads) the daemon used meanwhile, which a loaded
        machine stretches less than the wall time
The FUSE ceiling is bench/minimal_fs.py --tree serving the same tree (taken once by
walking a mount of this checkout) from dictionaries. With --imported, each zarrfs mount
first opens one array (a `stat` of the last one's `data`, untimed), so that numpy and the
views are imported before `find` (a fixed cost of the mount's first array), leaving the
cost of its requests."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import minimal_fs  # noqa: E402
from accounting import cpu_seconds  # noqa: E402


def build(root: Path) -> None:
    """200 arrays of 100x100 float32 in 20 groups, consolidated (bench/remote.py's tree too)."""
    warnings.filterwarnings("ignore", module="zarr")
    import zarr

    tree = zarr.open_group(str(root), mode="w")
    for i in range(20):
        group = tree.create_group(f"g{i}")
        for j in range(10):
            group.create_array(f"a{j}", shape=(100, 100), chunks=(50, 50), dtype="float32")
    zarr.consolidate_metadata(str(root))


def timed_find(mountpoint: Path, pid: int, imported: bool) -> tuple[float, float]:
    if imported:
        os.stat(mountpoint / "g19" / "a9" / "data")
    before, start = cpu_seconds(pid), time.perf_counter()
    subprocess.run(["find", str(mountpoint)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, cpu_seconds(pid) - before


class Zarrfs:
    """`zarrfs mount -f` of one checkout, in the background, until closed."""

    def __init__(self, checkout: Path, source: Path) -> None:
        self.env = {**os.environ, "PYTHONPATH": str(checkout)}
        self.path = Path(tempfile.mkdtemp(prefix="zarrfs-find-"))
        # run from / : `python -m` puts the working directory before PYTHONPATH
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zarrfs.cli", "mount", "-f", "--read-only", str(source), str(self.path)],
            env=self.env,
            cwd="/",
            stderr=subprocess.DEVNULL,
        )
        wait_mounted(self.path, self.process)

    def close(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "zarrfs.cli", "umount", str(self.path)], env=self.env, cwd="/", capture_output=True
        )
        self.process.wait(60)
        self.path.rmdir()


class Ceiling(Zarrfs):
    def __init__(self, tree: Path) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="minimal-find-"))
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "bench/minimal_fs.py"), str(self.path), "--tree", str(tree)]
        )
        wait_mounted(self.path, self.process)

    def close(self) -> None:
        subprocess.run(["fusermount3", "-u", str(self.path)], capture_output=True)
        self.process.wait(60)
        self.path.rmdir()


def wait_mounted(path: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not os.path.ismount(path):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{process.args[0]} did not mount")
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", type=Path, help="another zarrfs checkout to compare with")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--imported", action="store_true", help="open one array before timing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-find-") as work:
        source, tree = Path(work) / "many.zarr", Path(work) / "tree.json"
        build(source)
        mounted = Zarrfs(REPO, source)
        try:
            walked = minimal_fs.walk(mounted.path)
        finally:
            mounted.close()
        tree.write_text(json.dumps(walked))
        sides = {"this": lambda: Zarrfs(REPO, source), "ceiling": lambda: Ceiling(tree)}
        if args.other:
            sides["other"] = lambda: Zarrfs(args.other.resolve(), source)
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for run in range(args.runs):
            for name in list(sides) if run % 2 == 0 else list(reversed(sides)):
                mount = sides[name]()
                try:
                    imported = args.imported and name != "ceiling"
                    figures[name].append(timed_find(mount.path, mount.process.pid, imported))
                finally:
                    mount.close()
    print(
        f"find over {len(walked)} entries{', numpy imported' if args.imported else ''}, {args.runs} runs,"
        f" load average {os.getloadavg()[0]:.1f}"
    )
    this = figures["this"]
    for index, figure in enumerate(("find", "cpu")):
        line = f"  {figure:4s}  this {statistics.median(f[index] for f in this):.3f} s"
        for name in ("other", "ceiling"):
            if name in figures:
                ratios = [o[index] / t[index] for o, t in zip(figures[name], this)]
                line += (
                    f"   {name} {statistics.median(f[index] for f in figures[name]):.3f} s"
                    f" ({name}/this {statistics.median(ratios):.2f})"
                )
        print(line)


if __name__ == "__main__":
    main()
