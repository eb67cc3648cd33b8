"""Bands (format/bands.py) as every reader of a chunk meets them: a row decoded ahead is
filled chunk by chunk on the codec pool, published whole, and then serves `data`, chunk
files and region reads alike, with no store read and no decode; a write of the array
retires it; a chunk that fails leaves none; its memory is counted from allocation."""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.conftest import wait_for
from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.format.chunk_cache import ENTRY_OVERHEAD
from zarrfs.format.context import codec_executor
from zarrfs.format.errors import ChunkDecodeError
from zarrfs.store import StoreUnavailableError, open_store
from zarrfs.views.chunk import ChunkView
from zarrfs.views.data import DataView
from zarrfs.views.npy import NpyView

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

SHAPE, CHUNKS = (200, 120), (32, 32)  # edges in both dimensions: the last row and column of chunks


class SpyStore:
    """A store whose reads of values wait on `gate` (and those of a `holding` key on its
    own event), fail for `failing` keys, and are noted in `asked`."""

    def __init__(self, store) -> None:
        self._store = store
        self.gate = threading.Event()
        self.gate.set()
        self.failing: set[str] = set()
        self.holding: dict[str, threading.Event] = {}
        self.asked: list[str] = []

    def get_partial_values(self, requests, *args, **kwargs):
        self.gate.wait(10)
        for key, _ in requests:
            self.asked.append(key)
            if key in self.holding:
                self.holding[key].wait(10)
            if key in self.failing:
                raise StoreUnavailableError("no answer", key)
        return self._store.get_partial_values(requests, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._store, name)


class SpyCache(ChunkCache):
    """Remembers the keys put."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.keys_put: list[tuple] = []

    def put(self, key, chunk, generation=None, family=None) -> None:
        self.keys_put.append(key)
        super().put(key, chunk, generation, family)


@pytest.fixture
def pools():
    with codec_executor(3) as codecs, ThreadPoolExecutor(4) as io_stage:
        yield codecs, io_stage


@pytest.fixture
def opened(tmp_path, pools):
    """(array, values, spy store, spy cache)."""
    values = np.random.default_rng(5).integers(0, 1 << 20, size=SHAPE).astype("<i4")
    zarr.create_array(
        str(tmp_path / "a"), shape=SHAPE, chunks=CHUNKS, dtype="<i4", compressors=zarr.codecs.ZstdCodec()
    )[...] = values
    store = SpyStore(open_store(str(tmp_path), None))
    cache = SpyCache(16 << 20)
    context = IOContext(executor=pools[0], io_executor=pools[1], cache=cache)
    return Hierarchy(store, context).open_node("a"), values, store, cache


def _row(array, row: int) -> list[tuple[int, ...]]:
    return [(row, j) for j in range(array.chunk_grid.grid_shape[1])]


def _decode_rows_ahead(view: DataView, rows) -> None:
    """As decode-ahead does: each row's chunks started together; until its band is made."""
    made = view.array.context.stats.snapshot().get("bands_made", 0)
    for row in rows:
        view.inflight.start_decoding(_row(view.array, row))
    wait_for(lambda: view.array.context.stats.snapshot().get("bands_made", 0) == made + len(rows))


def _requests(array) -> int:
    return array.context.stats.snapshot().get("store_requests", 0)


def _chunk_bytes(array, values, coords) -> bytes:
    """A chunk file's bytes: the chunk's full shape, its padding the fill value (0)."""
    full = np.zeros(array.chunk_shape, dtype="<i4")
    region = array.chunk_grid.chunk_region(coords)
    full[tuple(slice(0, s.stop - s.start) for s in region)] = values[region]
    return full.tobytes()


def test_chunks_decoded_ahead_go_straight_into_the_band_not_the_cache(opened):
    array, values, _, cache = opened
    view = DataView(array)
    _decode_rows_ahead(view, [1])
    whole = [c for c in _row(array, 1) if array.bands.whole(c)]
    assert whole and not any((array.path, c) in cache.keys_put for c in whole)
    assert bytes(view.read_cached(32 * 120 * 4, 32 * 120 * 4)) == values[32:64].tobytes()


def test_chunk_files_and_region_reads_are_served_from_a_band_without_the_store(opened):
    array, values, _, _ = opened
    _decode_rows_ahead(DataView(array), [0, 1, 6])  # 6: the last row, shorter than its chunks
    before = _requests(array)
    for coords in [*_row(array, 0), *_row(array, 1), *_row(array, 6)]:  # the last column's are edge chunks
        chunk = ChunkView(array, coords)
        assert bytes(chunk.read_cached(0, chunk.size())) == _chunk_bytes(array, values, coords), coords
        assert chunk.read(0, chunk.size()) == _chunk_bytes(array, values, coords), coords
    np.testing.assert_array_equal(array.read((slice(10, 60), slice(5, 117))), values[10:60, 5:117])
    assert _requests(array) == before
    inside = array.cached_chunk((1, 2))
    assert inside is not None and not inside.flags.owndata  # a view of the band, no copy


def test_a_write_retires_the_band_and_every_reader_sees_the_new_values(opened):
    array, values, _, _ = opened
    view = DataView(array)
    _decode_rows_ahead(view, [1])
    array.write((slice(40, 42), slice(0, 120)), -1)
    values[40:42] = -1
    assert array.bands.band(1) is None
    assert view.read(0, view.size()) == values.tobytes()
    chunk = ChunkView(array, (1, 0))
    assert chunk.read(0, chunk.size()) == _chunk_bytes(array, values, (1, 0))
    np.testing.assert_array_equal(array.read(), values)


def test_a_write_while_the_band_fills_keeps_it_from_being_published(opened):
    array, values, store, _ = opened
    view = DataView(array)
    store.gate.clear()
    view.inflight.start_decoding(_row(array, 1))
    array.write_chunks({(1, 0): np.full(CHUNKS, 7, dtype="<i4")})  # no read: while the row waits on the store
    values[32:64, 0:32] = 7
    store.gate.set()
    wait_for(lambda: not view.inflight.decoding())
    assert array.bands.band(1) is None
    assert view.read(0, view.size()) == values.tobytes()


def test_a_chunk_the_store_does_not_answer_leaves_no_band_and_fails_its_readers(opened):
    array, values, store, cache = opened
    view = DataView(array)
    store.gate.clear()
    store.failing.add(array.stored_key((2, 1)))
    view.inflight.start_decoding(_row(array, 2))
    reader = ThreadPoolExecutor(1).submit(view.read, 64 * 120 * 4, 4096)
    store.gate.set()
    with pytest.raises(StoreUnavailableError):
        reader.result(10)
    wait_for(lambda: not view.inflight.decoding())
    assert array.bands.band(2) is None
    assert not cache.reserved  # its memory is given back
    store.failing.clear()
    assert view.read(64 * 120 * 4, 4096) == values[64:].tobytes()[:4096]


def test_a_reader_of_chunks_of_a_row_being_filled_fails_only_for_its_own_chunks(opened):
    """As a TIFF reads tiles (decoded_chunks): the store's silence about another chunk of
    the row does not fail it, only its own chunks' would."""
    array, values, store, _ = opened
    view = DataView(array)
    store.gate.clear()
    store.failing.add(array.stored_key((2, 1)))
    view.inflight.start_decoding(_row(array, 2))
    reader = ThreadPoolExecutor(1).submit(view.decoded_chunks, [(2, 0)])
    store.gate.set()
    np.testing.assert_array_equal(reader.result(10)[0], values[64:96, 0:32])
    wait_for(lambda: not view.inflight.decoding())
    assert array.bands.band(2) is None


def test_a_small_read_of_data_fails_only_for_the_chunks_it_covers(opened):
    """A read of `data` within one chunk of a row being filled: the store's silence about
    another chunk of the row does not fail it; a read that covers that chunk fails."""
    array, values, store, _ = opened
    view = DataView(array)
    store.gate.clear()
    store.failing.add(array.stored_key((2, 1)))
    view.inflight.start_decoding(_row(array, 2))
    row_bytes = SHAPE[1] * 4
    narrow = ThreadPoolExecutor(1).submit(view.read, 70 * row_bytes + 8, 64)  # columns 2 to 17: chunk (2, 0)
    wide = ThreadPoolExecutor(1).submit(view.read, 70 * row_bytes, 200)  # columns 0 to 49: (2, 0) and (2, 1)
    store.gate.set()
    assert narrow.result(10) == values[70, 2:18].tobytes()
    with pytest.raises(StoreUnavailableError):
        wide.result(10)
    wait_for(lambda: not view.inflight.decoding())
    assert array.bands.band(2) is None


def test_a_chunk_placed_after_its_band_is_published_or_dropped_changes_nothing_seen(opened):
    """A fetch that answers after its deadline (its read failed meanwhile, and its row was
    completed from chunks other readers decoded) is decoded and placed late: too late."""
    array, values, _, _ = opened
    whole = {c: np.frombuffer(_chunk_bytes(array, values, c), "<i4").reshape(CHUNKS) for c in _row(array, 1)}
    fill = array.bands.begin(1)
    for coords, chunk in whole.items():
        fill.place(coords, chunk)
    assert fill.complete() and fill.publish()
    fill.place((1, 0), np.full(CHUNKS, -5, dtype="<i4"))
    assert bytes(DataView(array).read_cached(32 * 120 * 4, 32 * 120 * 4)) == values[32:64].tobytes()
    dropped = array.bands.begin(2)
    dropped.drop()
    untouched = dropped.rows.copy()
    dropped.place((2, 0), np.full(CHUNKS, -5, dtype="<i4"))
    assert dropped.rows.tobytes() == untouched.tobytes()  # (its memory, no longer counted, is not written)


def test_a_chunk_already_in_a_band_being_filled_is_read_from_it_once_made_not_fetched_again(opened):
    array, values, store, _ = opened
    view = DataView(array)
    last = threading.Event()
    store.holding[array.stored_key((1, 3))] = last  # the row's last chunk comes late
    view.inflight.start_decoding(_row(array, 1))
    wait_for(lambda: view.inflight.decoding() == 1)  # the others are in the band
    reader = ThreadPoolExecutor(1).submit(view.decoded_chunks, [(1, 0)])
    last.set()
    np.testing.assert_array_equal(reader.result(10)[0], values[32:64, 0:32])
    assert store.asked.count(array.stored_key((1, 0))) == 1


def test_a_corrupt_chunk_leaves_no_band_and_its_readers_meet_the_error(opened, tmp_path):
    array, _, _, _ = opened
    (tmp_path / "a" / "c" / "3" / "2").write_bytes(b"not zstd")
    view = DataView(array)
    view.inflight.start_decoding(_row(array, 3))
    with pytest.raises(ChunkDecodeError):
        view.read(96 * 120 * 4, 120 * 4)
    assert array.bands.band(3) is None
    assert ChunkView(array, (3, 1)).read(0, 8)  # its neighbours read


def _row_held(opened) -> DataView:
    """Row 0 started decoding ahead, its store reads held at the gate."""
    array, _, store, _ = opened
    view = DataView(array)
    store.gate.clear()
    view.inflight.start_decoding(_row(array, 0))
    return view


def test_the_band_counts_against_the_cache_from_allocation_and_is_seen_only_when_whole(opened):
    array, values, store, cache = opened
    view = _row_held(opened)
    band_bytes = 32 * 120 * 4
    assert cache.nbytes >= band_bytes  # counted before any chunk is in
    assert array.bands.band(0) is None and view.read_cached(0, 4096) is None
    assert array.cached_chunk((0, 0)) is None
    store.gate.set()
    wait_for(lambda: array.bands.band(0) is not None)
    # the band, and the edge chunk beside it (its padding is not in the band): no more
    edge = 32 * 32 * 4
    assert band_bytes <= cache.nbytes <= band_bytes + edge + 4 * 1024
    assert view.read(0, band_bytes) == values[:32].tobytes()


def test_a_band_being_filled_stays_counted_while_the_cache_turns_over(opened):
    array, values, store, cache = opened
    view = _row_held(opened)
    band_bytes = 32 * 120 * 4
    others = range(2 * cache.capacity // 4096)  # twice the cache in other chunks, each used once
    for i in others:
        cache.put(("other", (i,)), np.zeros(4096, dtype=np.uint8))
    kept = sum(cache.get(("other", (i,))) is not None for i in others)
    # the band's memory is held still: the others kept make room for it
    assert kept * (4096 + ENTRY_OVERHEAD) + band_bytes <= cache.capacity
    assert cache.nbytes <= cache.capacity
    store.gate.set()
    wait_for(lambda: array.bands.band(0) is not None)
    assert not cache.reserved
    assert view.read(0, band_bytes) == values[:32].tobytes()


def test_two_views_filling_one_row_at_once_count_both_bands(opened):
    array, values, store, cache = opened
    data, npy = DataView(array), NpyView(array)  # `data` and `data.npy`: a view each
    store.gate.clear()
    data.inflight.start_decoding(_row(array, 0))
    npy.data.inflight.start_decoding(_row(array, 0))
    band_bytes = 32 * 120 * 4
    assert cache.nbytes >= 2 * band_bytes  # each band its own
    store.gate.set()
    wait_for(lambda: not data.inflight.decoding() and not npy.data.inflight.decoding())
    assert not cache.reserved
    assert data.read(0, band_bytes) == values[:32].tobytes()


def test_several_readers_of_data_and_chunk_files_at_once(opened):
    array, values, _, _ = opened
    view = DataView(array)
    rows = array.chunk_grid.grid_shape[0]
    expected = values.tobytes()
    errors: list[BaseException] = []

    def read_data(step: int) -> None:
        try:
            got = b"".join(bytes(view.read_buffer(o, step)) for o in range(0, len(expected), step))
            assert got == expected
        except BaseException as exc:  # reported below
            errors.append(exc)

    def read_chunks(row: int) -> None:
        try:
            for coords in _row(array, row):
                chunk = ChunkView(array, coords)
                assert chunk.read(0, chunk.size()) == _chunk_bytes(array, values, coords)
        except BaseException as exc:
            errors.append(exc)

    for row in range(rows):
        view.inflight.start_decoding(_row(array, row))
    threads = [threading.Thread(target=read_data, args=(s,)) for s in (4096, 10_000, 65536)]
    threads += [threading.Thread(target=read_chunks, args=(r,)) for r in range(rows)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    wait_for(lambda: not view.inflight.decoding())
    assert all(array.bands.band(r) is not None for r in range(rows))


def test_a_row_whose_decoding_could_not_start_is_read_by_its_reader_not_waited_for(opened, monkeypatch):
    """Decoding that cannot be started (the pools shut down at unmount, say) leaves no band
    fill behind for readers to wait on forever, nor its memory reserved."""
    array, values, _, cache = opened
    view = DataView(array)

    def refused(*args, **kwargs):
        raise RuntimeError("cannot schedule new futures after shutdown")

    monkeypatch.setattr(array, "start_reads", refused)
    with pytest.raises(RuntimeError, match="after shutdown"):
        view.inflight.start_decoding(_row(array, 2))
    monkeypatch.undo()
    assert not cache.reserved
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(bytes(view.read(64 * 120 * 4, 32 * 120 * 4))), daemon=True)
    reader.start()
    reader.join(30)
    assert not reader.is_alive(), "the reader waits for a band nobody fills"
    assert got == [values[64:96].tobytes()]
