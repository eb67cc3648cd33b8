"""Write throughput: `cp` of a raw file into an array's `data` through a zarrfs mount vs
zarr-python `arr[:] = numpy.fromfile(...)` and tensorstore `arr[...] = ...`, same array
layout, same run.

    .venv/bin/python bench/write.py [--size-mib 1024] [--runs 3] [--dir /tmp/zarrfs-bench-write]

Prints MB/s for each and the ratios (the other side's time / zarrfs's: above 1, zarrfs is
faster), and the CPU seconds each side used (on a machine shared with other work, the
time follows how much of the cores a side gets; the CPU it needs does not). zarrfs's time
is the `cp` alone: its close returns once every chunk is stored; mounting is not timed.
Not part of the test suite."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import zarr
from accounting import cpu_seconds, daemon_of

# the zarrfs on PYTHONPATH, as a user runs it (bench/read.py); mounts run from /, since
# `python -m` puts the working directory before PYTHONPATH
ZARRFS = [sys.executable, "-m", "zarrfs.cli"]


def make_raw(path: Path, n: int) -> None:
    """Smooth-ish float32 values so zstd has realistic work to do."""
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        step = 1 << 24
        for start in range(0, n, step):
            count = min(step, n - start)
            x = np.arange(start, start + count, dtype="f8")
            values = (np.sin(x / 5000.0) * 100 + rng.normal(0, 0.5, count)).astype("<f4")
            f.write(values.tobytes())


def create(path: Path, n: int, codec: str) -> zarr.Array:
    compressors = zarr.codecs.ZstdCodec(level=3) if codec == "zstd" else zarr.codecs.BloscCodec(cname="lz4")
    return zarr.create_array(
        path, shape=(n,), chunks=(1 << 20,), dtype="float32", fill_value=0.0, compressors=compressors, overwrite=True
    )


def timed_in_process(fn) -> tuple[float, float]:
    """(seconds, CPU seconds of this process's threads) of fn()."""
    cpu, start = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="zarrfs-bench-write-"))
    base.mkdir(parents=True, exist_ok=True)
    n = args.size_mib * (1 << 20) // 4
    raw = base / "input.raw"
    if not raw.exists() or raw.stat().st_size != n * 4:
        make_raw(raw, n)
    nbytes = n * 4
    print(f"{args.size_mib} MiB float32, 4 MiB chunks; {args.runs} rounds, sides back to back in each")
    for codec in ("zstd", "blosc-lz4"):
        theirs_path = base / f"zarr-python-{codec}.zarr"

        def zarr_python() -> tuple[float, float]:
            arr = create(theirs_path, n, codec)
            return timed_in_process(lambda: arr.__setitem__(slice(None), np.fromfile(raw, dtype="<f4")))

        ours_path = base / f"zarrfs-{codec}.zarr"
        mnt = base / "mnt"
        mnt.mkdir(exist_ok=True)

        def through_mount() -> tuple[float, float]:
            """The cp alone (its close returns once every chunk is stored), not the mount."""
            create(ours_path, n, codec)
            subprocess.run([*ZARRFS, "mount", str(ours_path), str(mnt)], check=True, cwd="/")
            try:
                daemon = daemon_of(mnt)
                cpu, children = cpu_seconds(daemon), os.times()
                start = time.perf_counter()
                subprocess.run(["cp", str(raw), str(mnt / "data")], check=True)
                seconds = time.perf_counter() - start
                after = os.times()
                cpu = (
                    cpu_seconds(daemon)
                    - cpu
                    + (after.children_user - children.children_user)
                    + (after.children_system - children.children_system)
                )
                return seconds, cpu
            finally:
                subprocess.run([*ZARRFS, "umount", str(mnt)], check=True, cwd="/")

        ts_path = base / f"tensorstore-{codec}.zarr"

        def tensorstore() -> tuple[float, float]:
            import tensorstore as ts

            create(ts_path, n, codec)  # the same layout, written by zarr-python's metadata
            arr = ts.open(
                {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(ts_path)}}, open=True, write=True
            ).result()
            return timed_in_process(lambda: arr[...].write(np.fromfile(raw, dtype="<f4")).result())

        # one run of each side per round, back to back: each round's ratios are compared
        # (the median round's), as the machine's load moves between rounds
        rounds = []
        for i in range(args.runs):  # the side that goes first moves round by round (bench/read.py)
            sides = {"zarr": zarr_python, "tensorstore": tensorstore, "zarrfs": through_mount}
            order = list(sides)[i % 3 :] + list(sides)[: i % 3]
            got = {name: sides[name]() for name in order}
            rounds.append((got["zarr"], got["tensorstore"], got["zarrfs"]))
        rounds.sort(key=lambda r: r[0][0] / r[2][0])
        (t_theirs, cpu_theirs), (t_ts, cpu_ts), (t_ours, cpu_ours) = rounds[len(rounds) // 2]
        spread = ", ".join(f"{r[0][0] / r[2][0]:.2f}" for r in rounds)
        expected = np.fromfile(raw, dtype="<f4", count=1 << 20)
        for path in (ours_path, ts_path):
            assert np.array_equal(zarr.open_array(path, mode="r")[: 1 << 20], expected), path
        print(
            f"{codec:10s} zarr-python {nbytes / t_theirs / 1e6:6.0f} MB/s   tensorstore {nbytes / t_ts / 1e6:6.0f} MB/s   "
            f"cp into data {nbytes / t_ours / 1e6:6.0f} MB/s   ratio {t_theirs / t_ours:5.2f}x zarr-python, "
            f"{t_ts / t_ours:5.2f}x tensorstore (median of {args.runs} rounds; vs zarr-python: {spread})"
        )
        print(
            f"{'':10s} CPU seconds in that round: zarr-python {cpu_theirs:.2f}, tensorstore {cpu_ts:.2f}, "
            f"zarrfs daemon and cp {cpu_ours:.2f} (zarr-python / zarrfs {cpu_theirs / cpu_ours:.2f}x)"
        )
        shutil.rmtree(ts_path, ignore_errors=True)
        shutil.rmtree(theirs_path, ignore_errors=True)
        shutil.rmtree(ours_path, ignore_errors=True)
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
