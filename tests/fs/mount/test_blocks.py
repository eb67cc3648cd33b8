"""`du` of a mount counts each array's data once: `data` (or `data.jsonl`) and the metadata
documents report their blocks, the views derived from them (data.npy, chunk files, the
legacy views, info, dataset.nc, /.zarrfs/) none, as /proc's files do (docs/posix.md).
The array is zarr-python's."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import zarr


def blocks(path) -> int:
    return os.stat(path).st_blocks


def test_du_counts_an_arrays_data_once_and_no_derived_view(mount, tmp_path):
    store = tmp_path / "s.zarr"
    root = zarr.open_group(str(store), mode="w")
    climate = root.create_group("climate")
    temp = climate.create_array(
        "temp", shape=(64, 256, 256), chunks=(8, 128, 128), dtype="float32", dimension_names=("t", "y", "x")
    )
    temp[:] = np.random.default_rng(0).random((64, 256, 256), dtype="float32")
    m = mount(store)
    array = m / "climate/temp"
    size = 64 * 256 * 256 * 4
    assert blocks(array / "data") == size // 512
    assert blocks(array / "zarr.json") == -(-os.path.getsize(array / "zarr.json") // 512)
    views = [
        "data.npy",
        "info",
        "chunks/0/0/0",
        *(n for n in os.listdir(array) if n.startswith("data.") and n != "data.npy"),
    ]
    views += ["../dataset.nc"] if os.path.exists(m / "climate/dataset.nc") else []
    for name in views:
        assert os.path.getsize(array / name) > 0, name
        assert blocks(array / name) == 0, name
    assert blocks(m / ".zarrfs/stats") == 0
    du = subprocess.run(["du", "-s", "--block-size=1", str(array)], capture_output=True, text=True, check=True)
    counted = int(du.stdout.split()[0])
    assert size <= counted < size + (1 << 20), counted  # the data once, a few blocks of documents
    apparent = subprocess.run(["du", "-s", "-b", str(array)], capture_output=True, text=True, check=True)
    assert int(apparent.stdout.split()[0]) > 2 * size  # every view's size, as ls -l shows
    m.unmount()
