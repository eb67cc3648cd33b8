"""The one sequential-read rule both cores share (views/ahead/sequential.py), and the decoded core's
decode-ahead built on it (views/ahead/policy.py), without a kernel: reads arrive as the
kernel sends them (128 KiB requests, several at once, out of order)."""

from __future__ import annotations

import gc
import io
import random
import tracemalloc
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import zarr

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.fs.decoded.view_files import ViewFile
from zarrfs.store import open_store
from zarrfs.views.ahead.policy import (
    AHEAD_CHUNKS,
    AHEAD_INFLIGHT_BYTES,
    AHEAD_REQUESTS,
    CORES,
    DecodeAhead,
    inflight_bytes,
    whole_shard_rows,
)
from zarrfs.views.ahead.sequential import FIRST_STREAMING, PROGRAM_READS, SLACK, STREAMING, ReadRuns
from zarrfs.views.data import DataView
from zarrfs.views.legacy.csv import CsvView
from zarrfs.views.legacy.tiff import TiffView
from zarrfs.views.npy import NpyView

KERNEL_READ = 128 << 10


def kernel_reads(start: int, stop: int, seed: int = 0, group: int = 4) -> list[tuple[int, int]]:
    """Reads of [start, stop) in KERNEL_READ requests: the first one alone (the reader's
    own read), then groups of `group` (the kernel's readahead in flight) in any order."""
    offsets = list(range(start, stop, KERNEL_READ))
    rng = random.Random(seed)
    out = [(offsets[0], min(KERNEL_READ, stop - offsets[0]))]
    for i in range(1, len(offsets), group):
        batch = offsets[i : i + group]
        rng.shuffle(batch)
        out += [(o, min(KERNEL_READ, stop - o)) for o in batch]
    return out


@pytest.mark.parametrize("group", [4, 12])
def test_a_pass_from_the_start_streams_though_its_reads_arrive_out_of_order(group):
    runs = ReadRuns(1 << 20, 8 << 20)
    steps = [runs.follow(o, o + n) for o, n in kernel_reads(0, 64 << 20, group=group)]
    assert steps[0].first and not steps[0].continues
    assert all(s.continues and s.ahead and not s.first for s in steps[1:])


def test_a_large_first_read_from_the_start_is_read_ahead_of_at_once_a_small_one_or_one_elsewhere_is_not():
    """`dd bs=1M` gets its first MiB asked for alone: reading ahead only from the second
    read would cost a round trip to the store."""
    step = ReadRuns(1 << 20, 8 << 20).follow(0, FIRST_STREAMING)
    assert step.first and not step.continues and step.ahead
    assert not ReadRuns(1 << 20, 8 << 20).follow(0, KERNEL_READ).ahead
    assert not ReadRuns(1 << 20, 8 << 20).follow(100 << 20, (100 << 20) + (4 << 20)).ahead


def test_a_pass_from_the_middle_streams_once_it_has_read_enough():
    runs = ReadRuns(1 << 20, 8 << 20)
    start = 100 << 20
    steps = [runs.follow(o, o + n) for o, n in kernel_reads(start, start + (4 << 20))]
    assert all(s.continues for s in steps[1:])
    streaming_from = STREAMING // KERNEL_READ
    assert not any(s.ahead for s in steps[: streaming_from - 1])
    assert all(s.ahead for s in steps[streaming_from:])


def test_random_reads_are_never_sequential_even_after_a_whole_pass():
    runs = ReadRuns(1 << 20, 8 << 20)
    size = 512 << 20
    for o, n in kernel_reads(0, size):
        runs.follow(o, o + n)
    rng = random.Random(1)
    furthest, continued = size, 0
    for _ in range(1000):
        offset = rng.randrange(0, size - 4096) // 4096 * 4096
        step = runs.follow(offset, offset + 4096)
        near = abs(offset - furthest) <= PROGRAM_READS * 4096
        assert step.continues == near and not step.ahead, offset
        furthest = max(furthest, offset + 4096) if near else offset + 4096
        continued += near
    assert continued < 10


def test_the_window_doubles_while_the_run_goes_on_and_starts_again_after_a_seek():
    runs = ReadRuns(1 << 20, 8 << 20)
    runs.follow(0, KERNEL_READ)
    assert [runs.grow() for _ in range(6)] == [1 << 20, 2 << 20, 4 << 20, 8 << 20, 8 << 20, 8 << 20]
    runs.follow(KERNEL_READ, 2 * KERNEL_READ)
    assert runs.window == 8 << 20  # a read that continues keeps it
    runs.follow(300 << 20, (300 << 20) + KERNEL_READ)
    assert runs.window == 1 << 20
    far = (300 << 20) + KERNEL_READ + SLACK + 1
    assert not runs.follow(far, far + (4 << 20)).continues  # no slack past SLACK, however large the read


# ---------------------------------------------------------------- decode-ahead
@pytest.fixture
def array(tmp_path):
    values = np.random.default_rng(5).integers(-1000, 1000, size=(512, 300)).astype("<i4")
    zarr.create_array(str(tmp_path / "a"), shape=values.shape, chunks=(8, 100), dtype="<i4")[...] = values
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(8) as io_stage:
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(64 << 20))
        yield Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a"), values


ROW_BYTES = 8 * 300 * 4  # one chunk row of `data`


def read_sequentially(view) -> bytes:
    file = ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view))
    pieces = {o: file.read(o, n) for o, n in kernel_reads(0, view.size())}
    return b"".join(pieces[o] for o in sorted(pieces))


def rows_decoding(node, data: DataView) -> set[int]:
    """The chunk rows decoded or being decoded."""
    grid = node.chunk_grid.grid_shape
    return {row for row in range(grid[0]) if not all(data.inflight.needs_decoding((row, j)) for j in range(grid[1]))}


@pytest.mark.parametrize("make", [DataView, NpyView, TiffView, CsvView], ids=["data", "npy", "tif", "csv"])
def test_chunks_ahead_of_a_sequential_reader_are_decoded_in_the_background(array, make):
    node, _ = array
    view = make(node)
    file = ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view))
    upto = 64 << 10
    for offset in range(0, upto, 4096):
        file.read(offset, 4096)
    data, _, data_end = view.data_span(upto - 4096, 4096)
    last_read = (data_end - 1) // ROW_BYTES
    assert max(rows_decoding(node, data)) >= last_read + 4


def test_a_random_reader_decodes_nothing_ahead(array):
    node, _ = array
    view = DataView(node)
    file = ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view))
    rng = random.Random(3)
    read_rows = set()
    for _ in range(50):
        offset = rng.randrange(4096, view.size() - 4096)
        file.read(offset, 4096)
        read_rows |= {offset // ROW_BYTES, (offset + 4095) // ROW_BYTES}
    assert rows_decoding(node, view) <= read_rows


def test_what_is_read_with_decode_ahead_is_the_array(array):
    node, values = array
    assert read_sequentially(DataView(node)) == values.tobytes()
    assert np.array_equal(np.load(io.BytesIO(read_sequentially(NpyView(node)))), values)
    text = read_sequentially(CsvView(node)).decode()
    assert np.array_equal(np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.int64), values)


# ---------------------------------------------------------------- whole shards, many requests
def test_a_window_ahead_of_a_sharded_array_ends_at_a_shard_row_past_the_next_one():
    """Shards of 16 chunk rows, 64 rows in all: (per shard, rows, current, window's end, most rows)."""
    assert whole_shard_rows(16, 64, 4, 9, 512) == 32  # this shard row and the next, whole
    assert whole_shard_rows(16, 64, 20, 40, 512) == 48  # the one the window ends in
    assert whole_shard_rows(16, 64, 60, 64, 512) == 64  # not past the array
    assert whole_shard_rows(16, 64, 4, 9, 20) == 16  # the next shard row does not fit: this one
    assert whole_shard_rows(16, 64, 4, 9, 8) == 9  # not even this one: the window as it was
    # a window of `most` rows that cannot reach its shard row's end stops at its start,
    # rather than slide one row (a piece of a shard) at a time
    assert whole_shard_rows(16, 64, 20, 41, 21) == 32
    assert whole_shard_rows(16, 64, 21, 42, 21) == 32
    assert whole_shard_rows(16, 64, 32, 53, 21) == 48


def _written(root: Path, values: np.ndarray, **create) -> Path:
    zarr.create_array(str(root / "a"), shape=values.shape, dtype=values.dtype, compressors=None, **create)[...] = values
    return root


@pytest.fixture
def pools():
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(8) as io_stage:
        yield lambda root, cache: Hierarchy(
            open_store(str(root), None, read_only=True),
            IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(cache)),
        ).open_node("a")


def test_a_large_first_read_of_a_sharded_array_decodes_whole_shards_ahead(tmp_path, pools):
    """16 MiB in shards of 8 chunk rows of 256 KiB: the first MiB read has the window (8 MiB
    past its end) rounded up to the end of a shard row, its own chunks included."""
    values = np.arange(4096 * 1024, dtype="<f4").reshape(4096, 1024)
    node = pools(_written(tmp_path, values, chunks=(64, 1024), shards=(512, 1024)), 64 << 20)
    view = DataView(node)
    ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view)).read(0, 1 << 20)
    assert rows_decoding(node, view) == set(range(40))  # 5 shards: 4 + 1 + 32 rows, rounded up to 40


def test_a_large_first_read_of_large_chunks_decodes_enough_of_them_ahead_for_many_requests(tmp_path, pools):
    """Chunks of 2 MiB: the first window spans AHEAD_REQUESTS of them, not 8 MiB's worth."""
    values = np.arange(8192 * 1024, dtype="<f4").reshape(8192, 1024)
    node = pools(_written(tmp_path, values, chunks=(512, 1024)), 128 << 20)
    view = DataView(node)
    assert (
        ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view)).read(0, 1 << 20)
        == values.tobytes()[: 1 << 20]
    )
    assert len(rows_decoding(node, view)) >= 1 + AHEAD_REQUESTS


class _ShardedData:
    """What decode-ahead asks of `data`, for a column of 64 chunk rows of 1 MiB in shards of
    8 rows, `busy` chunks being decoded already; it records what it is asked to decode."""

    itemsize = 4

    def __init__(self, busy: int) -> None:
        grid = SimpleNamespace(grid_shape=(64, 1))
        self.array = SimpleNamespace(
            shape=(64 * 256, 1024),
            chunk_shape=(256, 1024),
            chunk_grid=grid,
            context=SimpleNamespace(cache=SimpleNamespace(capacity=512 << 20)),
            sharding=SimpleNamespace(chunks_per_shard=(8, 1)),
            stored_grid=SimpleNamespace(regular=True),
        )
        self.busy = busy
        self.asked: list[tuple[int, int]] = []
        self.inflight = self  # its chunks being decoded (views/ahead/inflight.py), faked here too

    def chunk_bytes(self) -> int:
        return 1 << 20

    def chunk_row_at(self, offset: int) -> int:
        return offset // self.chunk_bytes()  # rows of one chunk each

    def decoding(self) -> int:
        return self.busy

    def banded(self) -> bool:
        return False  # a column of chunks: each a contiguous run of `data`

    def needs_decoding(self, coords) -> bool:
        return coords not in self.asked

    def start_decoding(self, coords_list) -> None:
        self.asked += coords_list


def test_a_top_up_while_others_decode_asks_for_whole_shard_rows_only():
    """Rows 0-7 (one shard) are in hand and 52 chunks are being decoded, leaving room for
    12 more: rows 8-15 (the next shard, whole) are asked for, and not rows 16-19 as well,
    which would cut the shard after it into an index read and ranged pieces."""
    data = _ShardedData(busy=max(AHEAD_CHUNKS, AHEAD_INFLIGHT_BYTES >> 20) - 12)
    ahead = DecodeAhead(data)
    stream = ahead._stream_of(0, 1 << 20)
    stream.runs = SimpleNamespace(grow=lambda: 64 << 20, streams=True)  # the window reaches the array's end
    stream.decoded_rows = 8
    ahead._decode_after(stream, data, 0, 1 << 20)
    assert data.asked == [(row, 0) for row in range(8, 16)]
    assert stream.decoded_rows == 16
    data.busy = 0  # nothing else in flight: a part of a shard row is better than waiting
    ahead._decode_after(stream, data, 0, 1 << 20)
    assert data.asked[8:] and {row for row, _ in data.asked[8:]} >= {16, 17, 18, 19}


def test_a_window_that_slides_along_a_sharded_array_asks_for_each_shard_whole():
    """A window of 20 rows (a quarter of an 80 MiB cache) over shards of 8 rows: read row
    by row, it would end mid-shard each time and ask for shards a row (a ranged piece) at
    a time; each ask must be of whole shards."""
    data = _ShardedData(busy=0)
    data.array.context.cache.capacity = 80 << 20
    asks = []
    data.start_decoding = lambda coords_list: (
        asks.append([row for row, _ in coords_list]),
        data.asked.extend(coords_list),
    )
    ahead = DecodeAhead(data)
    stream = ahead._stream_of(0, 1 << 20)
    stream.runs = SimpleNamespace(grow=lambda: 64 << 20, streams=True)
    for row in range(64):
        ahead._decode_after(stream, data, row << 20, (row + 1) << 20)
    assert sorted(row for ask in asks for row in ask) == list(range(64))
    for ask in asks:
        assert len(ask) % 8 == 0 and all(row % 8 == i % 8 for i, row in enumerate(ask)), asks


@pytest.mark.parametrize("sharded", [False, True])
def test_a_read_inside_the_rows_started_ahead_asks_nothing_of_the_chunks_in_flight(sharded):
    """Once the window reached the array's end, every later read of the run lies in rows
    already decoded or being decoded: it starts nothing, and asks nothing of the chunks in
    flight (the usual read of a cached file pays for that at every request)."""
    data = _ShardedData(busy=0)
    if not sharded:
        data.array.sharding = None
    ahead = DecodeAhead(data)
    stream = ahead._stream_of(0, 1 << 20)
    stream.runs = SimpleNamespace(grow=lambda: 64 << 20, streams=True)  # the window reaches the array's end
    ahead._decode_after(stream, data, 0, 1 << 20)
    assert data.asked == [(row, 0) for row in range(64)]

    def asked(*args):
        raise AssertionError("asked of the chunks in flight")

    data.decoding = data.needs_decoding = data.start_decoding = asked
    for row in (1, 10, 63):
        ahead._decode_after(stream, data, row << 20, (row + 1) << 20)
    assert stream.decoded_rows == 64


# ---------------------------------------------------------------- a pass through a large file
def _stream(node, make=DataView) -> tuple[bytes, int]:
    """Read `data` (or another view of it) as the kernel does, from the start to the end;
    what was read, and the most the cache held meanwhile."""
    view = make(node)
    file = ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view))
    cache, pieces, most = node.context.cache, {}, 0
    for o, n in kernel_reads(0, view.size(), group=12):
        pieces[o] = file.read(o, n)
        most = max(most, cache.nbytes)
    return b"".join(pieces[o] for o in sorted(pieces)), most


@pytest.mark.parametrize("make", [DataView, NpyView], ids=["data", "npy"])
def test_a_pass_through_a_file_larger_than_the_cache_drops_the_rows_it_passed(tmp_path, make):
    """16 MiB in chunk rows of 256 KiB through an 8 MiB cache: held whole, its last 8 MiB
    would stay, and every other file's chunks would go. The rows behind the reader leave
    at once (the kernel's pages hold them), so the cache holds the window ahead (a quarter
    of it) and the kernel's slack behind, and what it held before stays."""
    values = np.arange(4096 * 1024, dtype="<f4").reshape(4096, 1024)
    root = _written(tmp_path, values, chunks=(64, 1024))
    other = values[:64] * 2
    zarr.create_array(str(root / "b"), shape=other.shape, dtype=other.dtype, chunks=(64, 1024))[...] = other
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(8) as io_stage:
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(8 << 20))
        hierarchy = Hierarchy(open_store(str(root), None, read_only=True), context)
        node = hierarchy.open_node("a")
        assert DataView(hierarchy.open_node("b")).read(0, 4096) == other.tobytes()[:4096]  # `b`'s chunk, cached
        got, most = _stream(node, make)
    assert (got if make is DataView else got[len(NpyView(node).header) :]) == values.tobytes()
    assert most <= 5 << 20, most
    cache = node.context.cache
    assert cache.get(("b", (0, 0))) is not None  # not pushed out by the pass
    assert [row for row in range(48) if not DataView(node).inflight.needs_decoding((row, 0))] == []  # passed, dropped
    assert node.context.stats.snapshot().get("cache_passed", 0) >= 48


def test_a_pass_through_a_file_that_fits_in_the_cache_keeps_it(tmp_path, pools):
    """A re-read once the kernel has dropped its pages is then served from the cache."""
    values = np.arange(4096 * 1024, dtype="<f4").reshape(4096, 1024)
    node = pools(_written(tmp_path, values, chunks=(64, 1024)), 64 << 20)
    got, _ = _stream(node)
    assert got == values.tobytes()
    assert not any(DataView(node).inflight.needs_decoding((row, 0)) for row in range(64))


def test_passing_a_row_of_a_vast_number_of_chunks_costs_no_memory_per_chunk(tmp_path, pools):
    """A row of 2**20 chunks of 1 KiB (nothing stored): a pass across its end drops the
    row's chunks held in the cache, found among the cache's entries, not by listing the
    row's chunks (before: a list of all 2**20 of them, GBs for longer rows)."""
    zarr.create_array(str(tmp_path / "a"), shape=(2, 1 << 30), chunks=(1, 1024), dtype="u1", fill_value=0)
    node = pools(tmp_path, 8 << 20)
    view = DataView(node)
    file = ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view))
    row = 1 << 30
    tracemalloc.start()
    try:
        for o, n in kernel_reads(row - (1 << 20), row + (3 << 20)):
            assert file.read(o, n) == bytes(n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak
    assert node.context.stats.snapshot().get("cache_passed", 0) >= 1024  # row 0's chunks read went


def test_decode_ahead_kept_by_view_goes_with_its_view(tmp_path):
    """The core keeps each file's DecodeAhead in a weak mapping by view: it must not keep
    its view (and the array under it) alive once the node has been read anew."""
    zarr.create_array(str(tmp_path / "a"), shape=(64,), chunks=(16,), dtype="<f4")
    view = DataView(Hierarchy(open_store(str(tmp_path), None, read_only=True), IOContext()).open_node("a"))
    kept = weakref.WeakKeyDictionary({view: DecodeAhead(view)})
    del view
    gc.collect()
    assert len(kept) == 0


def test_readers_of_parts_of_one_file_each_keep_their_run():
    """Four readers, each on its quarter of a file, their requests interleaved (threads of
    a parallel reader, or four processes): each continues its own run and is read ahead
    of, rather than each read starting a new run in place of the other readers'."""
    from zarrfs.views.base import FileView

    ahead = DecodeAhead(FileView())
    quarter, block = 64 << 20, 1 << 20
    steps = [ahead.follow(q * quarter + k * block, block) for k in range(4) for q in range(4)]
    assert all(step.continues and step.ahead for step in steps[4:])
    # a small read far from the latest reader's run is a random read, not another reader's
    assert not ahead.follow(quarter + 4 * block, 4096).continues


def test_each_of_several_readers_reads_at_least_a_row_ahead():
    """Four readers of a file whose share of the cache holds two chunk rows: each still has
    a row decoded ahead of it (a quarter of the share each would hold none)."""
    data = _ShardedData(busy=0)
    data.array.sharding = None
    data.array.context.cache.capacity = 8 << 20  # a window of 2 MiB: two rows of 1 MiB
    ahead = DecodeAhead(data)
    quarter = 16 << 20
    streams = [ahead._stream_of(q * quarter, q * quarter + (1 << 20)) for q in range(4)]
    for stream in streams:
        stream.runs.start = 0  # each run streams
    for q, stream in enumerate(streams):
        ahead._decode_after(stream, data, q * quarter, q * quarter + (1 << 20))
    assert {row for row, _ in data.asked} >= {q * 16 + 1 for q in range(4)}


def test_bytes_in_flight_are_a_band_per_core_within_the_share():
    """A chunk row (band) per core, the request floor below, the window's share above; and
    the first window gives every core a chunk to decode."""
    mib = 1 << 20
    assert inflight_bytes(4 * mib, 128 * mib, 1 << 40) == CORES * 128 * mib  # a band per core
    assert inflight_bytes(4 * mib, 128 * mib, 64 * mib) == 64 * mib  # no more than the share
    assert inflight_bytes(4 * mib, 4 * mib, 1 << 40) == max(
        AHEAD_INFLIGHT_BYTES, AHEAD_CHUNKS * 4 * mib, CORES * 4 * mib
    )
    assert AHEAD_REQUESTS >= CORES >= 2
