"""The decoded core's hot-window policy (fs/decoded/hot.py) over real views, without a
kernel: random reads that keep coming back to a window of `data` or `data.npy` make it
hot once, and its bytes (for the page cache push) are the file's own."""

from __future__ import annotations

import io
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.fs.decoded.hot import HOT_AFTER, HOT_WINDOW, HotWindows
from zarrfs.fs.decoded.view_files import ViewFile
from zarrfs.store import open_store
from zarrfs.views.ahead.policy import DecodeAhead
from zarrfs.views.data import DataView
from zarrfs.views.npy import NpyView

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


@pytest.fixture(
    params=[((64, 48), (8, 48), "<f4"), ((6, 7, 9), (2, 3, 4), ">i4"), ((300, 1000), (50, 100), "<f8")], ids=str
)
def array(request, tmp_path):
    shape, chunks, dtype = request.param
    values = np.random.default_rng(3).integers(0, 1000, size=shape).astype(dtype)
    zarr_format = 2 if dtype.startswith(">") else 3
    zarr.create_array(str(tmp_path / "a"), shape=shape, chunks=chunks, dtype=dtype, zarr_format=zarr_format)[...] = (
        values
    )
    with ThreadPoolExecutor(2) as pool:
        context = IOContext(executor=pool, cache=ChunkCache(64 << 20))
        yield Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a"), values


def _opened(view) -> ViewFile:
    return ViewFile(view, HotWindows(view.size()), direct_io=False, keep_cache=True, ahead=DecodeAhead(view))


def _jumping_offsets(span: int, count: int, size: int = 64) -> list[int]:
    """Offsets of `count` reads of `size` bytes within [0, span), each far from where the
    previous one ended (so none looks sequential)."""
    return [(k * 997) % (span - size) for k in range(count)]


def test_random_reads_make_their_window_hot_and_an_untracked_read_reads_it_whole(array):
    node, values = array
    expected = values.astype(values.dtype.newbyteorder("<")).tobytes()
    view = DataView(node)
    file = _opened(view)
    file.read(0, len(expected))  # every chunk decoded
    assert file.hot_windows() == []  # a sequential reader makes nothing hot
    span = min(len(expected), HOT_WINDOW)
    offsets = _jumping_offsets(span, HOT_AFTER // 64)
    for offset in offsets[:-1]:
        assert bytes(file.read(offset, 64, wait=False)) == expected[offset : offset + 64]
    assert file.hot_windows() == []  # not yet
    file.read(offsets[-1], 64, wait=False)
    assert file.hot_windows() == [(0, span)]
    assert bytes(file.read(0, span, wait=False, track=False)) == expected[:span]
    assert file.hot_windows() == []  # taken once


def test_untracked_reads_leave_the_read_pattern_as_it_was(array):
    """The notifier's reads of windows to push (`track=False`) are none of a reader's: as
    many jumping reads as make a window hot, untracked, make none."""
    node, values = array
    expected = values.astype(values.dtype.newbyteorder("<")).tobytes()
    file = _opened(DataView(node))
    file.read(0, len(expected))
    span = min(len(expected), HOT_WINDOW)
    for offset in _jumping_offsets(span, 2 * HOT_AFTER // 64):
        assert bytes(file.read(offset, 64, wait=False, track=False)) == expected[offset : offset + 64]
    assert file.hot_windows() == []


def test_a_hot_window_of_npy_is_placed_in_that_files_offsets(array):
    node, values = array
    buf = io.BytesIO()
    np.save(buf, values.astype(values.dtype.newbyteorder("<")))
    expected = buf.getvalue()
    view = NpyView(node)
    file = _opened(view)
    file.read(0, len(expected))
    header = len(view.header)
    for offset in _jumping_offsets(min(len(expected) - header, HOT_WINDOW - header), HOT_AFTER // 64):
        file.read(header + offset, 64, wait=False)
    assert file.hot_windows() == [(0, min(HOT_WINDOW, len(expected)))]
    assert bytes(file.read(0, min(HOT_WINDOW, len(expected)), wait=False, track=False)) == expected[:HOT_WINDOW]
