"""`chunks/<i>/<j>/…`: one decoded chunk of the finest grid, full chunk shape, C order,
little-endian; a chunk that is not stored reads as the fill value."""

from __future__ import annotations

import math

import numpy as np

from ..format import Array
from .base import FileView


class ChunkView(FileView):
    def __init__(self, array: Array, coords: tuple[int, ...]) -> None:
        self.array = array
        self.coords = coords
        self.dtype = array.dtype.little_endian

    def size(self) -> int:
        return math.prod(self.array.chunk_shape) * self.dtype.itemsize

    def read(self, offset: int, size: int) -> bytes:
        chunk = self.array.read_chunks([self.coords])[0]
        if chunk.dtype != self.dtype or not chunk.flags.c_contiguous:
            chunk = np.ascontiguousarray(chunk, dtype=self.dtype)
        return memoryview(chunk).cast("B")[offset:offset + size].tobytes()
