"""A zip file as the source: mounted read-only, its arrays equal zarr-python's reads of
the same zip (the zarrita-js corpus copies)."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest
import zarr
from zarr.storage import ZipStore

from tests.conftest import CORPORA

ZIP = CORPORA / "zarrita-js" / "v3" / "data.zipped_from_within.zarr.zip"
ARRAYS = ["1d.contiguous.i4", "2d.chunked.ragged.i2", "3d.chunked.mixed.i2.F", "1d.chunked.compressed.sharded.i2"]


def test_a_zip_source_mounts_read_only_with_zarr_pythons_values(mount):
    m = mount(ZIP)
    group = zarr.open_group(ZipStore(ZIP, mode="r"), mode="r")
    for name in ARRAYS:
        theirs = group[name][...]
        ours = np.load(m / name / "data.npy")
        np.testing.assert_array_equal(ours, theirs, err_msg=name)
    with pytest.raises(OSError) as info:
        os.mkdir(m / "new")
    assert info.value.errno == errno.EROFS
