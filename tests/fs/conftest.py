"""Fixtures of the filesystem tests (the mounts themselves come from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.conftest import Mount
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem  # noqa: F401 (fixtures)


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


@dataclass
class RawMount:
    """A `--raw` mount, what its store holds (every key: its value), and which store
    it is ("local" or "s3")."""

    mount: Mount
    stored: Callable[[], dict[str, bytes]]
    kind: str

    def __truediv__(self, other: str) -> Path:
        return self.mount / other


@pytest.fixture(params=["local", "s3"])
def raw(request, mount, tmp_path) -> RawMount:
    """An empty store mounted `--raw`: a local directory, or a prefix of an S3 bucket."""
    from tests.fs.mount.test_raw import tree_bytes

    if request.param == "local":
        store = tmp_path / "store"
        store.mkdir()
        return RawMount(mount(store, "--raw"), lambda: tree_bytes(store), "local")
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    s3 = request.getfixturevalue("s3_filesystem")
    m = mount(
        f"s3://{bucket}/data",
        "--raw",
        "--storage-option",
        f"endpoint_url={endpoint}",
        "--storage-option",
        "key=testing",
        "--storage-option",
        "secret=testing",
    )

    def stored() -> dict[str, bytes]:
        s3.invalidate_cache()
        base = f"{bucket}/data/"
        return {path[len(base) :]: s3.cat_file(path) for path in s3.find(base)}

    return RawMount(m, stored, "s3")
