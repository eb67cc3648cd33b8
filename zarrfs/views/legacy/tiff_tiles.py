"""The pixels of a tiled TIFF image (`image.ome.tif`, tiff.py's layout with tiles the
size of the chunks): tile after tile, each tile a plane of one decoded chunk."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..data import DataView


class TiledImage(Protocol):
    """What the tiles need of their image's geometry (tiff.py's _Image)."""

    @property
    def height(self) -> int: ...
    @property
    def row_bytes(self) -> int: ...
    @property
    def tile(self) -> tuple[int, int] | None: ...
    @property
    def strips(self) -> int: ...
    @property
    def tiles_across(self) -> int: ...
    @property
    def tile_bytes(self) -> int: ...


class TiledPixels:
    """The pixels of a tiled image, tile after tile and page after page (pages in C order
    of the dimensions before Y and X), each tile a plane of one decoded chunk (whole, as
    stored: the edge tiles' padding is the chunk's)."""

    def __init__(self, data: DataView, image: TiledImage) -> None:
        self.data, self.image = data, image
        assert image.tile is not None  # the pixels of a tiled image
        self._tile_height = image.tile[0]
        array = data.array
        self._lead_shape = array.shape[:-2]
        self._lead_chunks = array.chunk_shape[:-2]

    def _tile(self, index: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(chunk coords, index within the chunk of the plane) of tile `index`."""
        page, rest = divmod(index, self.image.strips)
        row, column = divmod(rest, self.image.tiles_across)
        lead = np.unravel_index(page, self._lead_shape) if self._lead_shape else ()
        coords = (*(int(i) // c for i, c in zip(lead, self._lead_chunks)), row, column)
        return coords, tuple(int(i) % c for i, c in zip(lead, self._lead_chunks))

    def read(self, offset: int, size: int) -> bytes:
        read = self._read(offset, size, cached_only=False)
        assert read is not None  # (None only where cached_only)
        return read

    def read_cached(self, offset: int, size: int) -> bytes | None:
        return self._read(offset, size, cached_only=True)

    def _read(self, offset: int, size: int, cached_only: bool) -> bytes | None:
        tile_bytes = self.image.tile_bytes
        first, last = offset // tile_bytes, (offset + size - 1) // tile_bytes
        tiles = [self._tile(i) for i in range(first, last + 1)]
        chunks = self.data.decoded_chunks(list(dict.fromkeys(c for c, _ in tiles)), cached_only)
        if chunks is None:
            return None
        by_coords = dict(zip(dict.fromkeys(c for c, _ in tiles), chunks))
        parts = []
        for i, (coords, plane) in zip(range(first, last + 1), tiles):
            values = np.ascontiguousarray(by_coords[coords][plane], dtype=self.data.dtype)
            flat = values.reshape(-1).view(np.uint8).data
            start = max(offset, i * tile_bytes) - i * tile_bytes
            stop = min(offset + size, (i + 1) * tile_bytes) - i * tile_bytes
            parts.append(flat[start:stop])
        return parts[0].tobytes() if len(parts) == 1 else b"".join(parts)

    def data_span(self, offset: int, size: int) -> tuple[DataView, int, int] | None:
        """The rows of `data` the tiles of this read lie in (a decoder ahead goes by them)."""
        image = self.image
        first = offset // image.tile_bytes
        last = (offset + max(1, size) - 1) // image.tile_bytes
        start = self._data_row(first) * image.row_bytes
        stop = min(self.data.size(), (self._data_row(last) + self._tile_height) * image.row_bytes)
        return self.data, start, max(start, stop)

    def _data_row(self, index: int) -> int:
        """The row of `data` (all pages' rows, one after another) a tile starts in."""
        page, rest = divmod(index, self.image.strips)
        return page * self.image.height + (rest // self.image.tiles_across) * self._tile_height
