"""`data.npy`: the bytes of `data` (views/data.py) behind an NPY header, v1 (or v2 for a
header past 64 KiB), as numpy.load reads it."""

from __future__ import annotations

import functools
import io
from typing import Any

import numpy as np

from ..format import Array
from .base import FileView
from .data import DataView
from .layout import data_size


@functools.lru_cache(maxsize=256)  # arrays of a hierarchy mostly share shapes and types
def npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The NPY header of `data.npy`: v1, or v2 for a header past 64 KiB."""
    buf = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    if len(repr(header)) < 65000:
        np.lib.format.write_array_header_1_0(buf, header)
    else:
        np.lib.format.write_array_header_2_0(buf, header)
    return buf.getvalue()


def npy_size(array: Array) -> int:
    """The size of `data.npy` (NpyView's): its header, then `data`."""
    return len(npy_header(array.shape, array.dtype.little_endian)) + data_size(array)


class NpyView(FileView):
    def __init__(self, array: Array, chunks: Any = None) -> None:
        self.data = DataView(array, chunks)
        self.header = npy_header(array.shape, self.data.dtype)

    def size(self) -> int:
        return len(self.header) + self.data.size()  # npy_size's

    def read(self, offset: int, size: int) -> bytes:
        data = self._read(offset, size, False)
        assert data is not None  # only a cached_only read answers None
        return bytes(data)

    def read_cached(self, offset: int, size: int) -> memoryview | bytes | None:
        return self._read(offset, size, True)

    def data_span(self, offset: int, size: int) -> tuple[DataView, int, int] | None:
        header = len(self.header)
        if offset + size <= header:
            return None
        return self.data.data_span(max(0, offset - header), offset + size - max(offset, header))

    def generation(self) -> int:
        return self.data.generation()

    def _read(self, offset: int, size: int, cached_only: bool) -> memoryview | bytes | None:
        head = b""
        if offset < len(self.header):
            head = self.header[offset : offset + size]
            size -= len(head)
            offset = len(self.header)
        if size <= 0:
            return head
        data = self.data.read_buffer(offset - len(self.header), size, cached_only)
        if data is None or not head:
            return data
        return head + data
