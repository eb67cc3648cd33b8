"""The regular chunk grid and chunk key encodings: which chunks a region touches, and
the store key of each chunk."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterator


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


@dataclass(frozen=True)
class RegularChunkGrid:
    """An array's shape cut into equal chunks; edge chunks overhang the array."""

    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return tuple(math.ceil(s / c) for s, c in zip(self.shape, self.chunk_shape))

    @property
    def chunk_count(self) -> int:
        return math.prod(self.grid_shape)

    def all_chunks(self) -> Iterator[tuple[int, ...]]:
        return itertools.product(*(range(n) for n in self.grid_shape))

    def contains(self, coords: tuple[int, ...]) -> bool:
        return len(coords) == len(self.shape) and all(0 <= c < n for c, n in zip(coords, self.grid_shape))

    def chunk_region(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        """The part of the array this chunk covers (clipped at the array's edge)."""
        return tuple(
            slice(c * n, min((c + 1) * n, s)) for c, n, s in zip(coords, self.chunk_shape, self.shape)
        )

    def chunks_in(self, region: tuple[slice, ...]) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]]:
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


def normalize_selection(selection, shape: tuple[int, ...]) -> tuple[slice, ...]:
    """Ellipsis / slices / ints to one unit-step slice per dimension, clipped to shape.
    Integers become length-1 slices (the caller reshapes if it wants them dropped)."""
    if selection is Ellipsis or selection is None:
        selection = ()
    if not isinstance(selection, tuple):
        selection = (selection,)
    if any(s is Ellipsis for s in selection):
        i = next(i for i, s in enumerate(selection) if s is Ellipsis)
        fill = len(shape) - (len(selection) - 1)
        selection = selection[:i] + (slice(None),) * fill + selection[i + 1:]
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
