"""The decoded core's buffered writes to `data` (format/pending.py), without a kernel:
reads see them before they are stored, writers never lose each other's updates, and
completing a partial chunk never overwrites a chunk stored meanwhile. zarr-python reads
the store afterwards."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.format.documents import array_document_v3
from zarrfs.fs.decoded.registry import PendingRegistry
from zarrfs.store import open_store
from zarrfs.views.data import DataView

LE = {"name": "bytes", "configuration": {"endian": "little"}}
SHARDED = {
    "name": "sharding_indexed",
    "configuration": {
        "chunk_shape": [2, 2],
        "codecs": [LE],
        "index_codecs": [LE, {"name": "crc32c"}],
        "index_location": "end",
    },
}


@pytest.fixture
def hierarchy(tmp_path):
    with ThreadPoolExecutor(2) as pool:
        yield Hierarchy(open_store(str(tmp_path)), IOContext(executor=pool, cache=ChunkCache(16 << 20)))


def test_reads_see_buffered_writes_before_they_are_stored(hierarchy, tmp_path):
    original = np.arange(63, dtype="<i2").reshape(9, 7)
    zarr.create_array(str(tmp_path / "z"), shape=(9, 7), chunks=(4, 3), dtype="<i2")[...] = original
    array = hierarchy.open_node("z")
    pending = PendingRegistry().of(array)
    expected = original.copy()
    pending.write((slice(2, 6), slice(1, 5)), -5)
    pending.write((7, slice(None)), np.arange(7))
    pending.write((slice(None), -1), np.arange(9) * 2)
    expected[2:6, 1:5] = -5
    expected[7, :] = np.arange(7)
    expected[:, -1] = np.arange(9) * 2
    view = DataView(array, pending)
    assert np.frombuffer(view.read(0, view.size()), "<i2").reshape(9, 7).tolist() == expected.tolist()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "z"))[...], original)  # nothing stored yet
    pending.flush()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "z"))[...], expected)


@pytest.mark.parametrize("codecs", [[LE], [SHARDED]], ids=["plain", "sharded"])
def test_concurrent_writers_to_one_chunk_lose_nothing(hierarchy, tmp_path, codecs):
    """Two writers, each with its own Array object of the node (a node read anew
    mid-write), update disjoint elements of one chunk or shard at once."""
    hierarchy.create_array("a", array_document_v3((3, 6), (4, 6), "int16", 0, codecs))
    registry = PendingRegistry()
    arrays = [hierarchy.open_node("a"), hierarchy.open_node("a")]

    def writer(k: int) -> None:
        pending = registry.of(arrays[k])
        for i in range(3):
            for j in range(3):
                pending.write((i, 2 * j + k), 10 * i + j + 1 + 100 * k)
                if j == 1:
                    pending.flush()

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(writer, [0, 1]))
    for pending in registry.dirty():
        pending.flush()
    expected = np.zeros((3, 6), "i2")
    for k in (0, 1):
        for i in range(3):
            for j in range(3):
                expected[i, 2 * j + k] = 10 * i + j + 1 + 100 * k
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"))[...], expected)


def test_a_chunk_replaced_while_a_flush_completes_a_partial_chunk_survives(hierarchy, tmp_path):
    """A buffered partial chunk is completed from the stored one when flushed; a chunk
    file stored meanwhile (replace_chunk) waits for the flush and is not overwritten."""
    hierarchy.create_array("a", array_document_v3((4,), (4,), "int16", 0, [LE]))
    pending = PendingRegistry().of(hierarchy.open_node("a"))
    pending.write((0,), 7)
    replace = threading.Thread(target=pending.replace_chunk, args=((0,), np.array([1, 2, 3, 9], "i2")))
    read = pending.array.read_chunks

    def read_then_let_the_other_writer_in(coords_list, consume=None):
        chunks = read(coords_list, consume)
        replace.start()
        replace.join(timeout=0.5)  # blocks while the flush holds the pending writes
        return chunks

    pending.array.read_chunks = read_then_let_the_other_writer_in
    pending.flush()
    replace.join()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"))[...], [1, 2, 3, 9])


def test_buffered_sizes_follow_partial_and_complete_chunks(hierarchy, tmp_path):
    """What the dirty limit and write-behind go by: bytes of pending chunks, and of those
    wholly written, as chunks are started, completed, read (completing them from the
    store) and stored."""
    zarr.create_array(str(tmp_path / "s"), shape=(8, 6), chunks=(4, 3), dtype="<f8")[...] = 1.0
    pending = PendingRegistry().of(hierarchy.open_node("s"))
    chunk = 4 * 3 * 8
    pending.write((slice(0, 4), slice(0, 3)), 2.0)  # chunk (0, 0) whole
    pending.write((slice(0, 2), slice(3, 6)), 3.0)  # half of chunk (0, 1)
    pending.write((slice(4, 5), slice(0, 1)), 4.0)  # one element of chunk (1, 0)
    assert (pending.nbytes, pending.complete_nbytes) == (3 * chunk, chunk)
    pending.write((slice(2, 4), slice(3, 6)), 5.0)  # the rest of chunk (0, 1)
    assert (pending.nbytes, pending.complete_nbytes) == (3 * chunk, 2 * chunk)
    assert pending.get((1, 0))[0, 0] == 4.0  # completed from the store to be read
    assert (pending.nbytes, pending.complete_nbytes) == (3 * chunk, 3 * chunk)
    assert pending.store_complete() == 3
    assert (pending.nbytes, pending.complete_nbytes) == (0, 0)
    pending.write((7, 5), 6.0)
    assert (pending.nbytes, pending.complete_nbytes) == (chunk, 0)
    pending.flush()
    assert (pending.nbytes, pending.complete_nbytes) == (0, 0)
    expected = np.ones((8, 6))
    expected[0:4, 0:3], expected[0:4, 3:6], expected[4, 0], expected[7, 5] = (
        2.0,
        [[3.0] * 3] * 2 + [[5.0] * 3] * 2,
        4.0,
        6.0,
    )
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "s"))[...], expected)
