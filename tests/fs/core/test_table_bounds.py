"""The per-mount tables that follow what the mount writes stay bounded however many nodes
it writes, erases and moves (a mount that runs for weeks): the chunk cache's generations
(format/chunk_cache.py), the decoded core's writes counted for the kernel's pages and its
changes kept for stores that wait for unmount (fs/decoded/core.py). Kernel-free."""

from __future__ import annotations

import io
import os
import random
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import zarr

from zarrfs.format import ChunkCache, IOContext, chunk_cache, open_hierarchy
from zarrfs.fs.decoded import DecodedCore, pages
from zarrfs.store import open_store


def test_generations_stay_bounded_and_never_go_back(monkeypatch):
    """Folded tables keep every generation growing: a reader that took one before a change
    of its array, of its node or of a group above it never finds it unchanged."""
    monkeypatch.setattr(chunk_cache, "GENERATIONS_KEPT", 64)
    cache = ChunkCache(1 << 20)
    rng = random.Random(49)
    watched = [f"g{i}/a{i}" for i in range(5)] + ["g0/deep/x", ""]
    taken = {path: cache.generation(path) for path in watched}
    for step in range(20_000):
        path = rng.choice(watched) if step % 50 == 0 else f"g{rng.randrange(7)}/n{step}"
        how = rng.randrange(3)
        if how == 0:
            cache.invalidate(path, [(0,)])
        elif how == 1:
            cache.invalidate(path)
        else:
            cache.begin_write(path)
            cache.end_write(path)
        # a node invalidation reaches the arrays below it; a chunk's, its array alone
        changed = {w for w in watched if w == path or (how == 1 and (w.startswith(path + "/") or not path))}
        for w in watched:
            now = cache.generation(w)
            assert now >= taken[w], (w, step)
            assert now != taken[w] or w not in changed, (w, step)
            taken[w] = now
        assert max(cache.table_sizes()) <= 64 + 1


def test_a_generation_table_is_bounded_by_its_constant():
    cache = ChunkCache(1 << 20)
    for i in range(3 * chunk_cache.GENERATIONS_KEPT):
        cache.invalidate(f"g{i % 100}/n{i}", [(0,)])
        cache.invalidate(f"g{i % 100}/m{i}")
    assert max(cache.table_sizes()) <= chunk_cache.GENERATIONS_KEPT + 1


def _npy(values: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, values)
    return out.getvalue()


def test_a_mount_writing_many_nodes_keeps_its_tables_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(chunk_cache, "GENERATIONS_KEPT", 16)
    monkeypatch.setattr(pages, "PAGES_TABLES_KEPT", 16)
    root = tmp_path / "s"
    zarr.open_group(str(root), mode="w").create_group("g")
    with ThreadPoolExecutor(2) as pool:
        context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
        fs = DecodedCore(open_hierarchy(open_store(str(root)), context, metadata_ttl=0), metadata_ttl=0)
        try:
            for i in range(120):
                file, _ = fs.create(f"g/x{i}.npy")
                file.write(0, _npy(np.arange(6, dtype="<i4") + i))
                file.flush()
                file.release()
                data = fs.open(f"g/x{i}/data", os.O_WRONLY)
                data.write(0, np.full(2, -i, "<i4").tobytes())
                data.flush()
                data.release()
                # written since any open of it: the kernel drops its pages, whatever was forgotten
                view = fs.open(f"g/x{i}/data.npy", os.O_RDONLY)
                assert not view.keep_cache, i
                view.release()
                if i % 3 == 0:
                    fs.rename(f"g/x{i}", f"g/y{i}")
                written, dropped = fs._pages.tracked()
                assert written <= 16 + 2 and dropped <= 16
                assert not fs.changes.counted()  # (no store waits for unmount)
                assert max(context.cache.table_sizes()) <= 16 + 1
                assert fs.stats()["nodes_tracked"] <= 4 * 16 + 4
        finally:
            fs.shutdown()
            fs.close()
    for i in range(120):
        name = f"y{i}" if i % 3 == 0 else f"x{i}"
        expected = np.arange(6, dtype="<i4") + i
        expected[:2] = -i
        np.testing.assert_array_equal(zarr.open_array(str(root / "g" / name))[...], expected)


def test_what_a_churning_mount_keeps_per_node_fits_in_a_few_mebibytes(monkeypatch):
    """The soak's goal (issue 49): a mount's memory flat within 5% after its first minutes.
    Every table kept per node written (the chunk cache's generations, the kernel's pages'
    writes, the nodes' times, the nodes erased) filled past its bound by node paths as the
    soak makes them holds at most 3 MiB together, 5% of a daemon of 60 MiB."""
    from zarrfs.fs.decoded import erased, times

    now = [0.0]
    monkeypatch.setattr(erased.time, "monotonic", lambda: now[0])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache, drops, node_times, gone = (
            ChunkCache(1 << 20),
            pages.PageDrops(),
            times.NodeTimes(),
            erased.ErasedPaths(1.0),
        )
        most = max(chunk_cache.GENERATIONS_KEPT, pages.PAGES_TABLES_KEPT, times.KEPT)
        for n in range(3 * most):
            path = f"churn{n % 4}/g{n:07d}"
            cache.invalidate(path, [(0,)])
            cache.invalidate(path)
            drops.written(path)
            drops.kept(f"{path}/data.npy", path)
            node_times.touch(path)
            node_times.touch(path.replace("/g", "/r"), below=True)
            now[0] += 0.01  # (a hundred erasures a second, for a ttl of 1 s)
            gone.erased(path)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept <= 3 << 20, kept
    assert len(gone) <= 101


def test_nodes_erased_past_the_bound_with_few_arrays_written(monkeypatch):
    """`rmdir` after `rmdir` (groups churned) fills the nodes' table alone: folding it, with
    fewer arrays than the bound, once failed every request with a ValueError (islice)."""
    monkeypatch.setattr(chunk_cache, "GENERATIONS_KEPT", 16)
    cache = ChunkCache(1 << 20)
    cache.invalidate("a", [(0,)])
    for n in range(100):
        cache.invalidate(f"churn0/g{n}")
    assert max(cache.table_sizes()) <= 16 + 1


def test_reads_between_writes_keep_one_band_a_row_in_the_cache(tmp_path):
    """Each write of a chunk makes the array's bands stale (their keys name the generation
    they were made at); those made again by the next read take their places, where they
    filled the cache until its capacity (the soak's memory grew with every write)."""
    root = str(tmp_path / "s")
    zarr.open_group(root, mode="w").create_array("a", shape=(32, 32), chunks=(8, 8), dtype="<i4", fill_value=0)
    with ThreadPoolExecutor(2) as pool:
        cache = ChunkCache(64 << 20)
        context = IOContext(executor=pool, cache=cache)
        fs = DecodedCore(open_hierarchy(open_store(root), context, metadata_ttl=0), metadata_ttl=0)
        held = []
        for i in range(40):
            f = fs.open("a/chunks/0/0", os.O_WRONLY | os.O_TRUNC)
            f.write(0, np.full(64, i, "<i4").tobytes())
            f.release()
            for name in ("a/data.npy", "a/data"):
                r = fs.open(name, os.O_RDONLY)
                read = r.read(0, 1 << 20)
                r.release()
            assert np.frombuffer(read, "<i4")[0] == i  # (what `data` reads: the write's value)
            held.append((cache.entry_count(), cache.nbytes))
    assert held[-1] == held[4], held  # four rows, a band each, however many writes
