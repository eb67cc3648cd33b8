"""The demo hierarchy mounts, lists and unmounts cleanly."""

import os

from tests.conftest import zarrfs


def test_demo_hierarchy_mounts_lists_and_unmounts(mount, tmp_path):
    zarrfs("demo", tmp_path / "demo.zarr")
    m = mount(tmp_path / "demo.zarr")
    assert {"climate", "images", "zarr.json"} <= set(os.listdir(m.path))
    assert "data.npy" in os.listdir(m / "climate/temp")
    m.unmount()
