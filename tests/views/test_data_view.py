"""`data` and `data.npy` read the same bytes whichever way a read is served: gathered from
several chunks, sliced from one cached chunk, from the cache alone, or after the chunks
ahead of a sequential reader were decoded in the background."""

from __future__ import annotations

import io
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.store import open_store
from zarrfs.views.chunk import ChunkView
from zarrfs.views.data import DataView
from zarrfs.views.npy import NpyView

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

LAYOUTS = [  # shape, chunks, dtype: rows of chunks, square chunks with edges, 1-D, 3-D, big-endian
    ((64, 48), (8, 48), "<f4"),
    ((50, 45), (16, 10), "<i2"),
    ((1000,), (96,), "<u8"),
    ((6, 7, 9), (4, 7, 9), "<f8"),
    ((6, 7, 9), (2, 3, 4), ">i4"),
]


@pytest.fixture(scope="module")
def executor():
    with ThreadPoolExecutor(2) as pool:
        yield pool


@pytest.fixture(params=LAYOUTS, ids=lambda p: f"{p[0]}-{p[1]}-{p[2]}")
def array(request, tmp_path, executor):
    """(our Array, the values zarr-python wrote)."""
    shape, chunks, dtype = request.param
    values = np.random.default_rng(3).integers(0, 1000, size=shape).astype(dtype)
    zarr_format = 2 if dtype.startswith(">") else 3
    zarr.create_array(str(tmp_path / "a"), shape=shape, chunks=chunks, dtype=dtype, zarr_format=zarr_format)[...] = (
        values
    )
    context = IOContext(executor=executor, cache=ChunkCache(64 << 20))
    return Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a"), values


def _reads(size: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    reads = [(0, size), (size - 3, 10), (size, 5), (1, 1)]
    reads += [(int(rng.integers(0, size)), int(rng.integers(1, size // 3 + 2))) for _ in range(60)]
    return reads


def test_reads_at_any_offset_are_the_little_endian_bytes(array):
    node, values = array
    expected = values.astype(values.dtype.newbyteorder("<")).tobytes()
    view = DataView(node)
    assert view.size() == len(expected)
    for offset, size in _reads(len(expected), 1):
        assert view.read(offset, size) == expected[offset : offset + size], (offset, size)


def test_reads_of_whole_rows_are_the_little_endian_bytes(array):
    """What a streaming reader asks for: whole rows (along the first dimension), within one
    row of chunks or across several, each chunk's part of them placed by one plan."""
    node, values = array
    expected = values.astype(values.dtype.newbyteorder("<")).tobytes()
    row = len(expected) // values.shape[0]
    view = DataView(node)
    for _ in range(2):  # decoding, then from the cache
        for first in range(values.shape[0]):
            for count in (1, 2, 3, node.chunk_shape[0]):
                offset, size = first * row, count * row
                assert bytes(view.read_buffer(offset, size)) == expected[offset : offset + size], (first, count)


def test_cache_only_reads_are_the_same_bytes_or_none(array):
    node, values = array
    expected = values.astype(values.dtype.newbyteorder("<")).tobytes()
    view = DataView(node)
    assert view.read_cached(0, 64) is None  # nothing decoded yet
    view.read(0, len(expected))
    for offset, size in _reads(len(expected), 2):
        assert bytes(view.read_cached(offset, size)) == expected[offset : offset + size], (offset, size)


def test_sequential_reads_decode_ahead_and_read_the_same_bytes(array):
    node, values = array
    expected = values.astype(values.dtype.newbyteorder("<")).tobytes()
    view = DataView(node)
    step = max(8, len(expected) // 37)
    got = b"".join(view.read(offset, step) for offset in range(0, len(expected), step))
    assert got == expected


def test_npy_reads_straddle_the_header(array):
    node, values = array
    npy = NpyView(node)
    content = npy.read(0, npy.size())
    assert np.array_equal(np.load(io.BytesIO(content)), values)
    header = len(content) - values.nbytes
    assert npy.read(header - 5, 20) == content[header - 5 : header + 15]
    assert bytes(npy.read_cached(header - 5, 20)) == content[header - 5 : header + 15]


@pytest.mark.parametrize(("data_type", "value"), [("int2", -1), ("int4", -3), ("float4_e2m1fn", -1.5)])
def test_0d_arrays_of_sub_byte_types_read_as_tensorstore_reads_them(tmp_path, executor, data_type, value):
    """One element, in `data` and `data.npy`, sign-extended where the type is signed."""
    import tensorstore as ts

    from tests.format.format_oracle import as_plain_numpy, assert_same_values

    scalar = {"name": "regular", "configuration": {"chunk_shape": []}}
    written = ts.open(
        {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": str(tmp_path / "a")},
            "metadata": {
                "shape": [],
                "data_type": data_type,
                "chunk_grid": scalar,
                "codecs": [{"name": "bytes"}],
                "fill_value": 0,
            },
        },
        create=True,
    ).result()
    written.write(np.array(value, dtype=written.dtype.numpy_dtype)).result()
    expected = as_plain_numpy(written.read().result())
    context = IOContext(executor=executor, cache=ChunkCache(1 << 20))
    node = Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a")
    assert DataView(node).read(0, 16) == expected.tobytes()
    npy = NpyView(node)
    assert_same_values(np.load(io.BytesIO(npy.read(0, npy.size()))), expected, data_type)


def test_chunk_files_read_the_same_from_the_cache(array):
    node, _ = array
    view = ChunkView(node, (0,) * len(node.shape))
    content = view.read(0, view.size())
    assert len(content) == view.size()
    assert bytes(view.read_cached(3, 50)) == content[3:53]


def test_a_node_invalidation_forgets_the_arrays_below_it():
    cache = ChunkCache(1 << 20)
    chunk = np.zeros(4)
    before = {p: cache.generation(p) for p in ("g/a", "g/b/c", "h/a")}
    for path in before:
        cache.put((path, (0,)), chunk.copy())
    cache.invalidate("g")
    assert cache.get(("g/a", (0,))) is None and cache.get(("g/b/c", (0,))) is None
    assert cache.get(("h/a", (0,))) is not None
    # a chunk decoded before the invalidation is not cached after it, under any path below
    cache.put(("g/a", (1,)), chunk.copy(), before["g/a"])
    assert cache.get(("g/a", (1,))) is None
    assert cache.generation("g/b/c") != before["g/b/c"]


def test_a_read_that_waited_on_another_whose_store_call_went_unanswered_fails_without_asking_again(
    tmp_path, executor, monkeypatch
):
    """Two reads of one chunk at once (the kernel sends several): the first one's fetch
    runs to the store's deadline. The second, which waited for it, fails with the same
    error instead of asking the store again and waiting a whole deadline more."""
    import threading

    from zarrfs.store import StoreUnavailableError
    from zarrfs.views import data as data_module

    zarr.create_array(str(tmp_path / "a"), shape=(64,), chunks=(64,), dtype="<f4")[...] = np.arange(64, dtype="f4")
    store = open_store(str(tmp_path), None, read_only=True)
    answer, waiting, fetching, asked = threading.Event(), threading.Event(), threading.Event(), []
    get = store.get_partial_values

    def stalling(requests, *args, **kwargs):
        if any(key == "a/c/0" for key, _ in requests):
            asked.append(1)
            fetching.set()
            answer.wait(30)
            raise StoreUnavailableError("timed out (after 3 attempts)", "a/c/0")
        return get(requests, *args, **kwargs)

    store.get_partial_values = stalling
    view = DataView(Hierarchy(store, IOContext(executor=executor, cache=ChunkCache(1 << 20))).open_node("a"))
    real_wait = data_module.wait_for_chunks
    monkeypatch.setattr(data_module, "wait_for_chunks", lambda futures: (waiting.set(), real_wait(futures))[1])
    failures = []

    def read() -> None:
        try:
            view.read(0, 256)
        except StoreUnavailableError as exc:
            failures.append(exc)

    first = threading.Thread(target=read)
    first.start()
    assert fetching.wait(30)  # the first read's fetch is in the store
    second = threading.Thread(target=read)
    second.start()
    assert waiting.wait(30)  # the second waits on the first's fetch
    answer.set()
    first.join(30), second.join(30)
    assert len(failures) == 2 and asked == [1]


@pytest.mark.parametrize("failure", ["unanswered", "corrupt"])
def test_a_read_that_waited_on_another_gets_only_its_own_chunks_errors(tmp_path, executor, monkeypatch, failure):
    """The first read asks for chunks 1 to 3, whose chunk 3 the store does not answer (or
    holds corrupt); the second asks for chunk 1 alone while the first is fetching it, and
    waits for it. Chunk 1 is fine: the second read gets its bytes, not chunk 3's error."""
    import threading

    from zarrfs.format.errors import ChunkDecodeError
    from zarrfs.store import StoreUnavailableError
    from zarrfs.views import data as data_module

    values = np.arange(256, dtype="f4")
    zarr.create_array(str(tmp_path / "a"), shape=(256,), chunks=(64,), dtype="<f4", compressors=None)[...] = values
    store = open_store(str(tmp_path), None, read_only=True)
    fetching, waiting = threading.Event(), threading.Event()
    get = store.get_partial_values

    def failing(requests, *args, **kwargs):
        keys = [key for key, _ in requests]
        if "a/c/1" in keys and threading.current_thread() is first:
            fetching.set()
            assert waiting.wait(30)  # the second read waits on this fetch
        if "a/c/3" in keys:
            if failure == "unanswered":
                raise StoreUnavailableError("timed out (after 3 attempts)", "a/c/3")
            values = get(requests, *args, **kwargs)
            return [b"\x00" * 5 if key == "a/c/3" else value for key, value in zip(keys, values)]
        return get(requests, *args, **kwargs)

    store.get_partial_values = failing
    view = DataView(Hierarchy(store, IOContext(executor=executor, cache=ChunkCache(1 << 20))).open_node("a"))
    real_wait = data_module.wait_for_chunks
    monkeypatch.setattr(data_module, "wait_for_chunks", lambda futures: (waiting.set(), real_wait(futures))[1])
    outcomes: dict[str, object] = {}

    def read(name: str, offset: int, size: int) -> None:
        try:
            outcomes[name] = view.read(offset, size)
        except (StoreUnavailableError, ChunkDecodeError) as exc:
            outcomes[name] = exc

    first = threading.Thread(target=read, args=("first", 64 * 4, 192 * 4))
    first.start()
    assert fetching.wait(30)  # the first read fetches chunk 1
    second = threading.Thread(target=read, args=("second", 64 * 4, 64 * 4))
    second.start()
    first.join(30), second.join(30)
    assert isinstance(outcomes["first"], Exception)
    assert outcomes["second"] == values[64:128].tobytes()


def test_reading_from_a_huge_absent_chunk_costs_the_bytes_read_not_the_chunk(tmp_path, executor):
    """Metadata may claim any chunk size (docs/errors.md, Bounded memory): a chunk of 1 GiB that
    is not stored reads as the fill value in the memory of the read, from `data`, from its
    chunk file and from the cache, where it costs one element."""
    import tracemalloc

    n = 1 << 28  # int32: a 1 GiB chunk, two of them
    zarr.create_array(str(tmp_path / "a"), shape=(2 * n,), chunks=(n,), dtype=">i4", fill_value=-7, zarr_format=2)
    reference = zarr.open_array(str(tmp_path / "a"), mode="r")
    context = IOContext(executor=executor, cache=ChunkCache(64 << 20))
    node = Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a")
    data, chunk = DataView(node), ChunkView(node, (1,))
    expected = reference[n - 1000 : n + (1 << 18)].astype("<i4").tobytes()
    in_chunk = reference[n + 5 : n + 5 + (1 << 18)].astype("<i4").tobytes()
    tracemalloc.start()
    try:
        read = data.read((n - 1000) * 4, len(expected))
        from_chunk = chunk.read(20, len(in_chunk))
        pinned = chunk.pinned()
        pinned_read = pinned.read(20, len(in_chunk))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read == expected and from_chunk == in_chunk and pinned_read == in_chunk
    assert peak < 8 << 20, f"{peak >> 20} MiB allocated for 1 MiB reads"
    assert context.cache.nbytes < 4096  # both chunks cached, one element each
    assert data.read_cached((n + 3) * 4, 12) == reference[n + 3 : n + 6].astype("<i4").tobytes()
    tail = reference[2 * n - 2 :].astype("<i4").tobytes()[2:]  # the chunk's last 6 bytes
    assert bytes(chunk.read_cached(4 * n - 6, 100)) == tail
    assert bytes(pinned.read_cached(4 * n - 6, 100)) == tail


def test_each_byte_lies_in_the_chunk_row_of_its_element(array):
    """What decode-ahead and the bands go by: the chunk row (first chunk index) of the
    element each byte of `data` belongs to (numpy's C order), the row count past the end;
    and where each row begins."""
    node, values = array
    view = DataView(node)
    itemsize = values.dtype.itemsize
    height = node.chunk_shape[0]
    rows = -(-values.shape[0] // height)
    for offset in range(0, view.size() + 1, max(1, view.size() // 997)):
        element = offset // itemsize
        expected = np.unravel_index(element, values.shape)[0] // height if element < values.size else rows
        assert view.chunk_row_at(offset) == expected, offset
    for row in range(rows):
        start = view.row_offset(row)
        assert np.unravel_index(start // itemsize, values.shape)[0] == row * height
        assert view.chunk_row_at(start) == row
        assert row == 0 or view.chunk_row_at(start - 1) == row - 1
