"""`data` (the whole array, C order, little-endian) and `data.npy` (the same bytes behind an
NPY v1 header). A read at any offset maps to the boxes of elements it covers."""

from __future__ import annotations

import io
import math

import numpy as np

from ..format import Array
from .base import FileView


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


def little_endian_bytes(values: np.ndarray, dtype: np.dtype) -> bytes:
    return np.ascontiguousarray(values, dtype=dtype).tobytes()


class DataView(FileView):
    def __init__(self, array: Array) -> None:
        self.array = array
        self.dtype = array.dtype.little_endian
        self.itemsize = self.dtype.itemsize

    def size(self) -> int:
        return math.prod(self.array.shape) * self.itemsize

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size())
        if offset >= end:
            return b""
        if not self.array.shape:  # 0-d
            return little_endian_bytes(self.array.read(()), self.dtype)[offset:end]
        first = offset // self.itemsize
        last = -(-end // self.itemsize)
        parts = [little_endian_bytes(self.array.read(box), self.dtype)
                 for box in flat_range_boxes(self.array.shape, first, last)]
        skip = offset - first * self.itemsize
        return b"".join(parts)[skip:skip + end - offset]


def npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    buf = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    if len(repr(header)) < 65000:
        np.lib.format.write_array_header_1_0(buf, header)
    else:
        np.lib.format.write_array_header_2_0(buf, header)
    return buf.getvalue()


class NpyView(FileView):
    def __init__(self, array: Array) -> None:
        self.data = DataView(array)
        self.header = npy_header(array.shape, self.data.dtype)

    def size(self) -> int:
        return len(self.header) + self.data.size()

    def read(self, offset: int, size: int) -> bytes:
        head = b""
        if offset < len(self.header):
            head = self.header[offset:offset + size]
            size -= len(head)
            offset = len(self.header)
        if size <= 0:
            return head
        return head + self.data.read(offset - len(self.header), size)
