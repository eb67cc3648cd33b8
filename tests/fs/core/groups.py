"""Groups of many small arrays for the kernel-free tests of large groups: xarray's layout
(arrays over y and x beside their coordinate arrays), written by zarr-python."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def xarray_group(root: Path, n: int, *, values: bool = False) -> None:
    """n small 2-D arrays over y and x, beside their coordinate arrays; with `values`,
    array i holds 0..19 + i (else nothing is stored: fill values)."""
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for name, size in (("y", 4), ("x", 5)):
        coordinate = group.create_array(name, shape=(size,), chunks=(size,), dtype="float64", dimension_names=[name])
        coordinate[...] = range(size)
    for i in range(n):
        array = group.create_array(
            f"a{i:03d}", shape=(4, 5), chunks=(4, 5), dtype="float32", dimension_names=["y", "x"]
        )
        if values:
            array[...] = np.arange(20, dtype="float32").reshape(4, 5) + i


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(2) as executor:
        yield executor
