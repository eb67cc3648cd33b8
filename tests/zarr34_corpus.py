"""The committed corpus of arrays zarr-python 3.4 wrote with the registry's codecs
(tests/data/zarr34/, made by make_codecs.py there) and of N5 datasets with the
`n5_default` codec (n5/, made by make_n5.py there): where each lies, what its oracles
read back from each array, and how to make a package look absent to a process."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from itertools import product
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent / "data" / "zarr34" / "codecs"
STORE = ROOT / "store.zarr"
NAMES = sorted(p.stem for p in (ROOT / "expected").glob("*.npy"))
# arrays whose serializer is a package of its own (the extra-codecs extra)
NEEDS_PACKAGE = {name: name.split("_")[0] for name in NAMES if name.split("_")[0] in ("pcodec", "zfpy")}

# N5 datasets that tensorstore (ts_*: edge blocks whole) and z5py (z5_*: edge blocks
# truncated) wrote, with zarr-n5's zarr.json; the values tensorstore and zarr-n5 read
N5_ROOT = ROOT.parent / "n5"
N5_STORE = N5_ROOT / "store"
N5_NAMES = sorted(p.stem for p in (N5_ROOT / "expected").glob("*.npy"))


def n5_expected(name: str) -> np.ndarray:
    return np.load(N5_ROOT / "expected" / f"{name}.npy")


def n5_expected_chunks(name: str):
    """As expected_chunks, for an N5 dataset (its fill value is 0)."""
    doc = metadata(name, N5_STORE)
    return chunks_of(n5_expected(name), tuple(doc["chunk_grid"]["configuration"]["chunk_shape"]), 0)


def metadata(name: str, store: Path = STORE) -> dict:
    return json.loads((store / name / "zarr.json").read_text())


def expected(name: str) -> np.ndarray:
    """The values zarr-python 3.4 read from the array."""
    return np.load(ROOT / "expected" / f"{name}.npy")


def written(name: str) -> tuple[tuple[slice, ...], np.ndarray]:
    """The region zarr-python was asked to write and the values it was given."""
    region = json.loads((ROOT / "regions.json").read_text())[name]
    return tuple(slice(a, b) for a, b in region), np.load(ROOT / "written" / f"{name}.npy")


def fill_value(name: str) -> np.generic:
    doc = metadata(name)
    dtype = np.dtype(doc["data_type"])
    value = doc["fill_value"]
    return dtype.type(float(value) if isinstance(value, str) else value)


def chunk_shape(name: str) -> tuple[int, ...]:
    """The shape of the chunk files: the inner chunks where sharding is the only codec
    (behind array-to-array codecs the shard is decoded whole, and is the chunk file)."""
    doc = metadata(name)
    codecs = doc["codecs"]
    if len(codecs) == 1 and codecs[0]["name"] == "sharding_indexed":
        return tuple(codecs[0]["configuration"]["chunk_shape"])
    return tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])


def expected_chunks(name: str):
    """(chunk coordinates, the chunk file's expected values): the expected values in the
    chunk, the fill value where the chunk reaches past the array."""
    return chunks_of(expected(name), chunk_shape(name), fill_value(name))


def chunks_of(values: np.ndarray, shape: tuple[int, ...], fill) -> Iterator[tuple[tuple[int, ...], np.ndarray]]:
    """(chunk coordinates, chunk) for chunks of `shape` over `values`, padded with `fill`."""
    for coords in product(*(range(math.ceil(n / c)) for n, c in zip(values.shape, shape))):
        chunk = np.full(shape, fill, dtype=values.dtype)
        region = tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(coords, shape, values.shape))
        chunk[tuple(slice(0, r.stop - r.start) for r in region)] = values[region]
        yield coords, chunk


def hiding_packages(directory: Path, *packages: str) -> Path:
    """A directory to put first on PYTHONPATH in which importing `packages` fails, as it
    does where they are not installed."""
    directory.mkdir(parents=True, exist_ok=True)
    for package in packages:
        (directory / f"{package}.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{package}'\", name={package!r})\n"
        )
    return directory


def installed(package: str) -> bool:
    """Whether `package` can be imported here (a codec's optional package)."""
    try:
        __import__(package)
    except ImportError:
        return False
    return True
