"""Bands: a chunk row of an array (its chunks sharing their first index) laid out whole,
C order, little-endian (the row's bytes of the array's `data`), kept in the decoded-chunk
cache in place of the row's chunks. A band is filled by the codec pool, each chunk placed
by the thread that decoded it (BandFill), and published whole: reads of `data` are slices
of it, and every other reader of a chunk that lies wholly inside the array finds it as a
view of its band (`BandLayout.chunk`, through Array.cached_chunk)."""

from __future__ import annotations

import math
import threading
import weakref
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from .chunk_cache import ChunkCache
    from .chunk_grid import ChunkGrid
    from .context import IOContext
    from .dtypes import DataType

# At most BAND_LARGEST bytes, and a 1/BAND_CACHE_SHARE share of the cache (a larger row is
# served from its chunks); at most BAND_MOST_CHUNKS chunks in a row.
BAND_LARGEST = 128 << 20
BAND_CACHE_SHARE = 4
BAND_MOST_CHUNKS = 1024


class Array(Protocol):
    """What bands need of their array (array.py's Array, which lays its rows out here)."""

    path: str
    context: IOContext
    chunk_grid: ChunkGrid
    born: int | None  # its node's generation in the cache (Array.renew)

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> DataType: ...
    @property
    def chunk_shape(self) -> tuple[int, ...]: ...

    def chunk_shape_of(self, coords: tuple[int, ...]) -> tuple[int, ...]: ...


def row_plan(array: Array) -> list[Any]:
    """(trailing chunk coords, their part of the chunk, where it goes in a row of `data`)
    for each chunk of a chunk row: how a row is laid out (the same for every row)."""
    whole = (slice(0, 1), *(slice(0, n) for n in array.shape[1:]))
    return [(c[1:], in_chunk[1:], in_box[1:]) for c, in_chunk, in_box in array.chunk_grid.chunks_in(whole)]


def band_layout(array: Array) -> BandLayout | None:
    """The bands of `array`, where its rows are laid out in them: there is a cache, its
    chunks do not span the array after the first dimension (else each chunk is one
    contiguous run of `data` already, served as a slice of itself), a row is at most
    BAND_MOST_CHUNKS chunks and its band fits the bounds above."""
    cache, shape = array.context.cache, array.shape
    if cache is None or len(shape) < 2 or array.dtype.variable_length:
        return None
    if all(c == s for c, s in zip(array.chunk_shape[1:], shape[1:])):
        return None
    if not math.prod(shape) or math.prod(array.chunk_grid.grid_shape[1:]) > BAND_MOST_CHUNKS:
        return None
    dtype = array.dtype.little_endian
    if dtype.hasobject:
        return None
    band = array.chunk_shape[0] * math.prod(shape[1:]) * dtype.itemsize  # a rectilinear grid's largest
    return BandLayout(array, cache) if band <= min(BAND_LARGEST, cache.capacity // BAND_CACHE_SHARE) else None


class BandLayout:
    """Where each chunk of an array lies in its row's band, and the published bands."""

    def __init__(self, array: Array, cache: ChunkCache) -> None:
        self.array, self.cache = array, cache
        self.dtype: np.dtype = array.dtype.little_endian
        self.plan = row_plan(array)

    def key(self, row: int, generation: int) -> tuple[Any, ...]:
        """The cache key of a row's band: it names the array's generation, so that a band
        of chunks since replaced is never found (ChunkCache.discard_where sees its row)."""
        return self.array.path, (row,), ("band", generation)

    def band(self, row: int) -> np.ndarray | None:
        """Row `row`'s band (its bytes), where it is published for the array as it is now."""
        return self.cache.get(self.key(row, self.cache.generation(self.array.path, self.array.born)))

    def row_top(self, row: int) -> tuple[int, int]:
        """(first index, height) of chunk row `row` in the first dimension."""
        grid = self.array.chunk_grid
        if grid.regular:
            height = grid.chunk_shape[0]
            return row * height, min(height, self.array.shape[0] - row * height)
        start, height = grid.edges[0].span(row)
        return start, min(height, self.array.shape[0] - start)

    def row_chunks(self, row: int) -> list[tuple[int, ...]]:
        return [(row, *rest) for rest, _, _ in self.plan]

    def whole(self, coords: tuple[int, ...]) -> bool:
        """Whether chunk `coords` lies wholly inside the array (its full shape is in the band)."""
        region = self.array.chunk_grid.chunk_region(coords)
        return all(s.stop - s.start == n for s, n in zip(region, self.array.chunk_shape_of(coords)))

    def in_band(self, band: np.ndarray, coords: tuple[int, ...]) -> np.ndarray:
        """The part of chunk `coords` inside the array, as a view of its row's band."""
        height = self.row_top(coords[0])[1]
        region = self.array.chunk_grid.chunk_region(coords)
        rows = band.view(self.dtype).reshape(height, *self.array.shape[1:])
        return rows[(slice(0, height), *region[1:])]

    def chunk(self, coords: tuple[int, ...]) -> np.ndarray | None:
        """Chunk `coords` (full shape, little-endian) as a view of its published band, where
        it lies wholly inside the array (an edge chunk's padding is not in the band: it is
        kept in the cache beside it)."""
        if not self.whole(coords):
            return None
        band = self.band(coords[0])
        return None if band is None else self.in_band(band, coords)

    def begin(self, row: int) -> BandFill:
        return BandFill(self, row)


class BandFill:
    """A band being filled. Its memory is counted in the cache from the start, reserved
    there (ChunkCache.reserve: never evicted while it fills, and the fill's own, apart from
    another's of the same row); each chunk is placed by the thread that decoded it (different
    chunks, disjoint parts: in parallel), and an edge chunk is also cached whole (readers
    of the full chunk need its padding). Published once every chunk is in, else dropped."""

    def __init__(self, layout: BandLayout, row: int) -> None:
        array, cache = layout.array, layout.cache
        self.layout, self.row = layout, row
        self.generation = cache.generation(array.path, array.born)  # a write since: the band is not published
        height = layout.row_top(row)[1]
        self.rows = np.empty((height, *array.shape[1:]), dtype=layout.dtype)
        self._missing = set(layout.row_chunks(row))
        self._placed: list[tuple[int, ...]] = []  # chunks placed from the cache (dropped there once published)
        self._lock = threading.Lock()  # guards _missing and _over (codec threads place chunks at once)
        # published or dropped: a chunk decoded later (its fetch answered past its deadline,
        # once its read had failed) is not placed, and what readers see never changes
        self._over = False
        token = object()
        cache.reserve(token, self.rows.nbytes)
        # given back once published or dropped (or, failing that, once the fill is gone)
        self._release = weakref.finalize(self, cache.release, token)

    def place(self, coords: tuple[int, ...], chunk: np.ndarray) -> None:
        """Copy chunk `coords` (decoded, as stored) into its place in the band."""
        with self._lock:
            if self._over:
                return
        layout = self.layout
        in_chunk = tuple(slice(0, s.stop - s.start) for s in layout.array.chunk_grid.chunk_region(coords))
        layout.in_band(self.rows.reshape(-1).view(np.uint8), coords)[...] = chunk[in_chunk]
        if not layout.whole(coords):  # (a copy: the chunk's memory is reused by the next decode)
            layout.cache.put((layout.array.path, coords), chunk.copy(), self.generation)
        with self._lock:
            self._missing.discard(coords)

    def placed(self, coords: tuple[int, ...]) -> bool:
        """Whether chunk `coords` is in the band already (decoded into it)."""
        with self._lock:
            return coords not in self._missing

    def complete(self) -> bool:
        """Whether every chunk is in: those still missing are taken from the cache (decoded
        by readers of their own) where they are there."""
        array = self.layout.array
        with self._lock:
            missing = sorted(self._missing)
        for coords in missing:
            chunk = self.layout.cache.get((array.path, coords))
            if chunk is None:
                return False
            self.place(coords, chunk)
            self._placed.append(coords)
        return True

    def publish(self) -> bool:
        """Make the band visible (where no write came since it began), in place of the
        chunks it took from the cache. Whether it is."""
        array, cache = self.layout.array, self.layout.cache
        self._end()
        key = self.layout.key(self.row, self.generation)
        cache.put(key, self.rows.reshape(-1).view(np.uint8), self.generation, family=key[:2])
        if cache.get(key) is None:
            return False
        cache.discard((array.path, c) for c in self._placed if self.layout.whole(c))
        array.context.stats.add("bands_made")
        return True

    def drop(self) -> None:
        """Give the band up (a chunk failed, or is not to be had): nothing of it is seen."""
        self._end()

    def _end(self) -> None:
        with self._lock:
            self._over = True
        self._release()
