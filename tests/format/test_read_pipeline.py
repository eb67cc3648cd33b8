"""The read pipeline (format/reads.py) beyond what it reads: the codecs a first read needs
are made while its fetches are in flight, a chunk decoded from a shard read in one piece
keeps none of the shard's other bytes alive (the cache counts only the chunk), on a
remote store the memory a chunk is decoded into is made while it is fetched, and a chunk
a stalled store did not answer is not asked for again within its deadline."""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import numcodecs
import numpy as np
import pytest
import zarr

from tests.conftest import wait_for
from tests.conftest_s3 import proxy  # noqa: F401 (a fixture)
from zarrfs.format import ChunkCache, Hierarchy, IOContext, reads
from zarrfs.format.errors import ChunkDecodeError, ChunkTooLargeError
from zarrfs.format.reads import faulted_in
from zarrfs.store import StoreUnavailableError, open_store
from zarrfs.store.deadlines import MAX_UNANSWERED, UnansweredFetches


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
    zarr.create_array(
        str(tmp_path / "a"), shape=values.shape, chunks=(10,), dtype="<f4", compressors=zarr.codecs.ZstdCodec()
    )[...] = values
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
    zarr.create_array(
        str(tmp_path / "a"),
        shape=values.shape,
        chunks=(8, 64),
        shards=(64, 64),
        dtype="<i4",
        compressors=None if compressors is None else zarr.codecs.ZstdCodec(),
    )[...] = values
    node = Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a")
    coords = [(i, 0) for i in range(8)]
    chunks = [f.result(10) for f in node.start_reads(coords)]  # all of the shard: one read of it
    assert context.stats.snapshot()["store_requests"] == 1
    for (i, _), chunk in zip(coords, chunks):
        assert np.array_equal(chunk, values[8 * i : 8 * i + 8])
        assert _held(chunk) <= chunk.nbytes


# ------------------------------------------------------- memory made while fetching
CHUNK = (256, 256)  # float32: 256 KiB, the smallest chunk decoded into memory made ahead

WRITERS = {
    "v3 zstd": dict(zarr_format=3, compressors=zarr.codecs.ZstdCodec()),
    "v3 blosc": dict(zarr_format=3, compressors=zarr.codecs.BloscCodec(cname="lz4", shuffle="shuffle")),
    "v2 zstd": dict(zarr_format=2, compressors=numcodecs.Zstd()),
    "v2 blosc": dict(zarr_format=2, compressors=numcodecs.Blosc(cname="lz4")),
}


def _written(root, writer: str) -> np.ndarray:
    values = np.random.default_rng(3).normal(size=(512, 256)).astype("<f4")
    zarr.create_array(str(root / "a"), shape=values.shape, chunks=CHUNK, dtype="<f4", **WRITERS[writer])[...] = values
    return values


@pytest.fixture
def made(monkeypatch):
    """Every buffer the codec pool makes ahead of a decode."""
    buffers = []

    def recording(size):
        buffers.append(faulted_in(size))
        return buffers[-1]

    monkeypatch.setattr(reads, "faulted_in", recording)
    return buffers


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_chunk_of_a_remote_store_is_decoded_into_memory_made_while_it_was_fetched(tmp_path, made, writer):
    values = _written(tmp_path, writer)
    store = GatedStore(open_store(str(tmp_path), None, read_only=True))
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage, ThreadPoolExecutor(1) as reader:
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(16 << 20), outputs_ahead=True)
        node = Hierarchy(store, context).open_node("a")
        store.gate.clear()
        read = reader.submit(node.read_chunks, [(1, 0)])  # one chunk: fetched and decoded by the reader itself
        wait_for(lambda: made)
        assert not read.done()
        store.gate.set()
        chunk = read.result(10)[0]
    assert np.array_equal(chunk, values[256:512])  # the values zarr-python was given
    assert len(made) == 1 and np.shares_memory(chunk, made[0])


@pytest.mark.parametrize("fill_value", [0.0, -1.5, float("nan")], ids=["zero", "value", "nan"])
def test_a_chunk_absent_from_a_remote_store_is_the_fill_value_in_the_memory_of_one_element(tmp_path, made, fill_value):
    """Nothing stored for chunk (1, 0): it reads as zarr-python reads it, one element
    broadcast (the memory made for it while it was fetched is not used)."""
    array = zarr.create_array(
        str(tmp_path / "a"),
        shape=(512, 256),
        chunks=CHUNK,
        dtype="<f4",
        compressors=zarr.codecs.ZstdCodec(),
        fill_value=fill_value,
    )
    array[:256] = 1.0
    expected = array[256:512]
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage:
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(16 << 20), outputs_ahead=True)
        node = Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a")
        chunk = node.start_reads([(1, 0)])[0].result(10)
    np.testing.assert_array_equal(chunk, expected)  # NaN equal to NaN
    assert chunk.strides == (0, 0) and not any(np.shares_memory(chunk, m) for m in made)


def test_a_local_store_decodes_as_it_always_did(tmp_path, made):
    values = _written(tmp_path, "v3 zstd")
    node = Hierarchy(open_store(str(tmp_path), None, read_only=True), IOContext(cache=ChunkCache(16 << 20))).open_node(
        "a"
    )
    assert np.array_equal(node.read_chunks([(0, 0)])[0], values[:256]) and not made


@pytest.mark.parametrize("compressors", [zarr.codecs.GzipCodec(), None], ids=["gzip", "none"])
def test_no_memory_is_made_for_chunks_that_cannot_be_decoded_into_it(tmp_path, made, compressors):
    values = np.arange(512 * 256, dtype="<f4").reshape(512, 256)
    zarr.create_array(str(tmp_path / "a"), shape=values.shape, chunks=CHUNK, dtype="<f4", compressors=compressors)[
        ...
    ] = values
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage:
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(16 << 20), outputs_ahead=True)
        node = Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a")
        assert node.pipeline.decoded_size is None
        assert np.array_equal(np.concatenate([f.result(10) for f in node.start_reads([(0, 0), (1, 0)])]), values)
    assert not made


def test_metadata_claiming_huge_chunks_makes_no_memory_ahead(tmp_path, made):
    """A chunk of 32 GiB by its metadata, stored as a few bytes: the read fails as it
    would without memory made ahead, and nothing near the claimed size is allocated."""
    zarr.create_array(
        str(tmp_path / "a"), shape=(1024,), chunks=(1024,), dtype="<i4", compressors=zarr.codecs.ZstdCodec()
    )[...] = np.arange(1024, dtype="<i4")
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    doc["shape"], doc["chunk_grid"]["configuration"]["chunk_shape"] = [2**33], [2**33]
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(doc))
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(4) as io_stage:
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(16 << 20), outputs_ahead=True)
        node = Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a")
        tracemalloc.start()
        try:
            with pytest.raises(ChunkDecodeError):
                node.start_reads([(0,)])[0].result(10)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 16 << 20 and not made


@pytest.mark.parametrize("writer", list(WRITERS))
def test_stored_bytes_that_do_not_declare_the_chunk_size_are_judged_as_without_memory_made_ahead(tmp_path, writer):
    """A frame that decodes to more than the chunk (a bomb) or less, or lies about its
    size, fails as it does when decoding allocates: the buffer is left as it was."""
    _written(tmp_path, writer)
    pipeline = Hierarchy(open_store(str(tmp_path), None, read_only=True), IOContext()).open_node("a").pipeline
    size = pipeline.decoded_size
    assert size == 256 * 256 * 4
    compressor = numcodecs.Zstd() if "zstd" in writer else numcodecs.Blosc(cname="lz4")
    good = compressor.encode(np.zeros(size, dtype="u1"))
    stored = {
        "larger": compressor.encode(np.zeros(2 * size, dtype="u1")),
        "smaller": compressor.encode(np.zeros(size - 4, dtype="u1")),
        "corrupt": good[: len(good) // 2] + bytes(len(good) - len(good) // 2),
    }
    for name, data in stored.items():
        out = faulted_in(size)
        out[:] = 7
        with pytest.raises((ChunkDecodeError, ChunkTooLargeError)) as ahead:
            pipeline.decode(data, out)
        with pytest.raises((ChunkDecodeError, ChunkTooLargeError)) as allocating:
            pipeline.decode(data)
        assert type(ahead.value) is type(allocating.value), name
        if name != "corrupt":  # (one that declares the size is decoded into it, and fails there)
            assert (out == 7).all(), name
    out = faulted_in(size)
    assert np.shares_memory(pipeline.decode(good, out), out)


# ---------------------------------------------------------------- a stalled store

STALLED = np.arange(16, dtype="<i4")  # four chunks of four


@pytest.fixture
def stalling(s3_bucket, s3_filesystem, proxy, tmp_path):
    """Array `a` on S3 (written by zarr-python), read through the fault proxy with a 2 s
    deadline; its metadata is read. (array, proxy)"""
    zarr.create_array(str(tmp_path / "x.zarr" / "a"), shape=(16,), chunks=(4,), dtype="<i4")[...] = STALLED
    s3_filesystem.put(str(tmp_path / "x.zarr"), f"{s3_bucket}/x.zarr", recursive=True)
    options = {"endpoint_url": proxy.endpoint, "key": "testing", "secret": "testing"}
    store = open_store(f"s3://{s3_bucket}/x.zarr", options, read_only=True, attempts=2, retry_delay=0.01, timeout=2)
    context = IOContext(cache=ChunkCache(1 << 20), unanswered=UnansweredFetches(2))
    return Hierarchy(store, context).open_node("a"), proxy


def _fails_unanswered(read) -> float:
    """Seconds until `read` failed because the store did not answer."""
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        read()
    return time.monotonic() - started


def _read_or_none(array, region) -> list | None:
    try:
        return array.read(region).tolist()
    except StoreUnavailableError:
        return None


def test_a_chunk_the_store_did_not_answer_fails_at_once_until_its_deadline_has_passed(stalling):
    """The kernel asks again at once for the pages of a read that failed: each ask would
    wait a whole deadline more on a stalled store."""
    array, proxy = stalling
    proxy.freeze()
    assert 1 <= _fails_unanswered(lambda: array.read(slice(0, 4))) < 6  # its deadline (2 s)
    assert _fails_unanswered(lambda: array.read(slice(0, 4))) < 1  # not asked again (half the deadline)
    assert _fails_unanswered(lambda: array.start_reads([(0,)])[0].result(5)) < 1  # nor read ahead
    proxy.thaw()
    assert np.array_equal(array.read(slice(4, 8)), STALLED[4:8])  # another chunk: asked, served
    values = wait_for(lambda: _read_or_none(array, slice(0, 4)), timeout=30)  # asked again after 2 s
    assert values == STALLED[:4].tolist()


def test_a_chunk_the_store_refused_at_once_is_asked_again_at_once(stalling):
    """A refusal (503) costs little to meet again, and the store may be back already."""
    array, proxy = stalling
    proxy.status = 503
    assert _fails_unanswered(lambda: array.read(slice(0, 4))) < 1
    proxy.status = None
    assert np.array_equal(array.read(slice(0, 4)), STALLED[:4])


def test_the_keys_kept_unanswered_are_bounded_the_oldest_going_first():
    kept = UnansweredFetches(deadline=60)
    error = StoreUnavailableError("no answer")
    kept.note([f"c/{i}" for i in range(MAX_UNANSWERED + 10)], error, took=60)
    kept.check([f"c/{i}" for i in range(10)])  # forgotten: nothing raised
    with pytest.raises(StoreUnavailableError, match="asked again once 60s have passed"):
        kept.check([f"c/{MAX_UNANSWERED + 9}"])


@pytest.mark.parametrize("shards", [None, (8,)], ids=["plain", "sharded"])
def test_a_chunk_written_since_its_fetch_went_unanswered_reads_at_once(tmp_path, shards):
    """A write (or erase) the store accepted is its answer for the key: what was written
    reads back at once, not after the deadline of the fetch that stalled before."""
    zarr.create_array(str(tmp_path / "a"), shape=(16,), chunks=(4,), shards=shards, dtype="<i4")[...] = STALLED
    context = IOContext(cache=ChunkCache(1 << 20), unanswered=UnansweredFetches(deadline=60))
    array = Hierarchy(open_store(str(tmp_path), None), context).open_node("a")
    key = array.stored_key((0,) if shards is None else array.sharding.shard_of((0,))[0])
    context.unanswered.note([key], StoreUnavailableError("no answer", key), took=60)  # as after a stall
    array.write_chunks({(0,): np.full(4, 7, "<i4")})
    context.cache.invalidate("a")  # read from the store, not from the cache
    expected = zarr.open_array(str(tmp_path / "a"), mode="r")[...]
    assert expected[:4].tolist() == [7] * 4
    assert np.array_equal(array.read(slice(0, 16)), expected)
