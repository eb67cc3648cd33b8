"""`chunks/<i>/<j>/…`: one decoded chunk of the finest grid, its full shape (a
rectilinear grid's chunks each their own), C order, little-endian; a chunk that is not
stored reads as the fill value."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from ..format import Array
from ..format.fill_values import is_constant
from .base import FileView, StoredChunks


def chunk_size(array: Array, coords: tuple[int, ...]) -> int:
    """The size of a chunk file of `array` (ChunkView's): the chunk's full shape."""
    return int(math.prod(array.chunk_shape_of(coords)) * array.dtype.itemsize)


class ChunkView(FileView):
    def __init__(self, array: Array, coords: tuple[int, ...], chunks: Any = None) -> None:
        self.array = array
        self.chunks = chunks if chunks is not None else StoredChunks(array)
        self.coords = coords
        self.dtype = array.dtype.little_endian
        # the kernel sends several reads of one file at once: the first decodes, the others
        # then find the chunk in the cache
        self._decoding = threading.Lock()

    def size(self) -> int:
        return chunk_size(self.array, self.coords)

    def read(self, offset: int, size: int) -> bytes:
        with self._decoding:
            chunk = self.chunks.read_chunks([self.coords])[0]
        return bytes(self._bytes(chunk)[offset : offset + size])

    def read_cached(self, offset: int, size: int) -> memoryview | bytes | None:
        content = self.cached_content()
        return None if content is None else content[offset : offset + size]

    def cached_content(self) -> memoryview | _ConstantBytes | None:
        """The chunk's bytes, sliceable, when it is in the cache; else None."""
        if self.chunks:  # writes waiting to be stored apply
            return None
        chunk = self.array.cached_chunk(self.coords)  # in the cache, or its row's band
        return None if chunk is None else self._bytes(chunk)

    def pinned(self) -> FileView:
        return _PinnedChunk(self)

    def _bytes(self, chunk: np.ndarray) -> memoryview | _ConstantBytes:
        if is_constant(chunk):  # an absent chunk: its bytes are made per read
            first = chunk[(slice(0, 1),) * chunk.ndim]
            return _ConstantBytes(np.ascontiguousarray(first, dtype=self.dtype).tobytes(), chunk.size)
        if chunk.dtype != self.dtype or not chunk.flags.c_contiguous:
            chunk = np.ascontiguousarray(chunk, dtype=self.dtype)
        return chunk.reshape(-1).view(np.uint8).data


class _ConstantBytes:
    """The bytes of a chunk that holds one value throughout (fill_values.constant_array),
    sliced as a memoryview of them would be, each slice made when asked for: the metadata
    may claim a chunk far larger than any read of it."""

    def __init__(self, element: bytes, count: int) -> None:
        self._element, self._count = element, count

    def __getitem__(self, part: slice) -> bytes:
        width = len(self._element)
        start, stop, _ = part.indices(self._count * width)
        if start >= stop:
            return b""
        first = start // width
        return (self._element * (-(-stop // width) - first))[start - first * width : stop - first * width]


class _PinnedChunk(FileView):
    """One open chunk file: the chunk as decoded at the first read, so that every read of
    that open sees the same chunk while writers replace it (cached chunks are immutable,
    so holding one costs no copy)."""

    def __init__(self, view: ChunkView) -> None:
        self._view = view
        self._content: memoryview | _ConstantBytes | None = None
        self._lock = threading.Lock()

    def size(self) -> int:
        return self._view.size()

    def read(self, offset: int, size: int) -> bytes:
        with self._lock:
            if self._content is None:
                with self._view._decoding:
                    chunk = self._view.chunks.read_chunks([self._view.coords])[0]
                self._content = self._view._bytes(chunk)
        return bytes(self._content[offset : offset + size])

    def read_cached(self, offset: int, size: int) -> memoryview | bytes | None:
        content = self._content
        if content is None:
            content = self._view.cached_content()
            if content is None:
                return None
            with self._lock:
                if self._content is None:
                    self._content = content
                content = self._content
        return content[offset : offset + size]
