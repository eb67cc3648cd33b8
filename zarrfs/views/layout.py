"""The byte layout of `data` (views/data.py), shared by what reads and what writes it: the
array's elements in C order, little-endian, each `itemsize` bytes; a run of elements is a
few regions of the array (`flat_range_boxes`). numpy is imported where it is used: what
only measures or places bytes needs none."""

from __future__ import annotations

import math
from typing import Any, Protocol

from ..format import Array


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
