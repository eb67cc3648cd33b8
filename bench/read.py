"""Read throughput of a zarrfs mount, printed as ratios against the issue's targets and
against two ceilings measured in the same run.

For a 1 GiB float32 array written by zarr-python (zstd, then blosc-lz4; 4 MiB chunks):
  cold   `dd if=data bs=1M` through a fresh mount   vs  zarr-python `arr[:]` and tensorstore
                                                     `read()` (target >= 0.8x tensorstore)
         the same STARTED seconds after the mount: the daemon imports numpy and numcodecs
         once it is ready, and the libraries are imported before their reads are timed
  warm   the same dd again (kernel page cache)       vs  a page-cached plain file (target >= 0.8x)
  cache  the same dd with the page cache dropped, served from decoded chunks
  random 4 KiB preads per second, page cache dropped, chunks decoded           (target >= 40k/s)
         then the same offsets again
Ceilings: the decoding ceiling is numcodecs decoding every chunk on a thread per core, with
no filesystem and no output array (nothing that decodes with numcodecs can read faster);
the FUSE ceiling is bench/minimal_fs.py, a pyfuse3 filesystem whose reads are slices of a
constant buffer (nothing built on pyfuse3 can serve requests faster).
CPU is counted per thread (bench/accounting.py) and printed per GiB read beside each
throughput: the daemon's FUSE loop apart from its codec, I/O and worker threads (the loop
serves requests one at a time, so its CPU per GiB bounds the throughput), tensorstore's and
zarr-python's threads, and the FUSE ceiling's loop.
The compressed chunk files are read into the page cache first, so "cold" means a cold
decoded-chunk cache, for zarrfs and zarr-python alike. Mounts go through the command line.

    .venv/bin/python bench/read.py [--dir /tmp/zarrfs-bench] [--codecs zstd,blosc-lz4] [--chunks 1024,1024]
        [--size-mib 1024] [--rounds 6]   (smaller: a quick check that it runs, no figures to quote)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numcodecs
import numpy as np
from accounting import MAIN, ThreadClock, daemon_of

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

# the zarrfs on PYTHONPATH (so that a checkout can be compared with another), as a user runs
# it; mounts run from / since `python -m` puts the working directory before PYTHONPATH
ZARRFS = [sys.executable, "-m", "zarrfs.cli"]
SHAPE = (16384, 16384)  # float32: 1 GiB
CODECS = {
    "zstd": lambda: [zc.ZstdCodec(level=3)],
    "blosc-lz4": lambda: [zc.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4)],
}
DECODERS = {"zstd": numcodecs.Zstd, "blosc-lz4": numcodecs.Blosc}
MiB = 1 << 20
ROUNDS = 6  # cold reads: rounds of tensorstore, zarr-python and zarrfs (fresh, started) back to back
STARTED = 1.0  # seconds between a mount and its "started" dd
TENSORSTORE_CPU: list[ThreadClock] = []  # the threads' CPU of each tensorstore read, in order
ZARR_CPU: list[ThreadClock] = []  # and of each zarr-python read
BENCH = "main (bench)"  # this process's first thread, which runs tensorstore's and zarr-python's reads


def write_array(directory: Path, codec: str, chunks: tuple[int, int]) -> Path:
    """The benchmark array (written once, reused by later runs)."""
    rows = "" if SHAPE[0] == 16384 else f"-{SHAPE[0]}rows"  # (--size-mib)
    path = directory / f"{codec}-{chunks[0]}x{chunks[1]}{rows}.zarr"
    done = path / ".complete"
    if done.exists():
        return path
    print(f"writing {path} ...", flush=True)
    array = zarr.create_array(
        str(path), shape=SHAPE, chunks=chunks, dtype="float32", compressors=CODECS[codec](), overwrite=True
    )
    rng = np.random.default_rng(0)
    x = np.linspace(0, 20, SHAPE[1], dtype="float32")
    rows = chunks[0]
    for start in range(0, SHAPE[0], rows):  # a smooth field with noise at 0.01: compresses ~2-3x
        y = np.arange(start, start + rows, dtype="float32")[:, None] / 700
        block = np.sin(x[None, :] + y) * 100 + rng.normal(0, 1, (rows, SHAPE[1])).astype("float32")
        array[start : start + rows] = np.round(block, 2)
    done.touch()
    return path


def read_into_page_cache(path: Path) -> int:
    total = 0
    for file in path.rglob("*"):
        if file.is_file():
            total += len(file.read_bytes())
    return total


def drop_page_cache(file: Path) -> None:
    fd = os.open(file, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def dd(file: Path) -> float:
    """Seconds to read `file` with dd, 1 MiB blocks."""
    start = time.perf_counter()
    subprocess.run(["dd", f"if={file}", "of=/dev/null", "bs=1M"], check=True, capture_output=True)
    return time.perf_counter() - start


@contextlib.contextmanager
def mounted(source: Path, *options: str):
    mountpoint = Path(tempfile.mkdtemp(prefix="zarrfs-bench-mnt-"))
    subprocess.run([*ZARRFS, "mount", str(source), str(mountpoint), "--read-only", *options], check=True, cwd="/")
    try:
        yield mountpoint
    finally:
        subprocess.run([*ZARRFS, "umount", str(mountpoint)], check=True, cwd="/")
        mountpoint.rmdir()


def random_preads(file: Path, readers: int, seconds: float = 3.0, block: int = 4096, drop: bool = True) -> float:
    """4 KiB preads at random aligned offsets by `readers` threads, readahead off: reads
    per second, all readers together. `drop`: empty the file's page cache first."""
    size = file.stat().st_size
    fd = os.open(file, os.O_RDONLY)
    if drop:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    counts = [0] * readers
    deadline = time.perf_counter() + seconds

    def read(i: int) -> None:
        offsets = (np.random.default_rng(i).integers(0, size // block, 1 << 20) * block).tolist()
        for n in range(0, len(offsets), 256):
            for offset in offsets[n : n + 256]:
                os.pread(fd, block, offset)
            counts[i] = n + 256
            if time.perf_counter() > deadline:
                return

    threads = [threading.Thread(target=read, args=(i,)) for i in range(readers)]
    start = time.perf_counter()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(counts) / (time.perf_counter() - start)
    finally:
        os.close(fd)


def page_cached_file(directory: Path, size: int) -> float:
    """Seconds for dd of a plain file of `size` bytes that is in the page cache."""
    plain = directory / "plain.bin"
    if not plain.exists() or plain.stat().st_size != size:
        with open(plain, "wb") as f:
            block = os.urandom(64 * MiB)
            for _ in range(size // len(block)):
                f.write(block)
    dd(plain)
    return min(dd(plain) for _ in range(3))


def set_read_ahead(mountpoint: Path, kib: int) -> None:
    """The readahead zarrfs sets for its own mounts (root only), for a fair comparison."""
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(mountpoint):
                Path(f"/sys/class/bdi/{fields[2]}/read_ahead_kb").write_text(str(kib))


def fuse_ceiling(size: int) -> dict:
    """dd and random 4 KiB reads on bench/minimal_fs.py serving a file of `size` bytes."""
    mountpoint = Path(tempfile.mkdtemp(prefix="zarrfs-bench-minimal-"))
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("minimal_fs.py")), str(mountpoint), str(size)]
    )
    try:
        deadline = time.monotonic() + 10
        while not os.path.ismount(mountpoint):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("bench/minimal_fs.py did not mount")
            time.sleep(0.05)
        set_read_ahead(mountpoint, 1024)
        data = mountpoint / "data"
        dd(data)
        seconds, clocks = [], []
        for _ in range(3):
            drop_page_cache(data)
            clock = ThreadClock(server.pid).start()
            seconds.append(dd(data))
            clocks.append(clock.stop())
        loop = sorted(c.seconds(MAIN) for c in clocks)[1]
        return {
            "dd": min(seconds),
            "loop": loop,
            "random": random_preads(data, 1),
            "random4": random_preads(data, 4),
        }
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=False)
        server.wait(timeout=30)
        mountpoint.rmdir()


def decoding_ceiling(path: Path, codec: str) -> float:
    """Seconds for numcodecs to decode every chunk of the array, a thread per core."""
    blobs = [f.read_bytes() for f in sorted((path / "c").rglob("*")) if f.is_file()]
    decoder = DECODERS[codec]()
    best = float("inf")
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for _ in range(2):
            start = time.perf_counter()
            for _ in pool.map(decoder.decode, blobs):
                pass
            best = min(best, time.perf_counter() - start)
    return best


def tensorstore_read(path: Path) -> float:
    """Seconds for tensorstore to read the whole array once, its cache off."""
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
    array = ts.open(spec, read=True, context=ts.Context({"cache_pool": {"total_bytes_limit": 0}})).result()
    clock = ThreadClock(os.getpid(), BENCH).start()
    start = time.perf_counter()
    values = array.read().result()
    seconds = time.perf_counter() - start
    TENSORSTORE_CPU.append(clock.stop())
    del values
    return seconds


def requests_of(mountpoint: Path) -> tuple[int, int]:
    """(read requests the daemon has answered, replies held for the pushes past them) so
    far (the read of the count itself is one): the FUSE loop's work follows the requests,
    whatever the machine's load."""
    counts: dict[str, int] = {}

    def walk(node: dict) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value)
            elif key in ("fuse_read", "fuse_read_led"):
                counts[key] = int(value)

    with contextlib.suppress(OSError, ValueError):
        walk(json.loads((mountpoint / ".zarrfs" / "stats").read_text()))
    return counts.get("fuse_read", 0), counts.get("fuse_read_led", 0)


def accounted_dd(file: Path, mountpoint: Path) -> tuple[float, ThreadClock, float]:
    """dd of `file`: (seconds, the daemon's CPU by thread, dd's CPU seconds: the kernel's
    copies into it). The read requests it took are the clock's `requests` (requests_of)."""
    before = requests_of(mountpoint)
    clock, children = ThreadClock(daemon_of(mountpoint)).start(), os.times()
    seconds = dd(file)
    after = os.times()
    counted = requests_of(mountpoint)
    clock.requests = (counted[0] - before[0], counted[1] - before[1])  # type: ignore[attr-defined]
    return (
        seconds,
        clock.stop(),
        (after.children_user - children.children_user) + (after.children_system - children.children_system),
    )


def gbps(seconds: float, size: int) -> str:
    return f"{size / seconds / 1e9:5.2f} GB/s"


def bench_codec(directory: Path, codec: str, chunks: tuple[int, int], plain_seconds: float, ceiling: dict) -> dict:
    path = write_array(directory, codec, chunks)
    stored = read_into_page_cache(path)
    size = int(np.prod(SHAPE)) * 4
    array = zarr.open_array(str(path), mode="r")

    def zarr_python() -> float:
        clock = ThreadClock(os.getpid(), BENCH).start()
        start = time.perf_counter()
        values = array[:]
        seconds = time.perf_counter() - start
        ZARR_CPU.append(clock.stop())
        del values
        return seconds

    def through_mount(settle: float = 0.0) -> tuple[float, ThreadClock, float]:
        with mounted(path) as m:
            time.sleep(settle)
            return accounted_dd(m / "data", m)

    # Rounds of one run of each side, back to back: the machine's load moves between
    # rounds, so each round's ratio is what is compared (the median of the rounds').
    decode_seconds = decoding_ceiling(path, codec)
    # Which side runs first moves round by round: a side run right after others that
    # kept both cores busy is slower (its CPU seconds grow too, for the same work), so a
    # fixed order would always hand that to the same side.
    rounds = []
    for i in range(ROUNDS):
        sides = {
            "tensorstore": lambda: tensorstore_read(path),
            "zarr": zarr_python,
            "zarrfs": through_mount,
            "started": lambda: through_mount(STARTED),
        }
        order = list(sides)[i % 4 :] + list(sides)[: i % 4]
        got = {name: sides[name]() for name in order}
        rounds.append(
            (got["tensorstore"], got["zarr"], *got["zarrfs"], TENSORSTORE_CPU[-1], got["started"][0], ZARR_CPU[-1])
        )
    ts_ratios = sorted(r[0] / r[2] for r in rounds)
    zarr_ratios = sorted(r[1] / r[2] for r in rounds)
    started_ratios = sorted(r[0] / r[6] for r in rounds)
    ts_seconds, zarr_seconds, cold, daemon, dd_cpu, ts_clock, _, zarr_clock = sorted(rounds, key=lambda r: r[0] / r[2])[
        ROUNDS // 2
    ]
    daemon_cpu, ts_cpu = daemon.total, ts_clock.total
    started = sorted(r[6] for r in rounds)[ROUNDS // 2]
    gib = size / (1 << 30)
    loops = sorted(r[3].seconds(MAIN) / gib for r in rounds)
    cpu_ratios = sorted(r[3].total / r[5].total for r in rounds)
    requests = ", ".join("{} ({} held)".format(*r[3].requests) for r in rounds)

    with mounted(path, "--cache-size", "2GiB") as m:
        data = m / "data"
        dd(data)  # decoded chunks now cached, and the pages in the kernel's cache
        warm = min(dd(data) for _ in range(3))
        cached_runs = []
        for _ in range(3):
            drop_page_cache(data)
            cached_runs.append(accounted_dd(data, m))
        from_cache = min(r[0] for r in cached_runs)
        cache_clock = sorted(cached_runs, key=lambda r: r[1].seconds(MAIN))[1][1]
        rate = random_preads(data, 1)
        again = random_preads(data, 1, drop=False)
        rate4 = random_preads(data, 4)

    print(f"\n{codec}, chunks {chunks}, {stored / MiB:.0f} MiB stored ({size / stored:.1f}x)")
    print(f"  zarr-python arr[:]         {gbps(zarr_seconds, size)}   (the median round's, as below)")
    print(
        f"  decoding ceiling           {gbps(decode_seconds, size)}   = {zarr_seconds / decode_seconds:4.2f}x zarr-python"
        f" (numcodecs alone, {os.cpu_count()} threads)"
    )
    print(f"  tensorstore read()         {gbps(ts_seconds, size)}")
    print(
        f"  cold dd through zarrfs     {gbps(cold, size)}   ratio {ts_ratios[ROUNDS // 2]:4.2f}x tensorstore (target >= 0.8x;"
        f" rounds {', '.join(f'{r:.2f}' for r in ts_ratios)}), {zarr_ratios[ROUNDS // 2]:4.2f}x zarr-python"
        f" (rounds {', '.join(f'{r:.2f}' for r in zarr_ratios)}), {decode_seconds / cold:4.2f}x the decoding ceiling"
    )
    print(
        f"    CPU during it: daemon {daemon_cpu:.2f} s, dd (the kernel's copies) {dd_cpu:.2f} s, in {cold:.2f} s"
        f" of {os.cpu_count()} cores: {(daemon_cpu + dd_cpu) / cold:.2f} cores busy; tensorstore used {ts_cpu:.2f} CPU"
        f" seconds in {ts_seconds:.2f} s (tensorstore / zarrfs CPU {ts_cpu / (daemon_cpu + dd_cpu):.2f}x)"
    )
    print(
        f"    CPU per GiB (the median round's; the FUSE loop {loops[ROUNDS // 2]:.3f} s/GiB, rounds"
        f" {', '.join(f'{x:.3f}' for x in loops)}; daemon ÷ tensorstore CPU {cpu_ratios[ROUNDS // 2]:.2f}x, rounds"
        f" {', '.join(f'{x:.2f}' for x in cpu_ratios)}):\n"
        f"      zarrfs daemon  {daemon.per_gib(size)}; dd {dd_cpu / gib:.2f}\n"
        f"      read requests the daemon answered, by round: {requests}\n"
        f"      tensorstore    {ts_clock.per_gib(size)}\n"
        f"      zarr-python    {zarr_clock.per_gib(size)}"
    )
    print(
        f"  the same, mount started    {gbps(started, size)}   ratio {started_ratios[ROUNDS // 2]:4.2f}x tensorstore"
        f" (rounds {', '.join(f'{r:.2f}' for r in started_ratios)}): dd {STARTED:.0f} s after the mount, once the"
        " daemon has imported numpy and numcodecs (the libraries are imported before they are timed)"
    )
    print(
        f"  warm re-read (page cache)  {gbps(warm, size)}   ratio {plain_seconds / warm:4.2f}x page-cached file"
        "   (target >= 0.8x)"
    )
    print(
        f"  re-read from chunk cache   {gbps(from_cache, size)}   ratio {ceiling['dd'] / from_cache:4.2f}x the FUSE ceiling"
        f" ({gbps(ceiling['dd'], size).strip()})\n"
        f"    CPU per GiB: zarrfs daemon {cache_clock.per_gib(size)}; the FUSE ceiling's loop"
        f" {ceiling['loop'] / gib:.3f}; read requests the daemon answered"
        f" {', '.join(str(r[1].requests[0]) for r in cached_runs)}"
    )
    print(
        f"  random 4 KiB preads        {rate / 1000:5.1f}k/s   ratio {rate / 40000:4.2f}x target (>= 40k/s), one reader;"
        f" FUSE ceiling {ceiling['random'] / 1000:.1f}k/s"
    )
    print(
        f"                             {rate4 / 1000:5.1f}k/s   ratio {rate4 / 40000:4.2f}x target, four readers;"
        f" FUSE ceiling {ceiling['random4'] / 1000:.1f}k/s"
    )
    print(f"  the same offsets again     {again / 1000:5.1f}k/s   (windows pushed to the page cache), one reader")
    return {
        "codec": codec,
        "zarr": zarr_seconds,
        "tensorstore": ts_seconds,
        "decode": decode_seconds,
        "cold": cold,
        "loop": loops[ROUNDS // 2],
        "cache_loop": cache_clock.seconds(MAIN) / gib,
        "warm": warm,
        "cache": from_cache,
        "random": rate,
        "random4": rate4,
        "again": again,
    }


def main() -> int:
    global SHAPE, ROUNDS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "zarrfs-bench")
    parser.add_argument("--codecs", default="zstd,blosc-lz4")
    parser.add_argument("--chunks", default="1024,1024", help="4 MiB chunks: 1024,1024 or 64,16384")
    parser.add_argument("--size-mib", type=int, default=1024, help="the array's size (16384 float32 columns)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    SHAPE, ROUNDS = (args.size_mib * MiB // (SHAPE[1] * 4), SHAPE[1]), args.rounds
    args.dir.mkdir(parents=True, exist_ok=True)
    chunks = tuple(min(int(c), n) for c, n in zip(args.chunks.split(","), SHAPE))
    size = int(np.prod(SHAPE)) * 4
    plain = page_cached_file(args.dir, size)
    print(f"page-cached plain file       {gbps(plain, size)}")
    ceiling = fuse_ceiling(size)
    print(
        f"FUSE ceiling (bench/minimal_fs.py): dd {gbps(ceiling['dd'], size).strip()} (its FUSE loop"
        f" {ceiling['loop'] / (size / (1 << 30)):.3f} CPU s/GiB), random 4 KiB preads"
        f" {ceiling['random'] / 1000:.1f}k/s one reader, {ceiling['random4'] / 1000:.1f}k/s four readers"
    )
    for codec in args.codecs.split(","):
        bench_codec(args.dir, codec, chunks, plain, ceiling)
    return 0


if __name__ == "__main__":
    sys.exit(main())
