"""Fixtures of the filesystem tests (the mounts themselves come from tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr


@pytest.fixture
def store(tmp_path) -> Path:
    """A hierarchy written by zarr-python: v3 plain, v3 sharded, v2 F-order big-endian."""
    root = tmp_path / "store.zarr"
    g = zarr.open_group(root, mode="w")
    a = g.create_array("img", shape=(10, 12), chunks=(4, 5), dtype="float32", fill_value=0.0)
    a[:] = np.arange(120, dtype="float32").reshape(10, 12)
    s = g.create_array("sharded", shape=(9, 10), chunks=(2, 3), shards=(4, 6), dtype="int16", fill_value=-1)
    s[:4] = np.arange(40, dtype="int16").reshape(4, 10)
    v2 = zarr.open_group(root / "legacy", mode="w", zarr_format=2)
    b = v2.create_array("be", shape=(7, 6), chunks=(3, 4), dtype=">i4", order="F", fill_value=0)
    b[:] = np.arange(42).reshape(7, 6)
    return root
