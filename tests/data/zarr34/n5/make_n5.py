"""Writes tests/data/zarr34/n5/: N5 datasets written by tensorstore's `n5` driver (edge
blocks stored whole) and by z5py (edge blocks stored truncated, as N5's Java library
does), with the zarr.json that zarr-n5's `n5tozarr` adds to each node (the registry's
`n5_default` codec), and the values tensorstore and zarr-python + zarr-n5 both read back
(expected/NAME.npy). Run where tensorstore, z5py, zarr and zarr-n5 are installed:

    python tests/data/zarr34/n5/make_n5.py [OUT]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-1000, 1000, size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)


# tensorstore: name -> (N5 dimensions, blockSize, dataType, compression, region written)
TENSORSTORE = {
    "ts_u16_raw": ([5, 7], [2, 3], "uint16", {"type": "raw"}, np.s_[:, :]),
    "ts_f32_gzip": ([4, 5, 3], [3, 2, 2], "float32", {"type": "gzip", "level": 6}, np.s_[:3, :, :]),
    "ts_i64_zstd": ([9], [4], "int64", {"type": "zstd", "level": 3}, np.s_[1:9]),
    "ts_f64_blosc": (
        [6, 5],
        [4, 4],
        "float64",
        {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
        np.s_[:, :],
    ),
}
# z5py, whose numpy view lists the dimensions in reverse of N5's:
# name -> (z5py shape, z5py chunks, dtype, compression, options, region written (z5py's view))
Z5PY = {
    "z5_u16_raw": ((5, 7), (2, 3), "uint16", "raw", {}, np.s_[:, :]),
    "z5_i32_zstd": ((3, 5, 4), (2, 2, 3), "int32", "zstd", {}, np.s_[:, :4, :]),
    # (z5py's blosc metadata names "nthreads", which tensorstore refuses to read)
    "z5_f64_gzip": ((6, 5), (4, 4), "float64", "gzip", {}, np.s_[:, :]),
    "z5_u8_gzip": ((11,), (4,), "uint8", "gzip", {}, np.s_[:]),
    "z5_i8_raw": ((3, 4), (2, 3), "int8", "raw", {}, np.s_[1:, :]),
}


def write_tensorstore(root: Path) -> None:
    import tensorstore as ts

    for seed, (name, (dims, block, dtype, compression, region)) in enumerate(TENSORSTORE.items()):
        array = ts.open(
            {
                "driver": "n5",
                "kvstore": {"driver": "file", "path": str(root / name)},
                "metadata": {"dimensions": dims, "blockSize": block, "dataType": dtype, "compression": compression},
                "create": True,
            }
        ).result()
        values = _values(dims, dtype, seed)
        array[region] = values[region]


def write_z5py(root: Path) -> None:
    import z5py

    f = z5py.File(str(root), mode="a", use_zarr_format=False)
    for seed, (name, (shape, chunks, dtype, compression, options, region)) in enumerate(Z5PY.items(), 10):
        d = f.create_dataset(name, shape=shape, chunks=chunks, dtype=dtype, compression=compression, **options)
        values = _values(shape, dtype, seed)
        d[region] = values[region]


def read_back(root: Path, names: list[str]) -> dict[str, np.ndarray]:
    """Each array as tensorstore's n5 driver reads it, checked against zarr-python
    reading it through zarr-n5's codec and the zarr.json it wrote."""
    import tensorstore as ts
    import zarr
    import zarr_n5  # noqa: F401  registers the n5_default codec

    out = {}
    for name in names:
        theirs = (
            ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(root / name)}}).result().read().result()
        )
        other = zarr.open_array(str(root / name), mode="r")[...]
        assert theirs.dtype == other.dtype and theirs.tobytes() == other.tobytes(), name
        out[name] = np.asarray(theirs)
    return out


def main(out: Path) -> None:
    store = out / "store"
    if store.exists():
        shutil.rmtree(store)
    shutil.rmtree(out / "expected", ignore_errors=True)
    write_z5py(store)  # makes the N5 root ({"n5": version})
    write_tensorstore(store)
    # every directory is an N5 group, chunk directories too: take only nodes with attributes
    subprocess.run([str(Path(sys.executable).parent / "n5tozarr"), "--no-infer-groups", str(store)], check=True)
    values = read_back(store, [*TENSORSTORE, *Z5PY])
    (out / "expected").mkdir(parents=True)
    for name, array in values.items():
        np.save(out / "expected" / f"{name}.npy", array)
    writers = {p: version(p) for p in ("tensorstore", "z5py", "zarr", "zarr-n5", "numcodecs", "numpy")}
    (out / "writers.json").write_text(json.dumps({"python": sys.version.split()[0], **writers}, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
