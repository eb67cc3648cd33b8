"""Read-ahead across chunk files (fs/decoded/walk.py), without a kernel: a reader that opens
the chunk files of an array one after another, as `cp -r chunks` or `cat chunks/*` do, has
the chunks past it fetched ahead, each chunk fetched once; re-reading one file, or opening
chunks far apart, fetches nothing ahead; the window stays within its share of the cache."""

from __future__ import annotations

import gc
import os
import threading
import weakref
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.fs.decoded.core import DecodedCore
from zarrfs.fs.decoded.walk import ChunkWalk
from zarrfs.store import open_store

CHUNKS = 40
CHUNK = 4096  # float32 elements: 16 KiB chunks


class CountingStore:
    """A store that counts the reads of each key (and keeps every request)."""

    def __init__(self, store) -> None:
        self._store = store
        self.reads: Counter = Counter()
        self.requests: list = []
        self._lock = threading.Lock()

    def get_partial_values(self, requests, *args, **kwargs):
        with self._lock:
            self.reads.update(key for key, _ in requests)
            self.requests += requests
        return self._store.get_partial_values(requests, *args, **kwargs)

    def chunk_reads(self) -> Counter:
        return Counter({int(k.rsplit("/", 1)[1]): n for k, n in self.reads.items() if "/c/" in k})

    def __getattr__(self, name):
        return getattr(self._store, name)


@pytest.fixture
def walked(tmp_path):
    """open(cache_bytes) -> (core, store, values) over an array of CHUNKS chunks written by zarr-python."""
    values = np.random.default_rng(4).random(CHUNKS * CHUNK, dtype="float32")
    zarr.create_array(
        str(tmp_path / "a"), shape=values.shape, chunks=(CHUNK,), dtype="<f4", compressors=zarr.codecs.ZstdCodec()
    )[...] = values
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage:

        def open_(cache_bytes: int = 64 << 20):
            store = CountingStore(open_store(str(tmp_path), None, read_only=True))
            context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(cache_bytes))
            return DecodedCore(Hierarchy(store, context), read_only=True), store, values

        yield open_


def read_chunk_file(core: DecodedCore, index: int) -> bytes:
    file = core.open(f"a/chunks/{index}", os.O_RDONLY)
    try:
        return file.read(0, CHUNK * 4)
    finally:
        file.release()


def ahead(core: DecodedCore) -> int:
    return core.stats().get("chunk_files_read_ahead", 0)


@pytest.mark.parametrize("order", ["listing", "glob"])
def test_a_walk_through_the_chunk_files_fetches_ahead_of_it_and_each_chunk_once(walked, order):
    core, store, values = walked()
    indexes = list(range(CHUNKS)) if order == "listing" else sorted(range(CHUNKS), key=str)  # 0 1 10 11 … 2 20 …
    for i in indexes:
        assert read_chunk_file(core, i) == values[i * CHUNK : (i + 1) * CHUNK].tobytes(), i
    assert set(store.chunk_reads()) == set(range(CHUNKS))
    assert max(store.chunk_reads().values()) == 1, store.chunk_reads()  # none fetched twice
    assert ahead(core) >= CHUNKS - 12, core.stats()


def test_reading_one_chunk_file_again_and_again_fetches_nothing_ahead(walked):
    core, store, values = walked()
    for _ in range(5):
        assert read_chunk_file(core, 7) == values[7 * CHUNK : 8 * CHUNK].tobytes()
    assert ahead(core) == 0 and store.chunk_reads() == Counter({7: 1})


def test_chunk_files_opened_far_apart_fetch_nothing_ahead(walked):
    core, store, _ = walked()
    for i in (0, 20, 5, 37, 12, 29, 2):
        read_chunk_file(core, i)
    assert ahead(core) == 0 and sum(store.chunk_reads().values()) == 7


def test_the_window_ahead_stays_within_its_share_of_the_cache(walked):
    """A 256 KiB cache: a quarter of it is 4 chunks, the most a walk has asked for past the
    chunk it opened last."""
    core, store, values = walked(256 << 10)
    for i in range(CHUNKS):
        assert read_chunk_file(core, i) == values[i * CHUNK : (i + 1) * CHUNK].tobytes(), i
        assert max(store.chunk_reads()) <= i + 4, (i, sorted(store.chunk_reads()))
    assert ahead(core) >= CHUNKS // 2, core.stats()


def test_a_walk_through_a_sharded_arrays_chunk_files_asks_for_its_shards_whole(tmp_path):
    """Shards of 8 inner chunks: past the first (read in pieces before the walk is seen),
    each shard is read once, whole: no index read, no ranged read."""
    values = np.random.default_rng(6).random(CHUNKS * CHUNK, dtype="float32")
    zarr.create_array(
        str(tmp_path / "a"),
        shape=values.shape,
        chunks=(CHUNK,),
        shards=(8 * CHUNK,),
        dtype="<f4",
        compressors=zarr.codecs.ZstdCodec(),
    )[...] = values
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage:
        store = CountingStore(open_store(str(tmp_path), None, read_only=True))
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(64 << 20))
        core = DecodedCore(Hierarchy(store, context), read_only=True)
        for i in range(CHUNKS):
            assert read_chunk_file(core, i) == values[i * CHUNK : (i + 1) * CHUNK].tobytes(), i
    later = [(key, byte_range) for key, byte_range in store.requests if key.startswith("a/c/") and key != "a/c/0"]
    assert sorted(later) == [(f"a/c/{s}", None) for s in range(1, CHUNKS // 8)], store.requests


def test_walks_kept_by_array_go_with_their_array(tmp_path):
    """The core keeps a walk per array in a weak mapping: the walk must not keep its array
    (a node read again, changed, is a new array) alive."""
    zarr.create_array(str(tmp_path / "a"), shape=(CHUNK,), chunks=(CHUNK,), dtype="<f4")
    node = Hierarchy(open_store(str(tmp_path), None, read_only=True), IOContext()).open_node("a")
    walks = weakref.WeakKeyDictionary({node: ChunkWalk(node)})
    del node
    gc.collect()
    assert len(walks) == 0


def test_a_walk_through_tiny_chunks_keeps_a_bounded_number_of_fetches_in_flight(tmp_path):
    """16 KiB chunks: a window of 128 MiB's worth would be 8,192 fetches queued ahead of
    every other read. It is held to AHEAD_MOST_REQUESTS, however long the walk."""
    from zarrfs.views.ahead.policy import AHEAD_MOST_REQUESTS

    zarr.create_array(
        str(tmp_path / "a"), shape=(CHUNK * 20_000,), chunks=(CHUNK,), dtype="<f4", compressors=zarr.codecs.ZstdCodec()
    )  # none stored: every chunk is the fill value
    gate = threading.Event()

    class Held(CountingStore):
        def get_partial_values(self, requests, *args, **kwargs):
            if any("/c/" in key for key, _ in requests):
                gate.wait(30)
            return super().get_partial_values(requests, *args, **kwargs)

    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage:
        try:
            context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(512 << 20))
            core = DecodedCore(
                Hierarchy(Held(open_store(str(tmp_path), None, read_only=True)), context), read_only=True
            )
            for i in range(16):
                core.open(f"a/chunks/{i}", os.O_RDONLY).release()  # opened, not read: nothing waits
            asked = ahead(core)
            queued = io_stage._work_queue.qsize()
        finally:
            gate.set()
    assert 0 < asked <= AHEAD_MOST_REQUESTS and queued <= AHEAD_MOST_REQUESTS


def test_a_chunk_file_whose_fetch_ahead_the_store_did_not_answer_fails_without_fetching_again(walked, monkeypatch):
    """The walk's fetch of chunk 5 runs to the store's deadline: the reader that waited for
    it fails with the same error (EIO), and does not ask the store again (another whole
    deadline)."""
    from zarrfs.fs.decoded import walk as walk_module
    from zarrfs.store import StoreUnavailableError

    core, store, values = walked()
    answer, waiting = threading.Event(), threading.Event()
    unanswered = []
    get = store.get_partial_values

    def stalling(requests, *args, **kwargs):
        if any(key == "a/c/5" for key, _ in requests):
            answer.wait(30)
            unanswered.append(1)
            raise StoreUnavailableError("timed out (after 3 attempts)", "a/c/5")
        return get(requests, *args, **kwargs)

    store.get_partial_values = stalling
    real_wait = walk_module.wait
    monkeypatch.setattr(walk_module, "wait", lambda futures: (waiting.set(), real_wait(futures))[1])
    for i in range(3):
        read_chunk_file(core, i)  # the walk now fetches chunks 3 to 10 ahead
    file = core.open("a/chunks/5", os.O_RDONLY)
    failed = []

    def read_refused() -> None:
        with pytest.raises(StoreUnavailableError) as refused:
            file.read(0, 64)
        failed.append(refused)

    reader = threading.Thread(target=read_refused)
    reader.start()
    assert waiting.wait(30)  # the reader waits on the walk's fetch
    answer.set()
    reader.join(30)
    file.release()
    assert failed and unanswered == [1]
    assert read_chunk_file(core, 6) == values[6 * CHUNK : 7 * CHUNK].tobytes()  # the walk goes on
    assert store.reads["a/c/6"] == 1
