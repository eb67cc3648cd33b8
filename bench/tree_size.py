"""What a group's size costs a mount: trees of small v3 arrays (dimension names y, x; one
chunk each; local, written by zarr-python) of 500, 2,000 and 20,000 arrays in one group,
and of 1,000 groups of 20, each operation on a fresh mount, against zarr-python's
`members()` of the same tree (max_depth=None: every node's metadata opened), as ratios.

    .venv/bin/python bench/tree_size.py [--dir /tmp/zarrfs-bench-tree] [--layouts 500,2000,20000,1000x20]
        [--runs 1]

Per layout (medians of the runs):
  members  seconds of zarr-python's `open_group(TREE).members(max_depth=None)`
  find     wall seconds of `find MOUNTPOINT` on a mount just made, and its ratio to members
  ls -l    wall seconds of `ls -l` of the group (of the root, for 1000x20): ratio to members
  rm -r    wall seconds of one `rm -r` of 200 arrays (10 groups of 20, for 1000x20) on the
           mount of the `ls -l` (the group read once: the groups of the 1000x20 tree are
           not), the unmount included (what is left to store is stored by then); and
           the daemon's CPU seconds during the `rm -r` itself
  rss      the daemon's peak resident memory after the `find` (VmHWM)
then the ratios the size of a group makes: find of 2,000 / of 500, of 20,000 / of 2,000,
and rm -r of 200 in each against the smallest. The trees are written once and kept under
--dir; what a run removes is written again after it (the first array by zarr-python,
the others its zarr.json copied: the same document).

`--core` runs the decoded core without a kernel instead (one group per layout), as
tests/fs/core/test_group_size.py drives it: `find` (each directory listed with its
entries' attributes, each entry looked up) and `rm -r` of 200 arrays after a listing of
the group, in this process, with a clock that moves 1 ms per request, so that a walk
outlasts `--metadata-ttl` (10 s) as a loaded machine's does. Printed: CPU seconds, the
store's calls and the names its listings returned, and the same ratios, in CPU; the
process's peak RSS after the `find` (one layout a run: the peak is the process's), and what
the find left counted against the metadata share of `--memory-target` (given: 1 GiB).
`--traced` runs the `find` under tracemalloc (several times slower) and prints its peak
above what was traced before it, and what is traced at its end, by file."""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from accounting import cpu_seconds  # noqa: E402
from find import wait_mounted  # noqa: E402

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

REMOVED = 200


def layout_shape(layout: str) -> tuple[int, int]:
    """(groups, arrays in each); one group is the root itself."""
    if "x" in layout:
        groups, each = layout.split("x")
        return int(groups), int(each)
    return 1, int(layout)


def array_paths(layout: str) -> list[str]:
    groups, each = layout_shape(layout)
    if groups == 1:
        return [f"a{i:05d}" for i in range(each)]
    return [f"g{g:04d}/a{i:02d}" for g in range(groups) for i in range(each)]


def write_arrays(root: Path, paths: list[str]) -> None:
    """The first array by zarr-python, the others its document copied (20,000 arrays
    made one by one take minutes)."""
    tree = zarr.open_group(str(root), mode="a", zarr_format=3)
    document = None
    for path in paths:
        group, _, name = path.rpartition("/")
        parent = tree.require_group(group) if group else tree
        if document is None:
            parent.create_array(name, shape=(10, 10), chunks=(10, 10), dtype="float32", dimension_names=["y", "x"])
            document = (root / path / "zarr.json").read_bytes()
        else:
            (root / path).mkdir()
            (root / path / "zarr.json").write_bytes(document)


def tree_of(directory: Path, layout: str) -> Path:
    root = directory / f"{layout}.zarr"
    if not (root / ".complete").exists():
        print(f"writing {root} ...", flush=True)
        shutil.rmtree(root, ignore_errors=True)
        zarr.open_group(str(root), mode="w", zarr_format=3)
        write_arrays(root, array_paths(layout))
        (root / ".complete").touch()
    return root


def removed_targets(layout: str) -> list[str]:
    """What `rm -r` is given: 200 arrays of the group, or the 10 last groups of 20."""
    groups, each = layout_shape(layout)
    if groups == 1:
        return array_paths(layout)[-REMOVED:]
    return [f"g{g:04d}" for g in range(groups - REMOVED // each, groups)]


class Mount:
    """`zarrfs mount -f` of this checkout, in the background, until closed."""

    def __init__(self, source: Path, work: Path) -> None:
        self.env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.path = Path(tempfile.mkdtemp(prefix="mnt-", dir=work))
        # the daemon's log, kept: under $ZARRFS_LOG_DIR if set, else beside the mountpoint
        self.log = Path(os.environ.get("ZARRFS_LOG_DIR") or work) / f"{self.path.name}.log"
        logged = ["--log-level", "INFO", "--log-file", str(self.log)]
        # run from / : `python -m` puts the working directory before PYTHONPATH
        self.process = subprocess.Popen(
            [sys.executable, "-m", "zarrfs.cli", "mount", "-f", *logged, str(source), str(self.path)],
            env=self.env,
            cwd="/",
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_mounted(self.path, self.process)
        except BaseException:
            print(f"  the daemon's log: {self.log}", file=sys.stderr, flush=True)
            raise

    def peak_rss(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as f:
            line = next(line for line in f if line.startswith("VmHWM:"))
        return int(line.split()[1]) * 1024

    def close(self) -> None:
        """Unmount; the log is removed unless an exception is on its way (it is printed)."""
        failed = sys.exc_info()[0] is not None
        subprocess.run(
            [sys.executable, "-m", "zarrfs.cli", "umount", str(self.path)], env=self.env, cwd="/", capture_output=True
        )
        self.process.wait(600)
        self.path.rmdir()
        if failed or self.process.returncode:
            print(f"  the daemon's log (exit {self.process.returncode}): {self.log}", file=sys.stderr, flush=True)
        else:
            self.log.unlink(missing_ok=True)


def timed(command: list[str], cwd: Path | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=cwd)
    return time.perf_counter() - start


def run_layout(directory: Path, layout: str, runs: int) -> dict:
    root = tree_of(directory, layout)
    groups, _ = layout_shape(layout)
    figures: dict[str, list[float]] = {k: [] for k in ("members", "find", "find_cpu", "ls", "rm", "rm_cpu", "rss")}
    for _ in range(runs):
        start = time.perf_counter()
        members = list(zarr.open_group(str(root), mode="r").members(max_depth=None))
        figures["members"].append(time.perf_counter() - start)
        mount = Mount(root, directory)
        try:
            before = cpu_seconds(mount.process.pid)
            figures["find"].append(timed(["find", str(mount.path)]))
            figures["find_cpu"].append(cpu_seconds(mount.process.pid) - before)
            figures["rss"].append(mount.peak_rss())
        finally:
            mount.close()
        mount = Mount(root, directory)
        try:
            figures["ls"].append(timed(["ls", "-l", str(mount.path)]))
            start = time.perf_counter()
            before = cpu_seconds(mount.process.pid)
            subprocess.run(["rm", "-r", *removed_targets(layout)], check=True, cwd=mount.path)
            figures["rm_cpu"].append(cpu_seconds(mount.process.pid) - before)
        finally:
            mount.close()
        figures["rm"].append(time.perf_counter() - start)
        targets = set(removed_targets(layout))
        gone = [p for p in array_paths(layout) if p in targets or p.partition("/")[0] in targets]
        write_arrays(root, gone)  # as it was, for the next run
    out = {k: statistics.median(v) for k, v in figures.items()}
    out["nodes"] = len(members)
    out["groups"] = groups
    return out


class _Clock:
    """time.monotonic moved 1 ms ahead per request of the walk (--core)."""

    def __init__(self) -> None:
        self.ahead, self.real = 0.0, time.monotonic

    def install(self) -> None:
        time.monotonic = lambda: self.real() + self.ahead

    def remove(self) -> None:
        time.monotonic = self.real


class _Counted:
    """The core's store calls and the names its listings return."""

    def __init__(self, core) -> None:
        self.calls = self.names = 0
        store = core.hierarchy.store
        list_dir, get_partial_values = store.list_dir, store.get_partial_values

        def listed(prefix, *args, **kwargs):
            keys, prefixes = list_dir(prefix, *args, **kwargs)
            self.calls += 1
            self.names += len(keys) + len(prefixes)
            return keys, prefixes

        def read(requests, *args, **kwargs):
            self.calls += 1
            return get_partial_values(requests, *args, **kwargs)

        store.list_dir, store.get_partial_values = listed, read


METADATA_SHARE = (1 << 30) // 8  # the default --memory-target's


def _open_core(root: Path, pool):
    from zarrfs.format import ChunkCache, IOContext, open_hierarchy
    from zarrfs.fs.decoded import DecodedCore
    from zarrfs.store import open_store

    context = IOContext(executor=pool, cache=ChunkCache(64 << 20))
    hierarchy = open_hierarchy(open_store(str(root)), context, metadata_ttl=10.0)
    return DecodedCore(hierarchy, metadata_ttl=10.0, metadata_limit=METADATA_SHARE)


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _counted(core) -> dict:
    """What the core counts against the metadata share after the walk (bytes)."""
    tree = core.tree
    resolved = getattr(tree, "_resolved", None)
    return {
        "states": tree.states_bytes,
        "documents": core.hierarchy.fetched.bytes,
        "resolved": getattr(resolved, "bytes", 0),
    }


def _traced_report(tracemalloc, base: int, snapshot) -> None:
    peak = tracemalloc.get_traced_memory()[1] - base
    print(f"  traced: peak {peak / (1 << 20):.1f} MiB above what was traced before the find; at its end, by file:")
    by_file: dict[str, int] = {}
    for stat in snapshot.statistics("filename"):
        name = stat.traceback[0].filename
        name = name.split("site-packages/")[-1].replace(str(REPO) + "/", "")
        by_file[name] = by_file.get(name, 0) + stat.size
    for name, size in sorted(by_file.items(), key=lambda kv: -kv[1])[:15]:
        print(f"    {size / (1 << 20):7.2f} MiB  {name}")


def core_find(root: Path, traced: bool = False) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    clock = _Clock()
    requests = 0

    def find(core, path: str) -> None:
        nonlocal requests
        clock.ahead += 0.001
        requests += 1
        for name, attributes in list(core.list_dir(path)):
            child = f"{path}/{name}" if path else name
            clock.ahead += 0.001
            requests += 1
            core.lookup(child)
            if attributes.is_dir and name != "chunks":
                find(core, child)

    with ThreadPoolExecutor(4) as pool:
        clock.install()
        try:
            core = _open_core(root, pool)
            counted = _Counted(core)
            if traced:
                import tracemalloc

                tracemalloc.start()
                base = tracemalloc.get_traced_memory()[0]
            start = time.process_time()
            find(core, "")
            cpu = time.process_time() - start
            rss, kept = _peak_rss(), _counted(core)
            if traced:
                _traced_report(tracemalloc, base, tracemalloc.take_snapshot())
                tracemalloc.stop()
            core.close()
        finally:
            clock.remove()
    return {
        "find_cpu": cpu,
        "find_requests": requests,
        "find_store_calls": counted.calls,
        "find_names_listed": counted.names,
        "find_rss": rss,
        "find_kept": kept,
    }


def core_rm(root: Path, targets: list[str]) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    clock = _Clock()

    def rm_r(core, path: str) -> None:
        for name, attributes in list(core.list_dir(path)):
            child = f"{path}/{name}"
            clock.ahead += 0.001
            core.lookup(child)
            if attributes.is_dir:
                rm_r(core, child)
            else:
                core.unlink(child)
        core.rmdir(path)

    with ThreadPoolExecutor(4) as pool:
        clock.install()
        try:
            core = _open_core(root, pool)
            list(core.list_dir(""))  # as the `ls -l` before it
            counted = _Counted(core)
            start = time.process_time()
            for target in targets:
                rm_r(core, target)
            cpu = time.process_time() - start
            core.close()
        finally:
            clock.remove()
    return {"rm_cpu": cpu, "rm_store_calls": counted.calls, "rm_names_listed": counted.names}


def run_core(directory: Path, layout: str, traced: bool = False) -> dict:
    """find, then rm -r of 200, of the decoded core without a kernel (--core)."""
    root = tree_of(directory, layout)
    out = {"nodes": len(array_paths(layout)), "groups": 1, **core_find(root, traced)}
    copy = directory / f"{layout}-rm.zarr"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    try:
        out.update(core_rm(copy, [p for p in array_paths(layout)[-REMOVED:]]))
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return out


def main_core(args: argparse.Namespace, layouts: list[str]) -> int:
    results = {}
    for layout in layouts:
        r = results[layout] = run_core(args.dir, layout, args.traced)
        kept = ", ".join(f"{k} {v / (1 << 20):.1f}" for k, v in r["find_kept"].items())
        print(
            f"  {layout:>8s} arrays   find: {r['find_requests']:7d} requests, cpu {r['find_cpu']:6.2f} s,"
            f" {r['find_store_calls']:5d} store calls, {r['find_names_listed']:7d} names listed,"
            f" peak rss {r['find_rss'] / (1 << 20):.0f} MiB (counted, MiB: {kept})"
            f"   rm -r of {REMOVED}: cpu {r['rm_cpu']:5.2f} s, {r['rm_store_calls']:5d} store calls,"
            f" {r['rm_names_listed']:6d} names listed",
            flush=True,
        )
    for small, large in itertools.pairwise(layouts):
        a, b = results[small], results[large]
        print(
            f"  {large} / {small} arrays ({int(large) / int(small):.0f}x):   find cpu {b['find_cpu'] / a['find_cpu']:5.1f}x"
            f"   rm -r of {REMOVED} cpu {b['rm_cpu'] / a['rm_cpu']:4.1f}x"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "zarrfs-bench-tree")
    parser.add_argument("--layouts", default="500,2000,20000,1000x20")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--core", action="store_true", help="the decoded core without a kernel (one group per layout)")
    parser.add_argument("--traced", action="store_true", help="with --core: the find under tracemalloc")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    layouts = args.layouts.split(",")
    results = {}
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, {args.runs} run(s) each", flush=True)
    if args.core:
        return main_core(args, [layout for layout in layouts if "x" not in layout])
    for layout in layouts:
        r = results[layout] = run_layout(args.dir, layout, args.runs)
        print(
            f"  {layout:>8s}  {r['nodes']:6d} nodes   members {r['members']:6.2f} s"
            f"   find {r['find']:6.2f} s ({r['find'] / r['members']:4.1f}x members, daemon cpu {r['find_cpu']:.2f} s)"
            f"   ls -l {r['ls']:5.2f} s ({r['ls'] / r['members']:4.1f}x members)"
            f"   rm -r of {REMOVED} {r['rm']:5.2f} s (daemon cpu {r['rm_cpu']:.2f} s)   rss {r['rss'] / (1 << 20):5.0f} MiB",
            flush=True,
        )
    single = [layout for layout in layouts if "x" not in layout]
    for small, large in itertools.pairwise(single):
        a, b = results[small], results[large]
        print(
            f"  {large} / {small} arrays ({int(large) / int(small):.0f}x):   find {b['find'] / a['find']:5.1f}x"
            f" (daemon cpu {b['find_cpu'] / a['find_cpu']:4.1f}x)   ls -l {b['ls'] / a['ls']:5.1f}x"
            f"   rm -r of {REMOVED} {b['rm'] / a['rm']:4.1f}x (daemon cpu {b['rm_cpu'] / a['rm_cpu']:4.1f}x)"
            f"   rss {b['rss'] / a['rss']:4.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
