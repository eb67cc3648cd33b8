"""The read pipeline (format/reads.py) beyond what it reads: the codecs a first read needs
are made while its fetches are in flight, and a chunk decoded from a shard read in one
piece keeps none of the shard's other bytes alive (the cache counts only the chunk)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for
from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.store import open_store


class GatedStore:
    """A store whose reads of values wait until `gate` is set."""

    def __init__(self, store) -> None:
        self._store = store
        self.gate = threading.Event()
        self.gate.set()

    def get_partial_values(self, *args, **kwargs):
        self.gate.wait(10)
        return self._store.get_partial_values(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._store, name)


@pytest.fixture
def context():
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage:
        yield IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(16 << 20))


def test_the_first_read_makes_its_codecs_while_its_fetches_are_in_flight(tmp_path, context):
    values = np.arange(100, dtype="<f4")
    zarr.create_array(str(tmp_path / "a"), shape=values.shape, chunks=(10,), dtype="<f4",
                      compressors=zarr.codecs.ZstdCodec())[...] = values
    store = GatedStore(open_store(str(tmp_path), None, read_only=True))
    node = Hierarchy(store, context).open_node("a")
    zstd = node.pipeline.bytes_bytes[0]
    assert "_impl" not in vars(zstd)  # made on first use (numcodecs imported then)
    store.gate.clear()
    futures = node.start_reads([(0,), (1,)])
    wait_for(lambda: "_impl" in vars(zstd))
    assert not any(f.done() for f in futures)
    store.gate.set()
    assert np.array_equal(np.concatenate([f.result(10) for f in futures]), values[:20])


def _held(chunk: np.ndarray) -> int:
    """Bytes of the buffer a decoded chunk keeps alive."""
    owner = chunk
    while isinstance(owner, np.ndarray) and owner.base is not None:
        owner = owner.base
    if isinstance(owner, memoryview):
        owner = owner.obj
    return owner.nbytes if isinstance(owner, np.ndarray) else memoryview(owner).nbytes


@pytest.mark.parametrize("compressors", [None, "zstd"])
def test_a_chunk_decoded_from_a_whole_shard_holds_no_other_bytes_of_it(tmp_path, context, compressors):
    values = np.arange(64 * 64, dtype="<i4").reshape(64, 64)
    zarr.create_array(str(tmp_path / "a"), shape=values.shape, chunks=(8, 64), shards=(64, 64), dtype="<i4",
                      compressors=None if compressors is None else zarr.codecs.ZstdCodec())[...] = values
    node = Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a")
    coords = [(i, 0) for i in range(8)]
    chunks = [f.result(10) for f in node.start_reads(coords)]  # all of the shard: one read of it
    assert context.stats.snapshot()["store_requests"] == 1
    for (i, _), chunk in zip(coords, chunks):
        assert np.array_equal(chunk, values[8 * i:8 * i + 8])
        assert _held(chunk) <= chunk.nbytes
