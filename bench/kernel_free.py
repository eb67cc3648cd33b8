"""Read throughput of the decoded core without FUSE: `core.open("a/data")` read in a loop as
the adapter reads it (`read(wait=False)` first, as on its event loop, then `read`, as
on a worker thread), printed as ratios against baselines measured in the same run.

For a float32 array written by zarr-python (16384 columns; zstd, then blosc-lz4; 4 MiB chunks):
  cold    a fresh core (empty decoded-chunk cache) reads all of `data`, with 1 MiB and
          128 KiB requests, one reader, then four readers on four quarters at once
                      vs  tensorstore `read()` (its cache off) and zarr-python `arr[:]`
  cached  the same core reads it again, every chunk decoded already
                      vs  numpy assembling the same requests from the same decoded chunks
                          (an empty request buffer, each piece copied in from its chunk:
                          the bytes copied once, no filesystem)
Rounds run each side back to back, the side going first moving round by round; each ratio
is the median of the rounds' ratios (the machine's load moves between rounds, bench/read.py).
The compressed chunk files are read into the page cache first. "cores busy" is the process's
CPU seconds over the wall time of a side. The process runs under the daemon's settings
(`keep_freed_buffers`, `no_blas_threads` in zarrfs/fs/mount.py), every side alike.

    .venv/bin/python bench/kernel_free.py [--dir /tmp/zarrfs-bench-kf] [--size-mib 1024] [--rounds 3]
        [--codecs zstd,blosc-lz4] [--chunks 1024,1024] [--cache-mib 2048]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from zarrfs.fs.core import NotAtHand
from zarrfs.fs.mount import keep_freed_buffers, no_blas_threads

no_blas_threads()  # the daemon's process settings (cli._serve), before numpy is imported:
keep_freed_buffers()  # the baselines run under them too (tensorstore's reads do not move)

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore", module="zarr")
import numcodecs  # noqa: E402
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

COLUMNS = 16384
CODECS = {
    "zstd": lambda: [zc.ZstdCodec(level=3)],
    "blosc-lz4": lambda: [zc.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=4)],
}
DECODERS = {"zstd": numcodecs.Zstd, "blosc-lz4": numcodecs.Blosc}
MiB, KiB = 1 << 20, 1 << 10
REQUESTS = (1 * MiB, 128 * KiB)
READERS = (1, 4)


def write_array(directory: Path, codec: str, rows: int, chunks: tuple[int, int]) -> Path:
    """The benchmark array (written once, reused by later runs), as bench/read.py writes it."""
    path = directory / f"{codec}-{rows}x{COLUMNS}-{chunks[0]}x{chunks[1]}.zarr"
    if (path / ".complete").exists():
        return path
    print(f"writing {path} ...", flush=True)
    array = zarr.create_array(
        str(path / "a"),
        shape=(rows, COLUMNS),
        chunks=chunks,
        dtype="float32",
        compressors=CODECS[codec](),
        overwrite=True,
    )
    rng = np.random.default_rng(0)
    x = np.linspace(0, 20, COLUMNS, dtype="float32")
    for start in range(0, rows, chunks[0]):  # a smooth field with noise at 0.01: compresses ~2-3x
        stop = min(rows, start + chunks[0])
        y = np.arange(start, stop, dtype="float32")[:, None] / 700
        block = np.sin(x[None, :] + y) * 100 + rng.normal(0, 1, (stop - start, COLUMNS)).astype("float32")
        array[start:stop] = np.round(block, 2)
    (path / ".complete").touch()
    return path


def read_into_page_cache(path: Path) -> int:
    return sum(len(f.read_bytes()) for f in path.rglob("*") if f.is_file())


def open_core(path: Path, cache_bytes: int):
    """A decoded core over `path` as the mount makes it (fs/mount.py: its codec pool, I/O
    stage and decoded-chunk cache), and what shuts its pools down."""
    from zarrfs.fs.decoded.core import DecodedCore
    from zarrfs.fs.mount import MountConfig, open_source

    hierarchy, shutdown = open_source(MountConfig(str(path), "/nonexistent", read_only=True, cache_size=cache_bytes))
    return DecodedCore(hierarchy, read_only=True), shutdown


def timed(fn) -> tuple[float, float]:
    """(seconds, cores busy: this process's CPU seconds over them) of fn()."""
    cpu, start = time.process_time(), time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return seconds, (time.process_time() - cpu) / seconds


def read_file(core, size: int, request: int, readers: int) -> None:
    """All of `data`, `request` bytes at a time, by `readers` threads each on its part (its
    own open), as the adapter reads: what is at hand on its loop, the rest on a worker."""
    import os as _os

    part = -(-size // readers // request) * request

    def reader(start: int, end: int) -> None:
        file = core.open("a/data", _os.O_RDONLY)
        try:
            for offset in range(start, end, request):
                n = min(request, end - offset)
                try:
                    data = file.read(offset, n, wait=False)
                except NotAtHand:
                    data = file.read(offset, n)
                if len(data) != n:
                    raise AssertionError(f"short read at {offset}: {len(data)} of {n}")
        finally:
            file.release()

    if readers == 1:
        reader(0, size)
        return
    threads = [threading.Thread(target=reader, args=(start, min(size, start + part))) for start in range(0, size, part)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def check_bytes(core, array: zarr.Array) -> None:
    """A few requests read through the core are zarr-python's bytes."""
    values = array[:]
    flat = values.reshape(-1).view(np.uint8)
    file = core.open("a/data", os.O_RDONLY)
    rng = np.random.default_rng(1)
    for offset in [0, flat.size - 1000, *rng.integers(0, flat.size - MiB, 6).tolist()]:
        assert bytes(file.read(offset, MiB)) == flat[offset : offset + MiB].tobytes(), offset
    file.release()


def numpy_assembling(chunks: dict, shape: tuple[int, int], chunk_shape: tuple[int, int], request: int) -> None:
    """The same requests assembled by numpy from the decoded chunks: for each, an empty
    buffer and each piece copied into it from its chunk (the row-major layout of a 2-d
    array worked out in plain arithmetic; whole rows where a request spans them)."""
    rows, columns = shape
    ch, cw = chunk_shape
    itemsize = 4
    size = rows * columns * itemsize
    for offset in range(0, size, request):
        n = min(request, size - offset)
        out = np.empty(n // itemsize, dtype="<f4")
        first, last = offset // itemsize, (offset + n) // itemsize
        position = first
        while position < last:
            row, column = divmod(position, columns)
            if column == 0 and last - position >= columns:  # whole rows, within one chunk row
                stop_row = min(last // columns, (row // ch + 1) * ch)
                block = out[position - first : position - first + (stop_row - row) * columns].reshape(-1, columns)
                for j in range(0, columns, cw):
                    block[:, j : j + cw] = chunks[(row // ch, j // cw)][row % ch : row % ch + stop_row - row, :]
                position = stop_row * columns
            else:  # part of one row
                stop = min(last, (row + 1) * columns, (column // cw + 1) * cw + row * columns)
                chunk = chunks[(row // ch, column // cw)]
                out[position - first : stop - first] = chunk[row % ch, column % cw : column % cw + stop - position]
                position = stop


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def rates(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in sorted(values))


def bench_codec(directory: Path, codec: str, rows: int, chunks: tuple[int, int], rounds: int, cache_bytes: int) -> dict:
    path = write_array(directory, codec, rows, chunks)
    stored = read_into_page_cache(path)
    shape = (rows, COLUMNS)
    size = rows * COLUMNS * 4
    array = zarr.open_array(str(path / "a"), mode="r")
    import tensorstore as ts

    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path / "a")}}
    ts_array = ts.open(spec, read=True, context=ts.Context({"cache_pool": {"total_bytes_limit": 0}})).result()

    # the decoded chunks numpy assembles from (as the core caches them: read-only arrays)
    decoder = DECODERS[codec]()
    chunk_arrays = {}
    for file in (path / "a" / "c").rglob("*"):
        if file.is_file():
            i, j = (int(p) for p in file.relative_to(path / "a" / "c").parts)
            height = min(chunks[0], rows - i * chunks[0])
            chunk = np.frombuffer(decoder.decode(file.read_bytes()), dtype="<f4").reshape(chunks)
            chunk_arrays[(i, j)] = chunk[:height]

    with_core = open_core(path, cache_bytes)
    check_bytes(with_core[0], array)
    with_core[0].close()
    with_core[1](True)

    results: dict[str, list] = {}

    def note(name: str, got: tuple[float, float]) -> None:
        results.setdefault(name, []).append(got)

    def zarrfs_cold(request: int, readers: int) -> tuple[float, float]:
        core, shutdown = open_core(path, cache_bytes)
        try:
            return timed(lambda: read_file(core, size, request, readers))
        finally:
            core.close()
            shutdown(True)

    sides: dict = {
        "tensorstore": lambda: timed(lambda: ts_array.read().result()),
        "zarr-python": lambda: timed(lambda: array[:]),
    }
    for request in REQUESTS:
        for readers in READERS:
            sides[f"cold {request // KiB} KiB x{readers}"] = lambda r=request, n=readers: zarrfs_cold(r, n)
    for i in range(rounds):
        names = list(sides)
        for name in names[i % len(names) :] + names[: i % len(names)]:
            note(name, sides[name]())

    # cached: one core with every chunk decoded, against numpy assembling from the same chunks
    core, shutdown = open_core(path, cache_bytes)
    try:
        read_file(core, size, MiB, 1)
        read_file(core, size, MiB, 1)  # what is assembled after a first pass is at hand too
        cached_sides: dict = {}
        for request in REQUESTS:
            cached_sides[f"numpy {request // KiB} KiB"] = lambda r=request: timed(
                lambda: numpy_assembling(chunk_arrays, shape, chunks, r)
            )
            for readers in READERS:
                cached_sides[f"cached {request // KiB} KiB x{readers}"] = lambda r=request, n=readers: timed(
                    lambda: read_file(core, size, r, n)
                )
        for i in range(rounds):
            names = list(cached_sides)
            for name in names[i % len(names) :] + names[: i % len(names)]:
                note(name, cached_sides[name]())
        stats = core.stats()
    finally:
        core.close()
        shutdown(True)

    def gbps(name: str, i: int) -> float:
        return size / results[name][i][0] / 1e9

    def ratio(name: str, base: str) -> tuple[float, list[float]]:
        each = [results[base][i][0] / results[name][i][0] for i in range(rounds)]
        return median(each), each

    def busy(name: str) -> float:
        return median([r[1] for r in results[name]])

    print(
        f"\n{codec}, {size / MiB:.0f} MiB float32 {shape}, chunks {chunks}, {stored / MiB:.0f} MiB stored"
        f" ({size / stored:.1f}x), {os.cpu_count()} cores, {rounds} rounds"
    )
    for name in ("tensorstore", "zarr-python"):
        print(f"  {name:24s} {median([gbps(name, i) for i in range(rounds)]):6.2f} GB/s   {busy(name):4.1f} cores busy")
    out = {"codec": codec}
    for request in REQUESTS:
        for readers in READERS:
            name = f"cold {request // KiB} KiB x{readers}"
            ts_r, ts_each = ratio(name, "tensorstore")
            z_r, z_each = ratio(name, "zarr-python")
            print(
                f"  {name:24s} {median([gbps(name, i) for i in range(rounds)]):6.2f} GB/s"
                f"   {busy(name):4.1f} cores busy   {ts_r:4.2f}x tensorstore ({rates(ts_each)}),"
                f" {z_r:4.2f}x zarr-python ({rates(z_each)})"
            )
            out[name] = ts_r
        one, four = f"cold {request // KiB} KiB x1", f"cold {request // KiB} KiB x4"
        scale, each = ratio(four, one)
        print(f"  {'four readers / one':24s} {scale:6.2f}x   ({rates(each)}), {request // KiB} KiB requests")
    for request in REQUESTS:
        base = f"numpy {request // KiB} KiB"
        print(f"  {base + ' assembling':24s} {median([gbps(base, i) for i in range(rounds)]):6.2f} GB/s")
        for readers in READERS:
            name = f"cached {request // KiB} KiB x{readers}"
            r, each = ratio(name, base)
            print(
                f"  {name:24s} {median([gbps(name, i) for i in range(rounds)]):6.2f} GB/s"
                f"   {busy(name):4.1f} cores busy   {r:4.2f}x numpy assembling the same requests ({rates(each)})"
            )
            out[name] = r
    shown = ", ".join(f"{k} {v}" for k, v in sorted(stats.items()) if "band" in k or "cache" in k)
    print(f"  core stats after the cached passes: {shown}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "zarrfs-bench-kf")
    parser.add_argument("--size-mib", type=int, default=1024, help="the array's size (16384 float32 columns)")
    parser.add_argument("--codecs", default="zstd,blosc-lz4")
    parser.add_argument("--chunks", default="1024,1024", help="4 MiB chunks: 1024,1024 or 64,16384")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache-mib", type=int, default=0, help="the decoded-chunk cache (default: twice the array)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    rows = args.size_mib * MiB // (COLUMNS * 4)
    chunks = tuple(min(int(c), n) for c, n in zip(args.chunks.split(","), (rows, COLUMNS)))
    cache = (args.cache_mib or 2 * args.size_mib) * MiB
    for codec in args.codecs.split(","):
        bench_codec(args.dir, codec, rows, chunks, args.rounds, cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
