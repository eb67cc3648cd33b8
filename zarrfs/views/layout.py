"""The byte layout of `data` (views/data.py), shared by what reads and what writes it: the
array's elements in C order, little-endian, each `itemsize` bytes; a run of elements is a
few regions of the array (`flat_range_boxes`), each taken from the chunks it overlaps
(DataLayout: where a read's bytes lie, one chunk's run or pieces of several). numpy is
imported where it is used: what only measures or places bytes needs none."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from ..format import Array  # (its import brings numpy)


class ChunkWrites(Protocol):
    """Where whole elements written to `data` go: the array's pending chunks."""

    array: Array

    def write(self, box: tuple[slice, ...], values: Any) -> None: ...


def flat_range_boxes(shape: tuple[int, ...], start: int, stop: int) -> list[tuple[slice, ...]]:
    """Regions whose C-order concatenation is elements [start, stop) of an array of `shape`."""
    if start >= stop:
        return []
    if len(shape) == 1:
        return [(slice(start, stop),)]
    inner = math.prod(shape[1:])
    i0, r0 = divmod(start, inner)
    i1, r1 = divmod(stop, inner)
    if i0 == i1:
        return [(slice(i0, i0 + 1), *b) for b in flat_range_boxes(shape[1:], r0, r1)]
    boxes = []
    if r0:
        boxes += [(slice(i0, i0 + 1), *b) for b in flat_range_boxes(shape[1:], r0, inner)]
        i0 += 1
    if i1 > i0:
        boxes.append((slice(i0, i1), *(slice(0, n) for n in shape[1:])))
    if r1:
        boxes += [(slice(i1, i1 + 1), *b) for b in flat_range_boxes(shape[1:], 0, r1)]
    return boxes


def data_size(array: Array) -> int:
    """The size of `data` (DataView's): every element, little-endian."""
    return int(math.prod(array.shape) * array.dtype.itemsize)


def write_elements(pending: ChunkWrites, data: bytes, first: int) -> None:
    """Whole elements (little-endian bytes) from element `first` on, applied to the
    array's pending chunks."""
    import numpy as np

    array = pending.array
    if not data:
        return
    values = np.frombuffer(data, dtype=array.dtype.little_endian)
    if not array.shape:
        pending.write((), values.reshape(()))
        return
    position = 0
    for box in flat_range_boxes(array.shape, first, first + len(values)):
        shape = tuple(s.stop - s.start for s in box)
        n = math.prod(shape)
        pending.write(box, values[position : position + n].reshape(shape))
        position += n


class DataLayout:
    """Where the bytes of `data` lie in an array's chunks: the chunks a run of elements
    takes its parts from, and where each part goes in the reply."""

    def __init__(self, array: Array) -> None:
        self.array = array
        # per dimension: whether chunks span the whole array in every dimension after it
        self._whole_after = [
            all(c == s for c, s in zip(array.chunk_shape[d + 1 :], array.shape[d + 1 :]))
            for d in range(len(array.shape))
        ]
        self._row_plan: list[Any] | None = None  # see pieces

    def run_in_one_chunk(self, first: int, last: int) -> tuple[tuple[int, ...], int] | None:
        """(chunk coords, element offset in the chunk) when elements [first, last) are one
        contiguous run of one chunk: they share a chunk, and the chunk spans the whole
        array in every dimension after the first one in which they differ. (On the path
        of every small read: plain integer arithmetic.)"""
        shape, chunk_shape, grid = self.array.shape, self.array.chunk_shape, self.array.chunk_grid
        n = len(shape)
        a, b = [0] * n, [0] * n
        i, j = first, last - 1
        for d in range(n - 1, -1, -1):
            i, a[d] = divmod(i, shape[d])
            j, b[d] = divmod(j, shape[d])
        differ = 0
        while differ < n and a[differ] == b[differ]:
            differ += 1
        if not self._whole_after[min(differ, n - 1)]:
            return None
        coords, start, regular = [], 0, grid.regular
        for d in range(n):
            if regular:
                size = chunk_shape[d]
                c = a[d] // size
                if c != b[d] // size:
                    return None
                first = c * size
            else:
                c = grid.edges[d].chunk_at(a[d])
                first, size = grid.edges[d].span(c)
                if b[d] >= first + size:
                    return None
            coords.append(c)
            start = start * size + a[d] - first
        return tuple(coords), start

    def targets(self, out: Any, first: int, last: int) -> dict[tuple[int, ...], list[Any]]:
        """Per chunk, in order of first use: (part of the chunk, where it goes in `out`)."""
        targets: dict[tuple[int, ...], list[Any]] = {}
        position = 0
        for box in flat_range_boxes(self.array.shape, first, last):
            box_shape = tuple(s.stop - s.start for s in box)
            n = math.prod(box_shape)
            segment = out[position : position + n].reshape(box_shape)
            position += n
            for coords, in_chunk, in_box in self.pieces(box):
                targets.setdefault(coords, []).append((in_chunk, segment[in_box]))
        return targets

    def pieces(self, box: tuple[slice, ...]) -> Iterable[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]]:
        """chunk_grid.chunks_in(box); for whole rows within one chunk row (what a streaming
        reader asks for), from a plan of that row's pieces made once."""
        shape, rows, grid = self.array.shape, box[0], self.array.chunk_grid
        if grid.regular:
            height = grid.chunk_shape[0]
            row = rows.start // height
            top = row * height
        else:
            row = grid.edges[0].chunk_at(rows.start)
            top, height = grid.edges[0].span(row)
        if (
            len(shape) < 2
            or rows.stop > top + height
            or any(s.start or s.stop != n for s, n in zip(box[1:], shape[1:]))
        ):
            return cast("Iterable[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]]", grid.chunks_in(box))
        if self._row_plan is None:
            from ..format.bands import row_plan

            self._row_plan = row_plan(self.array)
        plan = self._row_plan
        in_rows = slice(rows.start - top, rows.stop - top)
        box_rows = slice(0, rows.stop - rows.start)
        return [((row, *c), (in_rows, *in_chunk), (box_rows, *in_box)) for c, in_chunk, in_box in plan]
