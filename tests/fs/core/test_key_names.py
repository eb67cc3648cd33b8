"""Which names in an array directory are the store's keys (key_names.py), for each key
layout zarr-python writes, what the decoded core does with them (store_keys.py), and the
dimension names a `.npy` copied into an xarray group gets (npy_dimensions.py): without a
kernel."""

from __future__ import annotations

import errno
import os
import warnings

import numpy as np
import pytest
import zarr

from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.fs.decoded.key_names import KEY, KEY_DIR, name_kind
from zarrfs.fs.decoded.npy_dimensions import infer_names
from zarrfs.fs.errors import errno_for
from zarrfs.store import open_store


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    root = tmp_path_factory.mktemp("keys") / "k.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(root, mode="w")
        group.create_array("v3", shape=(10, 12, 4), chunks=(4, 5, 4), dtype="u1")
        group.create_array("scalar", shape=(), dtype="u1")
        group.create_array("dotted", shape=(10, 12), chunks=(4, 5), dtype="u1", chunk_key_encoding={"name": "v2"})
        zarr.create_array(root / "old", shape=(10, 12), chunks=(4, 5), dtype="u1", zarr_format=2)
        zarr.create_array(
            root / "slash",
            shape=(10, 12),
            chunks=(4, 5),
            dtype="u1",
            zarr_format=2,
            chunk_key_encoding={"name": "v2", "separator": "/"},
        )
        zarr.create_array(root / "old0", shape=(), dtype="u1", zarr_format=2)
    hierarchy = open_hierarchy(open_store(str(root)), IOContext(), metadata_ttl=0)
    return {name: hierarchy.open_node(name) for name in ("v3", "scalar", "dotted", "old", "slash", "old0")}


@pytest.mark.parametrize(
    ("array", "prefix", "name", "kind"),
    [
        ("v3", "", "c", KEY_DIR),
        ("v3", "c", "2", KEY_DIR),
        ("v3", "c", "3", KEY),  # past the grid: a key as --raw shows it (the store has none)
        ("v3", "c/2", "1", KEY_DIR),
        ("v3", "c/2/1", "0", KEY),
        ("v3", "c/2/1", "0.0123abcd.partial", KEY),  # zarr-python's temporary
        ("v3", "", "0.0", None),
        ("v3", "", "data", None),
        ("scalar", "", "c", KEY),
        ("dotted", "", "2.1", KEY),
        ("dotted", "", "c", None),
        ("old", "", "2.1", KEY),
        ("old", "", "2.1.0", None),
        ("slash", "", "2", KEY_DIR),
        ("slash", "", "3", None),
        ("slash", "2", "1", KEY),
        ("old0", "", "0", KEY),
    ],
)
def test_key_names_follow_each_arrays_chunk_key_encoding(arrays, array, prefix, name, kind):
    assert name_kind(arrays[array], prefix, name) == kind


GROUP = [(("time", "lat", "lon"), (4, 5, 6)), (("lat", "lon"), (5, 6)), (("y", "x"), (5, 6))]


@pytest.mark.parametrize(
    ("shape", "names"),
    [
        ((4, 5, 6), ["time", "lat", "lon"]),  # a sibling of the same shape
        ((6, 4, 6), ["dim_0", "dim_1", "dim_2"]),  # 6: lon or x
        ((5, 6), ["dim_0", "dim_1"]),  # two siblings of that shape disagree, lat or y: ambiguous
        ((3, 7), ["dim_0", "dim_1"]),
        ((4, 4), ["dim_0", "dim_1"]),  # one dimension for both axes: xarray refuses that
    ],
)
def test_a_npy_copied_into_an_xarray_group_gets_dimension_names(shape, names):
    assert infer_names(shape, GROUP) == names


def test_each_axis_takes_the_one_group_dimension_of_its_length():
    assert infer_names((6, 4), GROUP[:2]) == ["lon", "time"]


def test_fallback_names_never_conflict_with_the_groups_own():
    assert infer_names((3,), [(("dim_0",), (8,))]) == ["dim_0_3"]


def _read(core: DecodedCore, path: str) -> bytes:
    opened = core.open(path, os.O_RDONLY)
    try:
        return opened.read(0, core.lookup(path).size)
    finally:
        opened.release()


def test_the_decoded_core_serves_keys_as_stored_and_its_views_follow_them(tmp_path):
    root = tmp_path / "k.zarr"
    values = np.arange(64, dtype="<i2").reshape(8, 8)
    zarr.create_array(root, shape=(8, 8), chunks=(4, 4), dtype="<i2", fill_value=0)[...] = values
    hierarchy = open_hierarchy(open_store(str(root)), IOContext(cache=ChunkCache(1 << 20)), metadata_ttl=60)
    core = DecodedCore(hierarchy, metadata_ttl=60)
    assert _read(core, "data") == values.tobytes()  # decoded and cached first
    assert [name for name, _ in core.list_dir("c")] == ["0", "1"]
    assert core.lookup("c/1/0").size == (root / "c/1/0").stat().st_size
    assert "c" not in {name for name, _ in core.list_dir("")}
    with pytest.raises(Exception) as missing:
        core.lookup("c/1/7")
    assert errno_for(missing.value) == errno.ENOENT
    # zarr-python's way: a temporary below c/, renamed onto the key
    opened, _ = core.create("c/0/0.1234.partial")
    opened.write(0, (root / "c/1/1").read_bytes())
    opened.flush()
    opened.release()
    core.rename("c/0/0.1234.partial", "c/0/0")
    expected = values.copy()
    expected[:4, :4] = values[4:, 4:]
    assert _read(core, "data") == expected.tobytes()
    assert sorted(os.listdir(root / "c/0")) == ["0", "1"]
    core.unlink("c/0/0")
    expected[:4, :4] = 0
    assert _read(core, "chunks/0/0") == expected[:4, :4].tobytes()
    core.close()
