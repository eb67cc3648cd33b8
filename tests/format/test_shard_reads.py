"""Reads of inner chunks by their shard's index while the shard is rewritten: a write
repacks the whole shard, so bytes located by the index read before it are of another
version; such a read is made again from the shard read whole (index and chunks of one
version). Values come from zarr-python."""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.store import open_store

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


class HookStore:
    """A store that runs `hook` once, just before its first read of a span of a value."""

    def __init__(self, store) -> None:
        self._store = store
        self.hook = None

    def get_partial_values(self, requests, *args, **kwargs):
        hook = self.hook
        if hook is not None and any(
            r is not None and r.suffix_length is None and r.end is not None for _, r in requests
        ):
            self.hook = None
            hook()
        return self._store.get_partial_values(requests, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._store, name)


def _sharded(root) -> np.ndarray:
    """One shard of 8 uncompressed inner chunks; chunk 0 is the fill value (not stored), so
    that a write to it moves every other chunk's bytes."""
    values = np.arange(64, dtype="<i4")
    values[:8] = 0
    zarr.create_array(
        str(root / "a"), shape=(64,), chunks=(8,), shards=(64,), dtype="<i4", compressors=None, fill_value=0
    )[...] = values
    return values


@pytest.mark.parametrize("pools", [False, True], ids=["inline", "pools"])
def test_a_chunk_read_while_a_neighbour_in_its_shard_is_written_reads_its_own_values(tmp_path, pools):
    values = _sharded(tmp_path)
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage:
        context = IOContext(
            executor=codecs if pools else None,
            io_executor=io_stage if pools else None,
            cache=ChunkCache(16 << 20),
            shard_indexes=ChunkCache(1 << 20),
        )
        store = HookStore(open_store(str(tmp_path), None))
        node = Hierarchy(store, context).open_node("a")

        def write_chunk_0() -> None:  # another open of the mount writes chunks/0 meanwhile
            writer = threading.Thread(target=node.write_chunks, args=({(0,): np.full(8, -1, "<i4")},))
            writer.start()
            writer.join()

        store.hook = write_chunk_0  # between the read of the index and that of chunk 7's bytes
        assert np.array_equal(node.read_chunks([(7,)])[0], values[56:64])
        assert store.hook is None  # the write did come in between
        assert np.array_equal(node.read_chunks([(3,)])[0], values[24:32])
    theirs = zarr.open_array(str(tmp_path / "a"), mode="r")[...]
    assert (theirs[:8] == -1).all() and np.array_equal(theirs[8:], values[8:])


def test_a_shard_rewritten_by_another_writer_is_read_with_a_fresh_index_once_the_old_one_expired(tmp_path):
    """The mount keeps shard indexes for --metadata-ttl (0 here): zarr-python rewrites the
    shard, moving chunk 7's bytes, and chunk 7 then reads zarr-python's values."""
    values = _sharded(tmp_path)
    context = IOContext(cache=ChunkCache(16 << 20), shard_indexes=ChunkCache(1 << 20, max_age=0))
    node = Hierarchy(open_store(str(tmp_path), None), context).open_node("a")
    assert np.array_equal(node.read_chunks([(1,)])[0], values[8:16])  # its shard's index read
    zarr.open_array(str(tmp_path / "a"))[0:8] = -1  # another writer fills inner chunk 0
    assert np.array_equal(node.read_chunks([(7,)])[0], values[56:64])


def test_cache_entries_with_a_max_age_are_served_until_it_passes(monkeypatch):
    from zarrfs.format import chunk_cache

    now = [100.0]
    monkeypatch.setattr(chunk_cache.time, "monotonic", lambda: now[0])
    cache = ChunkCache(1 << 20, max_age=10)
    cache.put(("a", (0,)), np.zeros(4))
    now[0] += 9.9
    assert cache.get(("a", (0,))) is not None
    now[0] += 0.1
    assert cache.get(("a", (0,))) is None and cache.nbytes == 0
    forever = ChunkCache(1 << 20)
    forever.put(("a", (0,)), np.zeros(4))
    now[0] += 1e9
    assert forever.get(("a", (0,))) is not None
