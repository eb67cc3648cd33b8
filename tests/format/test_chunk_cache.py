"""The decoded-chunk cache holds no more memory than its capacity, whatever the chunk
size: an entry's own overhead counts, which for chunks of a few bytes is most of it."""

from __future__ import annotations

import tracemalloc

import numpy as np

from zarrfs.format import ChunkCache


def test_a_cache_of_tiny_chunks_holds_no_more_memory_than_its_capacity():
    capacity = 1 << 20
    cache = ChunkCache(capacity)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100_000):  # 4-byte chunks: their bytes alone would all fit
            cache.put(("a/b", (i // 300, i % 300)), np.full(1, i, dtype="<f4"))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= capacity * 1.25 and cache.nbytes <= capacity, (held, cache.nbytes)
    assert cache.get(("a/b", (333, 99))) is not None and cache.get(("a/b", (0, 0))) is None  # the newest kept


def test_a_chunk_larger_than_the_cache_is_not_kept_and_evicts_nothing():
    cache = ChunkCache(1 << 20)
    cache.put(("a", (0,)), np.zeros(1000, dtype="<f8"))
    cache.put(("a", (1,)), np.zeros(1 << 18, dtype="<f4"))  # 1 MiB of bytes, plus its entry
    assert cache.get(("a", (0,))) is not None and cache.get(("a", (1,))) is None and cache.evictions == 0


def test_reserved_memory_makes_room_for_itself_and_stays_counted_until_released():
    cache = ChunkCache(1 << 20)
    for i in range(4):
        cache.put(("a", (i,)), np.zeros(1 << 16, dtype="<f4"))  # 256 KiB each: the cache full
    cache.reserve("filling", 300 << 10)
    assert cache.get(("a", (0,))) is None and cache.get(("a", (1,))) is None  # the oldest made room
    for i in range(4, 12):  # the cache turns over twice: the reservation is never evicted
        cache.put(("a", (i,)), np.zeros(1 << 16, dtype="<f4"))
    assert cache.reserved >= 300 << 10 and cache.nbytes <= 1 << 20
    cache.invalidate("a")
    cache.discard_where("a", lambda coords: True)
    assert cache.reserved >= 300 << 10  # a node forgotten does not give it back either
    cache.release("filling")
    cache.release("filling")  # (once only)
    assert cache.reserved == 0 and cache.nbytes == 0


def test_a_node_forgotten_retires_what_is_kept_of_it_and_below_it_and_nothing_else():
    cache = ChunkCache(1 << 20)
    paths = ["g/a", "g/a/b", "g/ab", "g", "h/a", "a"]
    before = {p: cache.generation(p) for p in paths}
    for p in paths:
        cache.put((p, (0,)), np.zeros(4, dtype="<f4"), before[p])
    cache.invalidate("g/a")  # erased, moved or redefined
    changed = {p for p in paths if cache.generation(p) != before[p]}
    assert changed == {"g/a", "g/a/b"}
    assert {p for p in paths if cache.get((p, (0,))) is None} == changed
    # a chunk decoded from before is not kept under the node now there
    cache.put(("g/a", (1,)), np.zeros(4, dtype="<f4"), before["g/a"])
    assert cache.get(("g/a", (1,))) is None
    cache.invalidate("")  # the root: every node is below it
    assert all(cache.generation(p) != before[p] for p in paths)
    # generations only grow, whatever moves them
    last = cache.generation("g/a/b")
    cache.invalidate("g/a/b", [(0,)])
    cache.invalidate("g")
    assert cache.generation("g/a/b") > last


def test_a_reader_opened_before_its_node_was_invalidated_gets_a_generation_nothing_is_kept_under():
    cache = ChunkCache(1 << 20)
    born = cache.node_generation("g/a")
    assert cache.generation("g/a", born) == cache.generation("g/a")
    cache.invalidate("g/a", [(0,)])  # a write of chunks: the node is the same
    assert cache.generation("g/a", born) == cache.generation("g/a")
    cache.invalidate("g")  # erased, moved, redefined: another node may be at g/a now
    assert cache.generation("g/a", born) == -1
    cache.put(("g/a", (0,)), np.zeros(4, dtype="<f4"), -1)
    assert cache.get(("g/a", (0,))) is None
    assert cache.generation("g/a", cache.node_generation("g/a")) == cache.generation("g/a")


def test_an_entry_put_in_a_family_takes_the_place_of_the_one_before():
    cache = ChunkCache(1 << 20)
    for generation in range(50):  # a band made again after each write, under a new key
        cache.put(("a", (0,), ("band", generation)), np.zeros(1024, dtype="<f4"), family=("a", (0,)))
    cache.put(("a", (1,), ("band", 49)), np.zeros(1024, dtype="<f4"), family=("a", (1,)))
    assert cache.entry_count() == 2
    assert cache.get(("a", (0,), ("band", 49))) is not None and cache.get(("a", (0,), ("band", 48))) is None
    cache.discard([("a", (0,), ("band", 49))])  # a family whose entry went is empty again
    cache.put(("a", (0,), ("band", 50)), np.zeros(1024, dtype="<f4"), family=("a", (0,)))
    assert cache.entry_count() == 2 and cache.get(("a", (1,), ("band", 49))) is not None
