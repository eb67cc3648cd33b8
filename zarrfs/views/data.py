"""`data`: the whole array, C order, little-endian (views/layout.py; `data.npy` shows the
same bytes behind a header, views/npy.py). A read at any offset maps to the chunks it
covers: its bytes are copied once from the decoded chunks into the reply, or served as a
slice of one cached chunk when they lie contiguously in it. Chunks can be fetched and decoded in the background
(`start_decoding`), and reads wait for them rather than decode them twice; when to do so
(ahead of a sequential reader) is the decoded core's policy (fs/decoded/ahead.py)."""

from __future__ import annotations

import functools
import itertools
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any

import numpy as np

from ..format import Array
from ..format.bands import BandFill
from ..format.reads import wait_for_chunks
from ..store import StoreUnavailableError
from .base import FileView, StoredChunks
from .layout import DataLayout, data_size, flat_range_boxes


def _reindexed(
    place: Callable[[int, np.ndarray], None] | None, subset: list[Any], index: dict[Any, Any]
) -> Callable[[int, np.ndarray], None] | None:
    """`place` for read_chunks over `subset` of the coords that `index` numbers."""
    if place is None:
        return None
    return lambda j, chunk: place(index[subset[j]], chunk)


def little_endian_bytes(values: np.ndarray, dtype: np.dtype) -> bytes:
    return np.ascontiguousarray(values, dtype=dtype).tobytes()


class DataView(FileView):
    """Reads run in worker threads, several at once; the chunks being decoded for them are
    under a lock."""

    def __init__(self, array: Array, chunks: Any = None) -> None:
        self.array = array
        self.chunks = chunks if chunks is not None else StoredChunks(array)
        self.dtype = array.dtype.little_endian
        self.itemsize = self.dtype.itemsize
        self._size = data_size(array)
        self._lock = threading.Lock()
        self._inflight: dict[tuple[int, ...], Future[Any]] = {}  # each leaves once done
        self._busy = 0  # how many of them are not done (counted, not looked for: every read asks)
        self.layout = DataLayout(array)  # where its bytes lie in the chunks
        self._bands = array.bands  # a chunk row's bytes laid out whole (format/bands.py)
        self._row_busy: dict[int, int] = {}  # chunk row -> its chunks being decoded (under _lock)
        self._band_waits: dict[int, Future[Any]] = {}  # chunk row -> done once its band is made or given up
        self._fills: dict[int, BandFill] = {}  # chunk row -> its band being filled by decode-ahead (under _lock)

    def size(self) -> int:
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        data = self.read_buffer(offset, size)
        assert data is not None  # only a cached_only read answers None
        return bytes(data)

    def read_cached(self, offset: int, size: int) -> memoryview | bytes | None:
        return self.read_buffer(offset, size, cached_only=True)

    def data_span(self, offset: int, size: int) -> tuple[DataView, int, int] | None:
        return self, offset, min(offset + size, self._size)

    def read_buffer(self, offset: int, size: int, cached_only: bool = False) -> memoryview | bytes | None:
        """The bytes at [offset, offset + size), without copying them when they lie in one
        decoded chunk. With `cached_only`, None unless every chunk is in the cache."""
        end = min(offset + size, self._size)
        if offset >= end:
            return b""
        if not self.array.shape:  # 0-d
            if cached_only:
                return None
            # from self.chunks, as every other read: the writes not yet stored apply
            return little_endian_bytes(self.chunks.read_chunks([()])[0], self.dtype)[offset:end]
        first = offset // self.itemsize
        last = -(-end // self.itemsize)
        skip = offset - first * self.itemsize
        if cached_only and (self.chunks or self.array.context.cache is None):
            return None  # writes not yet stored are applied by read_chunks alone
        if self._bands is not None and not self.chunks:
            data = self._from_bands(offset, end, wait=not cached_only)
            if data is not None:
                return data
        span = self.layout.run_in_one_chunk(first, last)
        if span is not None:
            coords, start = span
            chunks = self._chunks([coords], cached_only)
            if chunks is None:
                return None
            chunk = chunks[0]
            if chunk.dtype == self.dtype and chunk.flags.c_contiguous:
                flat = chunk.reshape(-1)[start : start + last - first].view(np.uint8)
                return flat.data[skip : skip + end - offset]
        out = np.empty(last - first, dtype=self.dtype)
        targets = self.layout.targets(out, first, last)
        coords_list = list(targets)

        def place(i: int, chunk: np.ndarray) -> None:
            for in_chunk, target in targets[coords_list[i]]:
                target[...] = chunk[in_chunk]

        if self._chunks(coords_list, cached_only, place) is None:
            return None
        return out.view(np.uint8).data[skip : skip + end - offset]

    def decoded_chunks(self, coords_list: list[tuple[int, ...]], cached_only: bool = False) -> list[np.ndarray] | None:
        """The decoded chunks (full chunk shape, as stored), for a view that places them
        itself (a TIFF's tiles); with `cached_only`, None unless all are in the cache."""
        if cached_only and (self.chunks or self.array.context.cache is None):
            return None
        return self._chunks(coords_list, cached_only)

    # ------------------------------------------------------------------ chunks
    def _chunks(
        self,
        coords_list: list[tuple[int, ...]],
        cached_only: bool,
        place: Callable[[int, np.ndarray], None] | None = None,
    ) -> list[np.ndarray] | None:
        """The decoded chunks (placed as they come); with `cached_only`, None on a miss."""
        if cached_only:
            chunks = [self.array.cached_chunk(c) for c in coords_list]
            if any(c is None for c in chunks):
                return None
            self.array.context.stats.add("cache_hits", len(chunks))
            if place is not None:
                for i, chunk in enumerate(chunks):
                    place(i, chunk)
            return chunks
        return self._decoded(coords_list, place)

    def _decoded(
        self, coords_list: list[tuple[int, ...]], place: Callable[[int, np.ndarray], None] | None
    ) -> list[np.ndarray]:
        """`read_chunks`, except that chunks another read (or a background decode) of this file is
        decoding are waited for, not decoded twice: the kernel sends several reads at once.
        (A chunk decoded ahead into its row's band is found there once the band is made.)"""
        if self.array.context.cache is None:
            return self.chunks.read_chunks(coords_list, place)
        index = {c: i for i, c in enumerate(coords_list)}
        with self._lock:
            waiting = {c: f for c in coords_list if (f := self._inflight.get(c)) is not None and not f.done()}
            # decoded into a band being filled: read from it once it is made (its chunks are not cached)
            in_bands = [c for c in coords_list if c not in waiting and (f := self._fills.get(c[0])) and f.placed(c)]
            mine = [c for c in coords_list if c not in waiting and c not in in_bands]
            claims: dict[tuple[int, ...], Future[Any]] = {c: Future() for c in mine}
            self._inflight.update(claims)
            self._busy += len(claims)
            self._rows_busy(mine, 1)
            filling = {c[0] for c in [*waiting, *in_bands] if c[0] in self._fills}
            band_waits = [w for row in filling if (w := self._band_waits.get(row)) is not None]
        out: list[Any] = [None] * len(coords_list)
        unanswered: StoreUnavailableError | None = None
        try:
            for c, chunk in zip(mine, self.chunks.read_chunks(mine, _reindexed(place, mine, index))):
                out[index[c]] = chunk
        except StoreUnavailableError as exc:
            unanswered = exc
            raise
        finally:
            with self._lock:
                for c, claim in claims.items():
                    if self._inflight.get(c) is claim:
                        del self._inflight[c]
                    # a reader waiting on this chunk fails with the store's silence about
                    # its own key only: the other chunks of this read may be fine
                    if unanswered is not None and unanswered.key == self._stored_key(c):
                        claim.set_exception(unanswered)
                    else:
                        claim.set_result(None)
                self._busy -= len(claims)
                done = self._rows_busy(mine, -1)
            for row in done:
                self._row_decoded(row)
        if waiting or in_bands:
            # where the store did not answer a chunk's key (retries and deadline spent),
            # this read fails with it, as soon as it did, rather than wait as long again;
            # other errors are met again, and reported, by reading the chunks below
            wait_for_chunks(waiting.values())
            # then the bands they are decoded into (as a band fails for another chunk's
            # key, it is this read's own chunks' that fail it); read from them below
            wait(band_waits)
            later = [*waiting, *in_bands]
            for c, chunk in zip(later, self.chunks.read_chunks(later, _reindexed(place, later, index))):
                out[index[c]] = chunk
        return out

    def _stored_key(self, coords: tuple[int, ...]) -> str:
        """The store key a chunk is fetched from (its shard's, for a sharded array)."""
        array = self.array
        return str(array.stored_key(coords if array.sharding is None else array.shard_of(coords)[0]))

    # ------------------------------------------------------------------- bands
    def _from_bands(self, offset: int, end: int, wait: bool) -> memoryview | bytes | None:
        """Bytes [offset, end) of `data` from the bands of the rows they lie in: a slice of
        one band, or the slices of several joined. With `wait`, a band being made (its
        chunks being decoded ahead) is waited for (StoreUnavailableError as soon as one of
        its chunks was not answered). None where a band is missing."""
        bands = self._bands
        assert bands is not None
        first, last = self.chunk_row_at(offset), self.chunk_row_at(end - 1)
        stride = math.prod(self.array.shape[1:]) * self.itemsize
        pieces = []
        for row in range(first, last + 1):
            band = bands.band(row)
            if band is None and wait:
                waiter = self._band_waits.get(row)
                if waiter is not None:
                    with self._lock:
                        decoding = [f for c, f in self._inflight.items() if c[0] == row]
                    # as a read waiting on chunks: it fails as soon as one of its own did
                    # because the store did not answer, not once the whole row is given up;
                    # where another chunk of the row did, it reads its own chunks below
                    try:
                        wait_for_chunks([waiter, *decoding])
                    except StoreUnavailableError as exc:
                        if self._covers(offset, end, exc.key):
                            raise
                        return None
                    band = bands.band(row)
            if band is None:
                return None
            top = bands.row_top(row)[0] * stride
            pieces.append(band.data[max(offset, top) - top : min(end, top + len(band)) - top])
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _covers(self, offset: int, end: int, key: str | None) -> bool:
        """Whether bytes [offset, end) of `data` lie in a chunk stored under `key`."""
        first, last = offset // self.itemsize, -(-end // self.itemsize)
        return any(
            self._stored_key(coords) == key
            for box in flat_range_boxes(self.array.shape, first, last)
            for coords, _, _ in self.array.chunk_grid.chunks_in(box)
        )

    def _rows_busy(self, coords_list: list[tuple[int, ...]], step: int) -> list[int]:
        """(Under _lock.) Count chunks being decoded per row; the rows left with none."""
        done = []
        for coords in coords_list:
            row = coords[0]
            left = self._row_busy.get(row, 0) + step
            if left > 0:
                self._row_busy[row] = left
            else:
                self._row_busy.pop(row, None)
                done.append(row)
        return done

    def _row_decoded(self, row: int) -> None:
        """No chunk of `row` is being decoded any more: its band, where one is being filled
        (or where all its chunks are in the cache, decoded by reads of their own), is
        completed from the cache and published, else dropped; then the readers waiting for
        it go on (on the thread that decoded the last chunk, a worker's)."""
        bands = self._bands
        if bands is None:
            return
        with self._lock:
            if self._row_busy.get(row):
                return
            waiter = self._band_waits.pop(row, None)
            fill = self._fills.pop(row, None)
        try:
            if fill is None and bands.band(row) is None and self._all_cached(row):
                fill = bands.begin(row)
            if fill is not None and not (fill.complete() and fill.publish()):
                fill.drop()
        finally:
            if waiter is not None:
                waiter.set_result(None)

    def _all_cached(self, row: int) -> bool:
        cache, path = self.array.context.cache, self.array.path
        assert self._bands is not None and cache is not None
        return all(cache.get((path, c)) is not None for c in self._bands.row_chunks(row))

    # ------------------------------------------------------- in the background
    def can_decode_ahead(self) -> bool:
        """Whether chunks can be decoded in the background: there is a cache to keep them
        and an I/O stage and codec pool to do it."""
        context = self.array.context
        return context.cache is not None and context.executor is not None and context.io_executor is not None

    def chunk_bytes(self) -> int:
        """The bytes of a chunk (a rectilinear grid's largest)."""
        return int(math.prod(self.array.chunk_shape) * self.itemsize)

    def chunk_row_at(self, offset: int) -> int:
        """The chunk row (chunk index in the first dimension) that holds the byte at
        `offset` of the array's bytes (the grid's row count past the end)."""
        shape, grid = self.array.shape, self.array.chunk_grid
        index = (offset // self.itemsize) // max(1, math.prod(shape[1:]))
        if grid.regular:
            return int(index // grid.chunk_shape[0])
        return int(grid.grid_shape[0] if index >= shape[0] else grid.edges[0].chunk_at(index))

    def needs_decoding(self, coords: tuple[int, ...]) -> bool:
        """Neither decoded (in the cache) nor being decoded."""
        with self._lock:
            if coords in self._inflight or coords[0] in self._fills:
                return False
        if self._bands is not None and self._bands.band(coords[0]) is not None:
            return False  # its row's band holds it
        return self.array.context.cache.get((self.array.path, coords)) is None

    def banded(self) -> bool:
        """Whether the array's chunk rows are laid out in bands (format/bands.py): decode-ahead
        then starts a row's chunks together, each decoded into the row's band."""
        return self._bands is not None

    def decoding(self) -> int:
        """How many chunks are being decoded in the background or for reads."""
        return self._busy

    def start_decoding(self, coords_list: list[tuple[int, ...]]) -> None:
        """Fetch and decode these chunks in the background (the I/O stage fetches, the
        codec pool decodes) into the cache, or, where their row is laid out in a band, into
        the band (allocated here, filled by the codec threads as each chunk is decoded,
        published once the row is done: _row_decoded); reads of them meanwhile wait for
        them. Stored chunks only: reads overlay the pending writes themselves."""
        with self._lock:
            wanted = [c for c in coords_list if c not in self._inflight]
            if not wanted:
                return
            bands = self._bands
            if bands is not None:  # readers of these rows wait for their bands, not their chunks
                for row in dict.fromkeys(c[0] for c in wanted):
                    if row not in self._fills and bands.band(row) is None:
                        self._fills[row] = bands.begin(row)
                    self._band_waits.setdefault(row, Future())
            into = [c for c in wanted if c[0] in self._fills]
            fills = [self._fills[c[0]] for c in into]
            cached = [c for c in wanted if c[0] not in self._fills]
            try:
                futures = self.array.start_reads(cached) if cached else []
                if into:
                    futures += self.array.start_reads(
                        into, lambda i, chunk: fills[i].place(into[i], chunk), cached=False
                    )
            except BaseException as exc:  # (the pools shut down at unmount, say)
                failed: BaseException | None = exc
                abandoned = [self._abandon(row) for row in dict.fromkeys(c[0] for c in wanted)]
            else:
                failed = None
                wanted = cached + into
                self._inflight.update(zip(wanted, futures))
                self._busy += len(futures)
                self._rows_busy(wanted, 1)
        if failed is not None:  # nothing is decoding those rows: their readers read them themselves
            for fill, waiter in abandoned:
                if fill is not None:
                    fill.drop()
                if waiter is not None:
                    waiter.set_result(None)
            raise failed
        for coords, future in zip(wanted, futures):  # one already done calls back at once: not under the lock
            future.add_done_callback(functools.partial(self._decoded_ahead, coords))

    def _abandon(self, row: int) -> tuple[BandFill | None, Future[Any] | None]:
        """(Under _lock.) Give up the band fill of `row` and its readers' wait, where no
        chunk of it is being decoded: the fill (to drop) and the wait (to end)."""
        if self._row_busy.get(row):
            return None, None
        return self._fills.pop(row, None), self._band_waits.pop(row, None)

    def _decoded_ahead(self, coords: tuple[int, ...], future: Future[Any]) -> None:
        failed = None if future.cancelled() else future.exception()
        with self._lock:
            self._busy -= 1
            if self._inflight.get(coords) is future:
                del self._inflight[coords]
            done = self._rows_busy([coords], -1)
            # the store did not answer it: readers of its row fail now, and later ones read
            # the row's chunks themselves (failing at once while the store stays silent)
            waiter = self._band_waits.pop(coords[0], None) if isinstance(failed, StoreUnavailableError) else None
        if waiter is not None:
            waiter.set_exception(failed)
        for row in done:
            self._row_decoded(row)

    def release_rows(self, first: int, end: int) -> None:
        """Drop the chunks of grid rows `first` to `end` (excluded) from the cache: a
        streaming reader has passed them (the kernel's page cache holds what it read of
        them). Rows of more chunks than the cache holds are found among its entries: a
        row's chunk count is the metadata's to choose, and may be vast."""
        cache = self.array.context.cache
        if cache is None or end <= first or not self.array.current():
            return  # (what is kept is of the node there now)
        path, grid = self.array.path, self.array.chunk_grid.grid_shape
        if self._bands is not None:
            generation = cache.generation(path)
            dropped = cache.discard(self._bands.key(row, generation) for row in range(first, end))
            self.array.context.stats.add("bands_passed", dropped)
        if (end - first) * math.prod(grid[1:]) > cache.entry_count():
            dropped = cache.discard_where(path, lambda coords: first <= coords[0] < end)
        else:
            dropped = cache.discard(
                (path, (row, *rest))
                for row in range(first, end)
                for rest in itertools.product(*(range(n) for n in grid[1:]))
            )
        self.array.context.stats.add("cache_passed", dropped)

    def generation(self) -> int:
        """Moves whenever a chunk of the array is replaced, erased or forgotten."""
        cache = self.array.context.cache
        return cache.generation(self.array.path) if cache is not None else 0
