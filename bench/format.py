"""Whole-array read throughput of the format layer against zarr-python, same data, same run.

    python bench/format.py [DIR] [--size-mib 1024] [--repeat 3]

Creates (or reuses, in DIR) a float32 array of --size-mib MiB written by zarr-python with
zstd and 1 MiB chunks, holding smooth data with a little noise so that it compresses as
real measurements do. Then reads it whole with our layer (a 2-thread executor, as the
filesystem uses it) and with zarr-python `arr[:]`, taking turns, best of --repeat each, and
prints MB/s for both and their ratio."""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs  # noqa: E402

from zarrfs.format import Hierarchy, IOContext  # noqa: E402
from zarrfs.store import open_store  # noqa: E402

CHUNK = (512, 512)  # float32: 1 MiB


def smooth_rows(y0: int, rows: int, width: int, rng: np.random.Generator) -> np.ndarray:
    y = np.arange(y0, y0 + rows, dtype=np.float32)[:, None]
    x = np.arange(width, dtype=np.float32)[None, :]
    field = 20 * np.sin(y / 300) * np.cos(x / 450) + 5 * np.sin((x + y) / 97) + 15
    noise = rng.normal(0, 0.05, size=field.shape).astype(np.float32)
    return np.round(field + noise, 2).astype(np.float32)


def ensure_array(directory: Path, size_mib: int) -> Path:
    path = directory / f"bench_f4_{size_mib}MiB.zarr"
    side = math.isqrt(size_mib * (1 << 20) // 4)
    shape = (side, side)
    if (path / "zarr.json").exists() and json.loads((path / "zarr.json").read_text())["shape"] == list(shape):
        return path
    print(f"writing {shape} float32 ({size_mib} MiB) with zarr-python to {path} ...", flush=True)
    array = zarr.create_array(
        str(path),
        shape=shape,
        chunks=CHUNK,
        dtype="float32",
        overwrite=True,
        compressors=[zarr.codecs.ZstdCodec(level=3)],
    )
    rng = np.random.default_rng(0)
    for y0 in range(0, side, 2048):
        rows = min(2048, side - y0)
        array[y0 : y0 + rows] = smooth_rows(y0, rows, side, rng)
    return path


def best_of_interleaved(repeat: int, reads: dict) -> dict[str, tuple[float, np.ndarray]]:
    """Best time of each read over `repeat` rounds, the reads taking turns in each round
    so that a change in the machine's load biases none of them."""
    best = {name: (math.inf, None) for name in reads}
    for _ in range(repeat):
        for name, read in reads.items():
            start = time.perf_counter()
            values = read()
            elapsed = time.perf_counter() - start
            best[name] = (min(best[name][0], elapsed), values)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default=str(Path(tempfile.gettempdir()) / "zarrfs-bench"))
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    directory = Path(args.directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = ensure_array(directory, args.size_mib)
    stored = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())

    with ThreadPoolExecutor(2) as executor:
        hierarchy = Hierarchy(open_store(str(directory), read_only=True), IOContext(executor=executor))
        ours = hierarchy.open_node(path.name)
        theirs = zarr.open_array(str(path), mode="r")
        best = best_of_interleaved(args.repeat, {"ours": ours.read, "theirs": lambda: theirs[:]})
    (ours_time, ours_values), (theirs_time, theirs_values) = best["ours"], best["theirs"]
    if not np.array_equal(ours_values, theirs_values):
        raise SystemExit("the two reads differ")

    nbytes = ours_values.nbytes
    ours_rate, theirs_rate = nbytes / ours_time / 1e6, nbytes / theirs_time / 1e6
    print(
        f"array: {ours.shape} float32, {nbytes / 2**20:.0f} MiB decoded, {stored / 2**20:.0f} MiB stored "
        f"(ratio {nbytes / stored:.2f}), {ours.chunk_grid.chunk_count} chunks of 1 MiB, zstd"
    )
    print(f"zarrfs format layer: {ours_rate:8.1f} MB/s  (best of {args.repeat}: {ours_time:.2f} s)")
    print(f"zarr-python arr[:]:  {theirs_rate:8.1f} MB/s  (best of {args.repeat}: {theirs_time:.2f} s)")
    print(f"ratio zarrfs / zarr-python: {ours_rate / theirs_rate:.2f}")


if __name__ == "__main__":
    main()
