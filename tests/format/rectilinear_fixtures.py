"""The rectilinear-grid corpus written by zarr-python 3.4 (tests/data/zarr34): where it
lies, the values zarr-python read back, and each chunk as the chunk files show it,
worked out here from the stored `zarr.json` alone (not by the code under test)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parents[1] / "data" / "zarr34" / "rectilinear"


def zarr_writes_rectilinear() -> bool:
    """Whether the zarr-python installed writes rectilinear grids (3.4 on)."""
    import zarr

    major, minor = (int(p) for p in zarr.__version__.split(".")[:2])
    return (major, minor) >= (3, 4)


needs_zarr34 = pytest.mark.skipif(not zarr_writes_rectilinear(), reason="zarr-python < 3.4 writes no rectilinear grids")


def array_names(corpus: Path) -> list[str]:
    return sorted(p.stem for p in (corpus / "expected").glob("*.npy") if "." not in p.stem)


def expected_values(corpus: Path, name: str) -> np.ndarray:
    return np.load(corpus / "expected" / f"{name}.npy", allow_pickle=False)


def document(corpus: Path, name: str) -> dict:
    return json.loads((corpus / "store" / name / "zarr.json").read_text())


def chunk_sizes(corpus: Path, name: str) -> list[list[int]]:
    """The full size of each chunk file per dimension (the inner chunks of a sharded
    array), only chunks that overlap the array."""
    doc = document(corpus, name)
    shape = doc["shape"]
    codecs = doc["codecs"]
    if codecs[0]["name"] == "sharding_indexed":
        inner = codecs[0]["configuration"]["chunk_shape"]
        return [[n] * -(-extent // n) for n, extent in zip(inner, shape)]
    grid = doc["chunk_grid"]
    if grid["name"] == "regular":
        return [[n] * -(-extent // n) for n, extent in zip(grid["configuration"]["chunk_shape"], shape)]
    out = []
    for declared, extent in zip(grid["configuration"]["chunk_shapes"], shape):
        if isinstance(declared, int):
            sizes = [declared] * -(-extent // declared)
        else:
            sizes = []
            for item in declared:
                sizes += [item[0]] * item[1] if isinstance(item, list) else [item]
        kept, end = [], 0
        for size in sizes:
            if end >= extent:
                break
            kept.append(size)
            end += size
        out.append(kept)
    return out


def expected_chunks(corpus: Path, name: str) -> dict[tuple[int, ...], np.ndarray]:
    """Every chunk (finest grid) at its full size: the values inside the array, past its
    end what was written there before it shrank (if it did), else the fill value."""
    values = expected_values(corpus, name)
    before = corpus / "expected" / f"{name}.before_resize.npy"
    if before.exists():
        values = np.load(before, allow_pickle=False)
    fill = np.array(document(corpus, name)["fill_value"], dtype=values.dtype)
    sizes = chunk_sizes(corpus, name)
    starts = [list(itertools.accumulate([0, *s[:-1]])) for s in sizes]
    out = {}
    for coords in itertools.product(*(range(len(s)) for s in sizes)):
        shape = tuple(sizes[d][c] for d, c in enumerate(coords))
        chunk = np.full(shape, fill, dtype=values.dtype)
        region = tuple(slice(starts[d][c], starts[d][c] + shape[d]) for d, c in enumerate(coords))
        part = values[region]
        chunk[tuple(slice(0, n) for n in part.shape)] = part
        out[coords] = chunk
    assert len(out) == math.prod(len(s) for s in sizes)
    return out


def little_endian_bytes(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).tobytes()
