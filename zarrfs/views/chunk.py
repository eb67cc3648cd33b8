"""`chunks/<i>/<j>/…`: one decoded chunk of the finest grid, full chunk shape, C order,
little-endian; a chunk that is not stored reads as the fill value."""

from __future__ import annotations

import math
import threading

import numpy as np

from ..format import Array
from .base import FileView


class ChunkView(FileView):
    def __init__(self, array: Array, coords: tuple[int, ...]) -> None:
        self.array = array
        self.coords = coords
        self.dtype = array.dtype.little_endian
        # the kernel sends several reads of one file at once: the first decodes, the others
        # then find the chunk in the cache
        self._decoding = threading.Lock()

    def size(self) -> int:
        return math.prod(self.array.chunk_shape) * self.dtype.itemsize

    def read(self, offset: int, size: int) -> bytes:
        with self._decoding:
            chunk = self.array.read_chunks([self.coords])[0]
        return bytes(self._bytes(chunk)[offset:offset + size])

    def read_cached(self, offset: int, size: int) -> memoryview | None:
        cache = self.array.context.cache
        if self.array.pending or cache is None:
            return None
        chunk = cache.get((self.array.path, self.coords))
        return None if chunk is None else self._bytes(chunk)[offset:offset + size]

    def _bytes(self, chunk: np.ndarray) -> memoryview:
        if chunk.dtype != self.dtype or not chunk.flags.c_contiguous:
            chunk = np.ascontiguousarray(chunk, dtype=self.dtype)
        return memoryview(chunk.reshape(-1).view(np.uint8))
