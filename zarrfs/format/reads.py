"""The read pipeline of an array: chunks are fetched on the I/O stage (many requests in
flight on an object store, a few on a local disk) and each is handed to the codec pool as
soon as its bytes arrive, so fetching overlaps decoding and no codec thread waits on the
store. Shards are read as tensorstore reads them: indexes cached, inner chunks that lie
close together fetched with one ranged read, a whole shard in one read when most of it is
wanted, and the data reads of a shard sent as soon as its index is in.

Neither stage ever waits on the other's work: I/O tasks fetch then submit decodes, codec
tasks decode then resolve futures. Only the caller waits. A caller on a codec thread (or
without pools) runs everything inline."""

from __future__ import annotations

import contextlib
import mmap
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, Executor, Future, InvalidStateError, wait
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from ..store import ByteRange, Store, StoreUnavailableError, ValueTooLargeError
from .context import on_codec_thread
from .errors import ChunkDecodeError, ChunkTooLargeError

if TYPE_CHECKING:
    from .codecs.array_to_bytes.sharding import ShardRead


class Array(Protocol):
    """What a read needs of its array (array.py's Array, which starts reads)."""

    path: str
    context: Any  # IOContext
    pipeline: Any  # the codec chain of a stored chunk (`prepared` once asked to prepare)
    sharding: Any  # ShardingCodec, where inner chunks are read alone

    def stored_key(self, stored_coords: tuple[int, ...]) -> str: ...

    def pipeline_of(self, stored_coords: tuple[int, ...]) -> Any: ...

    def sharding_of(self, shard: tuple[int, ...]) -> Any: ...

    def shard_of(self, coords: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]: ...

    def get_batch(self, requests: list[Any], max_size: int) -> list[bytes | memoryview | None]: ...

    def absent_chunk(self, coords: tuple[int, ...]) -> np.ndarray: ...

    def cache_generation(self) -> int | None: ...

    def index_generation(self) -> int | None: ...


# the most bytes one ranged read of a shard fetches (several run at once)
MAX_SHARD_REQUEST = 8 << 20

ChunkConsumer = Callable[[int, np.ndarray], None]

# smaller chunks are decoded into memory the allocator has in use already; larger ones
# only once their data says how large they are (metadata may claim any size: docs/errors.md)
OUTPUT_AHEAD_SMALLEST = 256 << 10
OUTPUT_AHEAD_LARGEST = 64 << 20
# chunks copied out at once (into a band) decode into memory each codec thread keeps, up
# to this size (held for good: a few per mount), larger ones into memory of their own
REUSED_LARGEST = 8 << 20


def wait_for_chunks(futures: Iterable[Future[Any]]) -> None:
    """Until every future is done, or one failed because the store did not answer
    (StoreUnavailableError, its retries and deadline spent): that is raised at once. The
    read fails anyway, and the fetches queued behind the one that failed (an I/O stage
    full of a stalled store's fetches) would keep its reader a deadline longer each."""
    pending = list(futures)
    while pending:
        done, not_done = wait(pending, return_when=FIRST_EXCEPTION)
        for future in done:
            exc = future.exception()
            if isinstance(exc, StoreUnavailableError):
                raise exc
        pending = list(not_done)


def get_bounded(
    store: Store, requests: list[Any], max_size: int, buffers: bool = False
) -> list[bytes | memoryview | None]:
    """Values for (key, range) requests; one larger than `max_size` (what its chunk can
    need) is refused before it is read (ChunkTooLargeError)."""
    try:
        return store.get_partial_values(requests, max_size=max_size, buffers=buffers)
    except ValueTooLargeError as exc:
        raise ChunkTooLargeError(
            f"{exc.key}: stored object is larger than its chunk can need ({exc.message})"
        ) from None


def faulted_in(size: int) -> np.ndarray:
    """`size` bytes of memory with every page written once (the kernel's page faults
    taken here, not while a chunk is decoded into it)."""
    buffer = np.empty(size, dtype=np.uint8)
    buffer[:: mmap.PAGESIZE] = 0
    return buffer


_reused = threading.local()  # per thread: the memory a chunk copied out at once decodes into


def reused_output(size: int) -> np.ndarray:
    """`size` bytes that this thread decodes chunk after chunk into, where each is copied
    out (into a band) before the next: no fresh pages to fault in per chunk, no buffer
    to free (a 4 MiB chunk's fresh pages cost a tenth of its zstd decoding)."""
    buffer = getattr(_reused, "buffer", None)
    if buffer is None or buffer.nbytes != size:
        buffer = _reused.buffer = faulted_in(size)
    return buffer


def _made(output: Future[Any] | None) -> np.ndarray | None:
    """The memory made ahead for a decode, if it is ready; never waited for (a codec thread
    would wait on a task queued behind it), so dropped if not: decoding allocates then."""
    if output is None:
        return None
    if not output.done():
        output.cancel()
        return None
    return output.result() if not output.cancelled() and output.exception() is None else None


class ChunkRead:
    """One read of chunks `coords_list` (finest grid) of `array`, none of them cached:
    `futures[i]` resolves to chunk i, decoded (and cached unless not `cached`, and handed
    to `consume`). Not `cached`, with `consume`: `consume` copies each chunk out before it
    returns, for chunks decoded into memory the thread reuses (reused_output), and the
    futures resolve to None."""

    def __init__(
        self,
        array: Array,
        coords_list: list[tuple[int, ...]],
        consume: ChunkConsumer | None = None,
        inline: bool = False,
        cached: bool = True,
    ) -> None:
        self.array = array
        self.coords_list = coords_list
        self.consume = consume
        self.cached = cached
        context = array.context
        self.inline = inline or on_codec_thread()
        # without an I/O stage (a library user's context) the calling thread fetches and
        # the codec pool still decodes
        self.io = None if self.inline else context.io_executor
        self.codec = None if self.inline else context.executor
        self.futures: list[Future[Any]] = [Future() for _ in coords_list]
        self.generation = array.cache_generation()
        self.index_generation = array.index_generation()

    def start(self) -> list[Future[Any]]:
        """Send the fetches; returns the futures at once unless the read runs inline."""
        self._prepare_codecs()
        if self.array.sharding is None:
            for position, coords in enumerate(self.coords_list):
                if not self._unanswered(self.array.stored_key(coords), [position]):
                    self._stage(self.io, self._fetch_plain, [position], position, coords)
        else:
            by_shard: dict[tuple[Any, ...], list[int]] = defaultdict(list)
            for position, coords in enumerate(self.coords_list):
                by_shard[self.array.shard_of(coords)[0]].append(position)
            for shard, positions in by_shard.items():
                if not self._unanswered(self.array.stored_key(shard), positions):
                    self._stage(self.io, self._read_shard, positions, shard, positions)
        return self.futures

    def _unanswered(self, key: str, positions: list[int]) -> bool:
        """Whether the store did not answer `key` lately (store.deadlines.UnansweredFetches): then
        `positions` fail here and now, not queued behind the I/O stage's fetches of a
        stalled store."""
        unanswered = self.array.context.unanswered
        if unanswered is None:
            return False
        try:
            unanswered.check([key])
        except StoreUnavailableError as exc:
            for position in positions:
                self.futures[position].set_exception(exc)
            return True
        return False

    def _prepare_codecs(self) -> None:
        """The array's first read makes its codecs (numcodecs imported, a tenth of a second)
        on the codec pool while the fetches are in flight, not once the first chunk is in."""
        pipeline, executor = self.array.pipeline, self.array.context.executor
        if not pipeline.prepared and executor is not None and not on_codec_thread():
            pipeline.prepared = True
            executor.submit(pipeline.prepare)

    # ------------------------------------------------------------------ stages
    def _stage(self, executor: Executor | None, fn: Callable[..., Any], positions: list[int], *args: Any) -> None:
        """Run fn(*args) on `executor` (inline when None); an error fails `positions`, as
        does the task's own failure: the I/O stage fails a task whose store call passed
        its deadline while the call still runs (store/deadlines.py)."""
        if executor is None:
            self._guarded(fn, positions, *args)
            return
        task = executor.submit(self._guarded, fn, positions, *args)
        task.add_done_callback(lambda task: self._fail(positions, task.exception()) if not task.cancelled() else None)

    def _guarded(self, fn: Callable[..., Any], positions: list[int], *args: Any) -> None:
        try:
            fn(*args)
        except BaseException as exc:
            self._fail(positions, exc)

    def _fail(self, positions: list[int], exc: BaseException | None) -> None:
        if exc is None:
            return
        for position in positions:
            future = self.futures[position]
            if not future.done():
                with contextlib.suppress(InvalidStateError):  # resolved meanwhile
                    future.set_exception(exc)

    def _decode_later(self, position: int, raw: bytes | memoryview | None, output: Future[Any] | None = None) -> None:
        self._stage(self.codec, self._decode, [position], position, raw, output)

    def _decode(self, position: int, raw: bytes | memoryview | None, output: Future[Any] | None = None) -> None:
        array = self.array
        if raw is None:  # nothing stored: the fill value, one element broadcast
            _made(output)  # (not needed: cancelled where it has not run)
            chunk = array.absent_chunk(self.coords_list[position])
        else:
            pipeline = array.sharding.inner if array.sharding else array.pipeline_of(self.coords_list[position])
            out = _made(output)
            reused = out is None and self._copied_out(pipeline.decoded_size)
            if reused:
                out = reused_output(pipeline.decoded_size)
            array.context.stats.add("chunks_decoded")  # (once each in a cold pass: not decoded twice)
            try:
                chunk = pipeline.decode(raw) if out is None else pipeline.decode(raw, out)
            except ChunkDecodeError as exc:  # named by its key: the log line says which to look at
                raise type(exc)(f"{self._stored_name(position)}: {exc}") from None
            if out is not None and np.may_share_memory(chunk, out):
                array.context.stats.add("decoded_into_reused_memory" if reused else "decoded_into_memory_made_ahead")
            if isinstance(raw, memoryview) and np.may_share_memory(chunk, np.frombuffer(raw, "u1")):
                chunk = chunk.copy()  # a view of a shard's bytes would keep them all alive
        cache = array.context.cache
        if cache is not None and self.cached:
            cache.put((array.path, self.coords_list[position]), chunk, self.generation)
        if self.consume is not None:
            self.consume(position, chunk)  # here, so that copying out overlaps decoding
        with contextlib.suppress(InvalidStateError):  # failed meanwhile: a fetch beside it did not answer
            self.futures[position].set_result(None if self._copied_out(0) else chunk)

    def _copied_out(self, size: int | None) -> bool:
        """Whether chunks of `size` decoded bytes are decoded into memory the codec thread
        reuses: `consume` copies each out, nothing keeps it, and `decode` can decompress
        into memory given (`size` not None)."""
        return not self.cached and self.consume is not None and size is not None and size <= REUSED_LARGEST

    def _stored_name(self, position: int) -> str:
        """The key of chunk `position` (of its shard, for an inner chunk)."""
        array, coords = self.array, self.coords_list[position]
        if array.sharding is None:
            return array.stored_key(coords)
        shard, inner = array.shard_of(coords)
        return f"{array.stored_key(shard)} (inner chunk {', '.join(map(str, inner))})"

    # ------------------------------------------------------------------ plain chunks
    def _fetch_plain(self, position: int, coords: tuple[int, ...]) -> None:
        array = self.array
        pipeline = array.pipeline_of(coords)
        output = self._output_ahead(pipeline)
        raw = array.get_batch([(array.stored_key(coords), None)], pipeline.max_encoded_size)[0]
        self._decode_later(position, raw, output)

    def _output_ahead(self, pipeline: Any) -> Future[Any] | None:
        """The memory a plain chunk is to be decoded into, made on the codec pool while the
        chunk is fetched (IOContext.outputs_ahead), also for a read that runs inline."""
        context, size = self.array.context, pipeline.decoded_size
        if self._copied_out(size):
            return None  # decoded into memory the codec thread reuses
        if not context.outputs_ahead or size is None or not OUTPUT_AHEAD_SMALLEST <= size <= OUTPUT_AHEAD_LARGEST:
            return None
        if context.executor is None or on_codec_thread():
            return None
        return cast("Future[Any] | None", context.executor.submit(faulted_in, size))

    # ------------------------------------------------------------------ shards
    def _read_shard(self, shard: tuple[int, ...], positions: list[int]) -> None:
        array, sharding = self.array, self.array.sharding_of(shard)
        key = array.stored_key(shard)
        indexes = array.context.shard_indexes
        # (none where the node is another now: its index may not be this array's)
        index = indexes.get((array.path, shard)) if indexes is not None and self.index_generation != -1 else None
        if index is None and sharding.whole_shard_pays(len(positions)):
            try:
                self._read_whole(shard, positions)
                return
            except ChunkTooLargeError:
                pass  # larger than a shard can be: its index says what can be read
        if index is None:
            raw_index = array.get_batch([(key, sharding.index_range)], sharding.index_size)[0]
            if raw_index is None:
                self._all_fill(positions)
                return
            index = sharding.decode_index(raw_index)
            self._keep_index(shard, index)
        inners = [array.shard_of(self.coords_list[p])[1] for p in positions]
        reads, empty = sharding.plan_reads(index, inners, key, MAX_SHARD_REQUEST)
        self._all_fill([positions[i] for i in empty])
        for n, read in enumerate(reads):
            members = [positions[i] for i, _, _ in read.members]
            # the first read here, the others beside it: this thread is the I/O stage's
            self._stage(self.io if n + 1 < len(reads) else None, self._fetch_range, members, shard, read, positions)

    def _read_whole(self, shard: tuple[int, ...], positions: list[int], keep_index: bool = True) -> None:
        """The shard in one GET, its index and chunks of one version, and its chunks at
        `positions` handed on (its index kept, with `keep_index`). Raises
        ChunkTooLargeError for a value larger than a shard can be."""
        array, sharding = self.array, self.array.sharding_of(shard)
        key = array.stored_key(shard)
        raw = array.get_batch([(key, None)], array.pipeline_of(shard).max_encoded_size)[0]
        if raw is None:
            self._all_fill(positions)
            return
        index, view = sharding.split_index(raw, check_ends=False)
        if keep_index:
            self._keep_index(shard, index)
        inners = [array.shard_of(self.coords_list[p])[1] for p in positions]
        reads, empty = sharding.plan_reads(index, inners, key, max(1, len(raw)))
        self._all_fill([positions[i] for i in empty])
        for read in reads:
            members = [positions[i] for i, _, _ in read.members]
            self._stage(None, self._deliver, members, key, read, positions, view[read.start : read.end])

    def _fetch_range(self, shard: tuple[int, ...], read: ShardRead, positions: list[int]) -> None:
        key = self.array.stored_key(shard)
        raw = self.array.get_batch([(key, ByteRange.span(read.start, read.end))], read.end - read.start)[0]
        indexes = self.array.context.shard_indexes
        if indexes is not None and not indexes.unchanged(self.array.path, self.index_generation):
            # a write of the array began or ended since the index was read: these bytes may
            # be of another version of the shard than the index that located them
            try:
                self._read_whole(shard, [positions[i] for i, _, _ in read.members], keep_index=False)
            except ChunkTooLargeError as exc:
                raise ChunkDecodeError(f"{key}: {exc}") from None
            return
        if raw is None:  # the shard went away since its index was read
            self._all_fill([positions[i] for i, _, _ in read.members])
            return
        self._deliver(key, read, positions, memoryview(raw))

    def _deliver(self, key: str, read: ShardRead, positions: list[int], view: memoryview) -> None:
        """Hand the inner chunks of `read` to the codec stage; `view` holds its bytes. Each
        is decoded from its slice of them, not a copy (the I/O thread would copy a whole
        shard holding the GIL); the shard's bytes go once all its chunks are decoded."""
        if len(view) != read.end - read.start:  # the store clamps ranges past the end
            raise ChunkDecodeError(f"{key}: shard index points past the end of the shard")
        for i, start, end in read.members:
            self._decode_later(positions[i], view[start - read.start : end - read.start])

    def _keep_index(self, shard: tuple[int, ...], index: np.ndarray) -> None:
        indexes = self.array.context.shard_indexes
        if indexes is not None:
            indexes.put((self.array.path, shard), index, self.index_generation)

    def _all_fill(self, positions: list[int]) -> None:
        for position in positions:
            self._decode_later(position, None)
