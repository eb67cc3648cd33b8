"""`data`: the whole array, C order, little-endian (views/layout.py; `data.npy` shows the
same bytes behind a header, views/npy.py). A read at any offset maps to the chunks it
covers: its bytes are copied once from the decoded chunks into the reply, or served as a
slice of one cached chunk when they lie contiguously in it, or as a slice of the band its
chunk row is laid out in (format/bands.py). This module only reads: what is decoded ahead
of a sequential reader, and the table of chunks being decoded that reads wait on rather
than decode a chunk twice, are decode-ahead's (views/ahead/)."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import wait
from typing import Any

import numpy as np

from ..format import Array
from ..format.reads import wait_for_chunks
from ..store import StoreUnavailableError
from .ahead.inflight import ChunksInFlight, stored_key
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
    in `inflight`, shared with decode-ahead."""

    def __init__(self, array: Array, chunks: Any = None) -> None:
        self.array = array
        self.chunks = chunks if chunks is not None else StoredChunks(array)
        self.dtype = array.dtype.little_endian
        self.itemsize = self.dtype.itemsize
        self._size = data_size(array)
        self.layout = DataLayout(array)  # where its bytes lie in the chunks
        # worked out once (every read asks): the bytes of one index of the first dimension,
        # a regular grid's chunk height in it (else None), the length of the first
        # dimension and its chunk rows, a chunk's bytes
        self._row_stride = int(self.itemsize * max(1, math.prod(array.shape[1:])))
        grid = array.chunk_grid
        self._height: int | None = int(grid.chunk_shape[0]) if grid.regular and array.shape else None
        self._length, self._rows = (int(array.shape[0]), int(grid.grid_shape[0])) if array.shape else (0, 0)
        self._chunk_bytes = int(math.prod(array.chunk_shape) * self.itemsize)
        self._zero_d = not array.shape
        self._cache = array.context.cache  # (a context's cache is its own for good)
        self._bands = array.bands  # a chunk row's bytes laid out whole (format/bands.py)
        # the chunks being decoded, for reads or ahead of them, and their bands: decode-ahead
        # (ahead/policy.py) starts and releases rows there, reads wait there
        self.inflight = ChunksInFlight(array)

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
        if self._zero_d:
            if cached_only:
                return None
            # from self.chunks, as every other read: the writes not yet stored apply
            return little_endian_bytes(self.chunks.read_chunks([()])[0], self.dtype)[offset:end]
        pending = bool(self.chunks)
        if cached_only and (pending or self._cache is None):
            return None  # writes not yet stored are applied by read_chunks alone
        if self._bands is not None and not pending:
            data = self._from_bands(offset, end, wait=not cached_only)
            if data is not None:
                return data
        first = offset // self.itemsize
        last = -(-end // self.itemsize)
        skip = offset - first * self.itemsize
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
        claim = self.inflight.claim(coords_list)
        mine, later = claim.mine, [*claim.waiting, *claim.in_bands]
        out: list[Any] = [None] * len(coords_list)
        unanswered: StoreUnavailableError | None = None
        try:
            for c, chunk in zip(mine, self.chunks.read_chunks(mine, _reindexed(place, mine, index))):
                out[index[c]] = chunk
        except StoreUnavailableError as exc:
            unanswered = exc
            raise
        finally:
            self.inflight.settle(claim, unanswered)
        if later:
            # where the store did not answer a chunk's key (retries and deadline spent),
            # this read fails with it, as soon as it did, rather than wait as long again;
            # other errors are met again, and reported, by reading the chunks below
            wait_for_chunks(claim.waiting.values())
            # then the bands they are decoded into (as a band fails for another chunk's
            # key, it is this read's own chunks' that fail it); read from them below
            wait(claim.band_waits)
            for c, chunk in zip(later, self.chunks.read_chunks(later, _reindexed(place, later, index))):
                out[index[c]] = chunk
        return out

    # ------------------------------------------------------------------- bands
    def _from_bands(self, offset: int, end: int, wait: bool) -> memoryview | bytes | None:
        """Bytes [offset, end) of `data` from the bands of the rows they lie in: a slice of
        one band, or the slices of several joined. With `wait`, a band being made (its
        chunks being decoded ahead) is waited for (StoreUnavailableError as soon as one of
        its chunks was not answered). None where a band is missing."""
        bands = self._bands
        assert bands is not None
        first, last = self.chunk_row_at(offset), self.chunk_row_at(end - 1)
        stride = self._row_stride  # (bands are of arrays with no dimension of length 0)
        pieces = []
        for row in range(first, last + 1):
            band = bands.band(row)
            if band is None and wait:
                waiters = self.inflight.band_waiters(row)
                if waiters is not None:
                    # as a read waiting on chunks: it fails as soon as one of its own did
                    # because the store did not answer, not once the whole row is given up;
                    # where another chunk of the row did, it reads its own chunks below
                    try:
                        wait_for_chunks(waiters)
                    except StoreUnavailableError as exc:
                        if self._covers(offset, end, exc.key):
                            raise
                        return None
                    band = bands.band(row)
            if band is None:
                return None
            top = (row * self._height if self._height is not None else bands.row_top(row)[0]) * stride
            pieces.append(band.data[max(offset, top) - top : min(end, top + len(band)) - top])
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _covers(self, offset: int, end: int, key: str | None) -> bool:
        """Whether bytes [offset, end) of `data` lie in a chunk stored under `key`."""
        first, last = offset // self.itemsize, -(-end // self.itemsize)
        return any(
            stored_key(self.array, coords) == key
            for box in flat_range_boxes(self.array.shape, first, last)
            for coords, _, _ in self.array.chunk_grid.chunks_in(box)
        )

    # ------------------------------------------ its layout, for decode-ahead
    def can_decode_ahead(self) -> bool:
        """Whether chunks can be decoded in the background: there is a cache to keep them
        and an I/O stage and codec pool to do it."""
        context = self.array.context
        return context.cache is not None and context.executor is not None and context.io_executor is not None

    def chunk_bytes(self) -> int:
        """The bytes of a chunk (a rectilinear grid's largest)."""
        return self._chunk_bytes

    def chunk_row_at(self, offset: int) -> int:
        """The chunk row (chunk index in the first dimension) that holds the byte at
        `offset` of the array's bytes (the grid's row count past the end)."""
        index = offset // self._row_stride
        if index >= self._length:
            return self._rows
        if self._height is not None:
            return index // self._height
        return int(self.array.chunk_grid.edges[0].chunk_at(index))

    def row_offset(self, row: int) -> int:
        """Where chunk row `row` begins in the array's bytes (the size, past the last row):
        chunk_row_at's inverse."""
        shape, grid = self.array.shape, self.array.chunk_grid
        if not shape or row >= grid.grid_shape[0]:
            return self._size
        first = row * grid.chunk_shape[0] if grid.regular else grid.edges[0].span(row)[0]
        return int(min(self._size, int(first) * math.prod(shape[1:]) * self.itemsize))

    def generation(self) -> int:
        """Moves whenever a chunk of the array is replaced, erased or forgotten."""
        cache = self.array.context.cache
        return cache.generation(self.array.path) if cache is not None else 0
