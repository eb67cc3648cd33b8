"""Chunk grids (regular; rectilinear, of chunk sizes per dimension) and chunk key
encodings: which chunks a region touches, each chunk's shape, and its store key."""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal


@dataclass(frozen=True)
class ChunkKeyEncoding:
    """`default` (`c/1/2`) or `v2` (`1.2`) with its separator."""

    name: str = "default"
    separator: str = "/"

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        parts = [str(c) for c in coords]
        if self.name == "default":
            return self.separator.join(["c", *parts])
        return self.separator.join(parts) if parts else "0"

    def parse_key(self, key: str, ndim: int) -> tuple[int, ...] | None:
        """The chunk coordinates a key (relative to its array) names; None if it names none."""
        parts = key.split(self.separator)
        if self.name == "default":
            if parts[0] != "c":
                return None
            parts = parts[1:]
        elif ndim == 0:
            return () if key == "0" else None
        if len(parts) != ndim or not all(p.isdigit() and p.isascii() for p in parts):
            return None
        return tuple(int(p) for p in parts)


class _ChunkGridShape:
    """What every chunk grid derives from its `grid_shape` (chunks per dimension)."""

    shape: tuple[int, ...]

    @property
    def grid_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def chunk_count(self) -> int:
        return math.prod(self.grid_shape)

    def all_chunks(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(n) for n in self.grid_shape))

    def contains(self, coords: tuple[int, ...]) -> bool:
        return len(coords) == len(self.shape) and all(0 <= c < n for c, n in zip(coords, self.grid_shape))


@dataclass(frozen=True)
class RegularChunkGrid(_ChunkGridShape):
    """An array's shape cut into equal chunks; edge chunks overhang the array."""

    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]

    @functools.cached_property
    def grid_shape(self) -> tuple[int, ...]:  # worked out once: every read asks (frozen)
        return tuple(math.ceil(s / c) for s, c in zip(self.shape, self.chunk_shape))

    def chunk_region(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        """The part of the array this chunk covers (clipped at the array's edge)."""
        return tuple(slice(c * n, min((c + 1) * n, s)) for c, n, s in zip(coords, self.chunk_shape, self.shape))

    regular: ClassVar[Literal[True]] = True

    def chunk_shape_of(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """The full shape of one chunk (what its codecs see): the same for every chunk."""
        return self.chunk_shape

    def chunks_in(
        self, region: tuple[slice, ...]
    ) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]]:
        """For a region of unit-step slices: each chunk it touches, the part of the chunk
        it touches (chunk-local slices), and where that part sits in the region."""
        ranges = []
        for sl, n in zip(region, self.chunk_shape):
            if sl.stop <= sl.start:
                return
            ranges.append(range(sl.start // n, (sl.stop - 1) // n + 1))
        for coords in itertools.product(*ranges):
            in_chunk, in_region = [], []
            for c, n, sl in zip(coords, self.chunk_shape, region):
                lo = max(sl.start, c * n)
                hi = min(sl.stop, (c + 1) * n)
                in_chunk.append(slice(lo - c * n, hi - c * n))
                in_region.append(slice(lo - sl.start, hi - sl.start))
            yield coords, tuple(in_chunk), tuple(in_region)


@dataclass(frozen=True)
class EdgeRuns:
    """One dimension of a rectilinear grid: chunk sizes as runs of (size, count), only
    those of chunks that overlap the array (the metadata may declare more). Kept as runs,
    never expanded: a run may count any number of chunks."""

    extent: int
    sizes: tuple[int, ...]
    counts: tuple[int, ...]
    first_chunk: tuple[int, ...] = field(init=False, repr=False, compare=False)  # per run
    first_element: tuple[int, ...] = field(init=False, repr=False, compare=False)  # per run

    def __post_init__(self) -> None:
        chunks, elements = [0], [0]
        for size, count in zip(self.sizes, self.counts):
            chunks.append(chunks[-1] + count)
            elements.append(elements[-1] + size * count)
        object.__setattr__(self, "first_chunk", tuple(chunks))
        object.__setattr__(self, "first_element", tuple(elements))

    @classmethod
    def covering(cls, runs: list[tuple[int, int]], extent: int) -> EdgeRuns | None:
        """The runs cut to the chunks that overlap [0, extent); None when they do not
        reach the extent."""
        sizes, counts, end = [], [], 0
        for size, count in runs:
            if end >= extent:
                break
            taken = min(count, -(-(extent - end) // size))
            sizes.append(size)
            counts.append(taken)
            end += size * taken
        return cls(extent, tuple(sizes), tuple(counts)) if end >= extent else None

    @property
    def chunk_count(self) -> int:
        return self.first_chunk[-1]

    @property
    def largest(self) -> int:
        return max(self.sizes, default=1)

    def chunk_at(self, index: int) -> int:
        """The chunk that holds element `index`."""
        run = bisect.bisect_right(self.first_element, index) - 1
        return self.first_chunk[run] + (index - self.first_element[run]) // self.sizes[run]

    def span(self, chunk: int) -> tuple[int, int]:
        """(first element, full size) of a chunk."""
        run = bisect.bisect_right(self.first_chunk, chunk) - 1
        size = self.sizes[run]
        return self.first_element[run] + (chunk - self.first_chunk[run]) * size, size

    def json(self) -> list[Any]:
        """The run-length form of the specification: [size, count], or a size alone."""
        return [size if count == 1 else [size, count] for size, count in zip(self.sizes, self.counts)]


@dataclass(frozen=True)
class RectilinearChunkGrid(_ChunkGridShape):
    """An array's shape cut into chunks whose sizes are listed per dimension; the last
    chunk of a dimension may overhang the array, as a regular grid's edge chunks do."""

    shape: tuple[int, ...]
    edges: tuple[EdgeRuns, ...]

    @classmethod
    def of(cls, shape: tuple[int, ...], declared: tuple[Any, ...]) -> RectilinearChunkGrid:
        """The grid of `declared` chunk sizes (ArrayMetadata.chunk_runs) over `shape`;
        ValueError where a dimension's sizes do not reach its extent."""
        edges = []
        for d, (extent, runs) in enumerate(zip(shape, declared)):
            # (an int: one size repeated as far as the extent)
            pairs = ((runs, max(1, -(-extent // runs))),) if isinstance(runs, int) else runs
            covering = EdgeRuns.covering(list(pairs), extent)
            if covering is None:
                raise ValueError(f"the chunk sizes of dimension {d} add up to less than its length {extent}")
            edges.append(covering)
        return cls(shape, tuple(edges))

    regular: ClassVar[Literal[False]] = False

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The largest chunk size of each dimension (no chunk is larger)."""
        return tuple(e.largest for e in self.edges)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return tuple(e.chunk_count for e in self.edges)

    def chunk_shape_of(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(e.span(c)[1] for c, e in zip(coords, self.edges))

    def chunk_region(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        out = []
        for c, e, s in zip(coords, self.edges, self.shape):
            start, size = e.span(c)
            out.append(slice(start, min(start + size, s)))
        return tuple(out)

    def chunks_in(
        self, region: tuple[slice, ...]
    ) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]]:
        """As RegularChunkGrid.chunks_in."""
        per_dim = []
        for sl, e in zip(region, self.edges):
            if sl.stop <= sl.start:
                return
            parts = []
            for c in range(e.chunk_at(sl.start), e.chunk_at(sl.stop - 1) + 1):
                start, size = e.span(c)
                lo, hi = max(sl.start, start), min(sl.stop, start + size)
                parts.append((c, slice(lo - start, hi - start), slice(lo - sl.start, hi - sl.start)))
            per_dim.append(parts)
        for combo in itertools.product(*per_dim):
            yield tuple(p[0] for p in combo), tuple(p[1] for p in combo), tuple(p[2] for p in combo)


ChunkGrid = RegularChunkGrid | RectilinearChunkGrid


def normalize_selection(selection: Any, shape: tuple[int, ...]) -> tuple[slice, ...]:
    """Ellipsis / slices / ints to one unit-step slice per dimension, clipped to shape.
    Integers become length-1 slices (the caller reshapes if it wants them dropped)."""
    if selection is Ellipsis or selection is None:
        selection = ()
    if not isinstance(selection, tuple):
        selection = (selection,)
    if any(s is Ellipsis for s in selection):
        i = next(i for i, s in enumerate(selection) if s is Ellipsis)
        fill = len(shape) - (len(selection) - 1)
        selection = selection[:i] + (slice(None),) * fill + selection[i + 1 :]
    selection = selection + (slice(None),) * (len(shape) - len(selection))
    if len(selection) != len(shape):
        raise IndexError(f"selection {selection} has too many dimensions for shape {shape}")
    out = []
    for s, n in zip(selection, shape):
        if isinstance(s, slice):
            start, stop, step = s.indices(n)
            if step != 1:
                raise IndexError("only unit-step slices are supported")
            out.append(slice(start, max(start, stop)))
        else:
            i = int(s)
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError(f"index {s} out of range for size {n}")
            out.append(slice(i, i + 1))
    return tuple(out)
