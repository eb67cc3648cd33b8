"""`data.tif`: an uncompressed baseline TIFF ("II"; BigTIFF once the file would pass
4 GiB) whose pixel data is `data` itself. The header and every IFD come first, one block
of the same size per page, so any byte of the file is found arithmetically; the pixels
follow at a 4 KiB boundary and reads there are reads of `data`. A georeferenced array's
file is a GeoTIFF (legacy/geotiff.py), its 3-D arrays one page of several bands.

The same layout makes a group's `image.ome.tif` (views/ometiff.py): every plane of an N-D
level a page, the other levels each page's SubIFDs, an ImageDescription kept apart after
the header, and tiles the size of the chunks where they can be (pixels then lie tile by
tile, each tile a plane of one decoded chunk)."""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...format import Array
from ..base import FileView
from ..data import DataView
from ..georef import Georeference
from . import geotiff
from .tiff_ifd import (
    ASCII,
    IMAGE_DESCRIPTION,
    LONG,
    LONG8,
    NEW_SUBFILE_TYPE,
    SHORT,
    SUB_IFDS,
    Placed,
    Tag,
    ifd,
    ifd_size,
    resolution_tags,
)
from .tiff_tiles import TiledPixels

_SAMPLE_FORMAT = {"u": 1, "i": 2, "f": 3}
# a strip this large is read whole by most readers; below it, strips follow chunk rows
_STRIP_TARGET = 1 << 20
_PIXEL_ALIGN = 4096
_CLASSIC_LIMIT = 1 << 32
_TILE_MULTIPLE = 16  # TIFF tiles are multiples of 16 pixels each way


def is_rgb(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    return len(shape) == 3 and shape[2] in (3, 4) and dtype.kind == "u" and dtype.itemsize in (1, 2)


def represents(array: Array) -> bool:
    """2-D (Y, X), 3-D (Z, Y, X) pages, or (Y, X, 3|4) uint8/16 as RGB(A); integer and
    float samples of 8-64 bits (no bool, no complex)."""
    dtype = array.dtype.little_endian
    shape = array.shape
    return len(shape) in (2, 3) and dtype.kind in _SAMPLE_FORMAT and all(n < _CLASSIC_LIMIT for n in shape)


def rows_per_strip(height: int, chunk_height: int, row_bytes: int) -> int:
    """As many rows as fit in a strip of about `_STRIP_TARGET` bytes, taken so that no
    strip crosses a chunk row: reading a strip then touches one row of chunks."""
    most = max(1, _STRIP_TARGET // row_bytes)
    if chunk_height >= height:
        return min(height, most)
    divisors: set[int] = set()
    for d in range(1, math.isqrt(chunk_height) + 1):
        if chunk_height % d == 0:
            divisors.update((d, chunk_height // d))
    return max(d for d in divisors if d <= most)


def tiff_size(array: Array, geo: Georeference | None = None, overviews: Sequence[Array] = ()) -> int:
    """The size of `data.tif` (TiffView's), from the metadata alone."""
    return TiffLayout(array, geo=geo, overviews=overviews).size()


@dataclass(frozen=True)
class _Image:
    """The pixel geometry of one image: `pages` of height × width pixels of `samples`
    samples each, in strips that never cross a chunk row, or in tiles of a chunk's
    height and width (`tile`)."""

    pages: int
    height: int
    width: int
    samples: int
    planar: bool  # bands one after the other (PlanarConfiguration 2), as in (B, Y, X)
    row_bytes: int  # of one band, where planar
    rows_per_strip: int
    tile: tuple[int, int] | None = None  # (height, width)

    @classmethod
    def of(cls, array: Array, band: int | None, rgb: bool, tiles: bool = False) -> _Image:
        """`band`: the dimension of a georeferenced 3-D array that is not Y or X. Any
        other array is pages of its last two dimensions; with `tiles`, in tiles of its
        chunks where they are a multiple of 16 pixels each way and split the width (a
        strip within a chunk row that spans the width touches one chunk already)."""
        shape, chunks, itemsize = array.shape, array.chunk_shape, array.dtype.itemsize
        planar = band == 0
        if planar:
            pages, height, width, samples, chunk_height = 1, shape[1], shape[2], shape[0], chunks[1]
        elif band == 2 or rgb:
            pages, height, width, samples, chunk_height = 1, shape[0], shape[1], shape[2], chunks[0]
        else:
            pages, height, width, samples, chunk_height = math.prod(shape[:-2]), shape[-2], shape[-1], 1, chunks[-2]
        row_bytes = width * (1 if planar else samples) * itemsize
        tile = None
        if (
            tiles
            and samples == 1
            and array.chunk_grid.regular
            and chunks[-1] < width
            and chunks[-1] % _TILE_MULTIPLE == 0
            and chunks[-2] % _TILE_MULTIPLE == 0
        ):
            tile = (chunks[-2], chunks[-1])
        return cls(
            pages, height, width, samples, planar, row_bytes, rows_per_strip(height, chunk_height, row_bytes), tile
        )

    @property
    def strips(self) -> int:
        """Strips (or tiles) per page (per band, where planar)."""
        if self.tile is not None:
            return self.tiles_down * self.tiles_across
        return -(-self.height // self.rows_per_strip)

    @property
    def tiles_down(self) -> int:
        assert self.tile is not None  # asked of a tiled image only
        return -(-self.height // self.tile[0])

    @property
    def tiles_across(self) -> int:
        assert self.tile is not None  # asked of a tiled image only
        return -(-self.width // self.tile[1])

    @property
    def tile_bytes(self) -> int:
        """Of one tile: a whole tile's pixels, at the edges too."""
        assert self.tile is not None  # asked of a tiled image only
        return self.tile[0] * self.tile[1] * (self.row_bytes // self.width)

    @property
    def plane_bytes(self) -> int:
        """Of one band, or of all where interleaved."""
        if self.tile is not None:
            return self.strips * self.tile_bytes
        return self.height * self.row_bytes

    @property
    def page_bytes(self) -> int:
        return self.plane_bytes * (self.samples if self.planar else 1)

    def strip_table(self, at: int) -> tuple[np.ndarray, np.ndarray]:
        """The offsets and byte counts of a page's strips (or tiles) whose pixels start
        at `at`."""
        if self.tile is not None:
            offsets = at + np.arange(self.strips, dtype=np.uint64) * np.uint64(self.tile_bytes)
            return offsets, np.full(self.strips, self.tile_bytes, dtype=np.uint64)
        strip_bytes = self.rows_per_strip * self.row_bytes
        offsets = at + np.arange(self.strips, dtype=np.uint64) * np.uint64(strip_bytes)
        counts = np.full(self.strips, strip_bytes, dtype=np.uint64)
        counts[-1] = (self.height - (self.strips - 1) * self.rows_per_strip) * self.row_bytes
        if self.planar:  # every band's strips, band after band
            bands = np.arange(self.samples, dtype=np.uint64)[:, None] * np.uint64(self.plane_bytes)
            offsets = (offsets[None, :] + bands).reshape(-1)
            counts = np.tile(counts, self.samples)
        return offsets, counts


class TiffLayout:
    """Where everything lies in the file: the header, the ImageDescription, one IFD block
    per page (with its SubIFDs, in a pyramid of SubIFDs), one per overview (reduced-
    resolution image after the pages), then the pixels of each image in that order."""

    def __init__(
        self,
        array: Array,
        bigtiff: bool | None = None,
        geo: Georeference | None = None,
        overviews: Sequence[Array] = (),
        *,
        subifds: bool = False,
        description: bytes = b"",
        pixel_sizes: Sequence[tuple[float, float] | None] = (),
        tiles: bool = False,
    ) -> None:
        """`bigtiff` None chooses BigTIFF only when a classic TIFF cannot hold the file.
        `overviews`: arrays of the same samples at lower resolutions, largest first; with
        `subifds`, of as many pages as `array`, each page's reduced images its SubIFDs.
        `description`: the first page's ImageDescription. `pixel_sizes`: a pixel's (height,
        width) in centimetres, of each image (the array's first), where known."""
        dtype = array.dtype.little_endian
        band = geo.band_dim(len(array.shape)) if geo is not None else None
        self.rgb = band != 0 and is_rgb(array.shape, dtype)
        self.geo = geo
        self.image = image = _Image.of(array, band, self.rgb, tiles)
        self.pages, self.height, self.width, self.samples = image.pages, image.height, image.width, image.samples
        self.planar, self.row_bytes, self.page_bytes = image.planar, image.row_bytes, image.page_bytes
        self.rows_per_strip, self.strips = image.rows_per_strip, image.strips
        levels = [_Image.of(a, band, self.rgb, tiles) for a in overviews]
        self.subifds = subifds
        self.overviews = levels if image.pages == 1 or subifds else []
        self.description = description + b"\0" if description else b""
        self._pixel_sizes = list(pixel_sizes) + [None] * (1 + len(levels) - len(pixel_sizes))
        self._bits = 8 * dtype.itemsize
        self._sample_format = _SAMPLE_FORMAT[dtype.kind]
        if bigtiff is None:  # (a classic layout that holds the file is kept: a listing asks every size)
            self._set_layout(big=False)
            if self.size() < _CLASSIC_LIMIT:
                return
            bigtiff = True
        self._set_layout(bigtiff)

    def _set_layout(self, big: bool) -> None:
        self.big = big
        self.header_size = 16 if big else 8
        self._description_at = self.header_size
        self._blocks_at = self.header_size + len(self.description) + (-len(self.description) % 8)
        self._overview_blocks = [self._block_size(k + 1) for k in range(len(self.overviews))]
        # the block size depends on the number of strips, not on where they lie, and on
        # the largest georeferencing tags the file may carry, not on their values
        self.main_ifd_size = self._block_size(0, geotiff.reserved_tags(self.geo))
        self.block_size = self.main_ifd_size + (sum(self._overview_blocks) if self.subifds else 0)
        self._pages_end = self._blocks_at + self.pages * self.block_size
        n = len(self.overviews)
        if self.subifds:  # within each page's block, after its own IFD
            self._overview_ifds = list(itertools.accumulate(self._overview_blocks[:-1], initial=self.main_ifd_size))[:n]
            ifds_end = self._pages_end
        else:
            self._overview_ifds = list(itertools.accumulate(self._overview_blocks[:-1], initial=self._pages_end))[:n]
            ifds_end = self._pages_end + sum(self._overview_blocks)
        self.pixels_at = ifds_end + (-ifds_end % _PIXEL_ALIGN)
        pixels_end = self.pixels_at + self.pages * self.page_bytes
        self._overview_pixels = list(
            itertools.accumulate((self._level_pages() * o.page_bytes for o in self.overviews[:-1]), initial=pixels_end)
        )[:n]

    def _level_pages(self) -> int:
        """Pages of each reduced-resolution image: as many as the first's, where SubIFDs."""
        return self.pages if self.subifds else 1

    def _images(self) -> list[_Image]:
        return [self.image, *self.overviews]

    def _block_size(self, level: int, geo: Sequence[Tag] = ()) -> int:
        image = self._images()[level]
        strips = range(image.strips * (image.samples if image.planar else 1))
        return ifd_size(self._tags(level, strips, strips, geo, first=level == 0), self.big)

    # ------------------------------------------------------------------ layout
    def _header(self) -> bytes:
        if self.big:
            return b"II" + struct.pack("<HHHQ", 43, 8, 0, self._blocks_at)
        return b"II" + struct.pack("<HI", 42, self._blocks_at)

    def _page_block(self, z: int) -> bytes:
        offsets, counts = self.image.strip_table(self.pixels_at + z * self.page_bytes)
        at = self._blocks_at + z * self.block_size
        if z + 1 < self.pages:
            following = at + self.block_size
        else:  # the last page: the overviews follow, where they are not SubIFDs
            following = self._overview_ifds[0] if self.overviews and not self.subifds else 0
        geo = geotiff.geo_tags(self.geo) if z == 0 else []
        subs = [at + k for k in self._overview_ifds] if self.subifds else []
        # georeferencing smaller than reserved (or none, of irregular coordinates) leaves padding
        block = ifd(self._tags(0, offsets, counts, geo, first=z == 0, subs=subs), at, self.big, following)
        block = block.ljust(self.main_ifd_size, b"\0")
        if self.subifds:
            block += b"".join(self._overview_block(k, z) for k in range(len(self.overviews)))
        return block

    def _overview_block(self, k: int, z: int = 0) -> bytes:
        image = self.overviews[k]
        offsets, counts = image.strip_table(self._overview_pixels[k] + z * image.page_bytes)
        if self.subifds:
            at, following = self._blocks_at + z * self.block_size + self._overview_ifds[k], 0
        else:
            at = self._overview_ifds[k]
            following = self._overview_ifds[k + 1] if k + 1 < len(self.overviews) else 0
        return ifd(self._tags(k + 1, offsets, counts), at, self.big, following)

    def _tags(
        self,
        level: int,
        offsets: Sequence[int] | np.ndarray,
        counts: Sequence[int] | np.ndarray,
        geo: Sequence[Tag] = (),
        first: bool = False,
        subs: Sequence[int] = (),
    ) -> list[Tag]:
        """An image's tags, given its strips' offsets and byte counts, its GeoTIFF tags,
        whether it is the first page (the description's) and its SubIFDs' offsets."""
        image = self._images()[level]
        n, rps = image.samples, image.rows_per_strip
        strip_kind = LONG8 if self.big else LONG
        tags: list[Tag] = [(NEW_SUBFILE_TYPE, LONG, [1])] if level else []  # a reduced-resolution image of the first
        tags += [
            (256, LONG, [image.width]),
            (257, LONG, [image.height]),
            (258, SHORT, [self._bits] * n),
            (259, SHORT, [1]),  # no compression
            (262, SHORT, [2 if self.rgb else 1]),  # RGB, or BlackIsZero
            (277, SHORT, [n]),
            (284, SHORT, [2 if image.planar else 1]),  # as in C order: bands apart, or interleaved
            *resolution_tags(self._pixel_sizes[level]),
        ]
        if first and self.description:
            tags.append((IMAGE_DESCRIPTION, ASCII, Placed(len(self.description), self._description_at)))
        if image.tile is None:
            tags += [(273, strip_kind, offsets), (278, LONG, [rps]), (279, strip_kind, counts)]
        else:
            tags += [
                (322, LONG, [image.tile[1]]),
                (323, LONG, [image.tile[0]]),
                (324, strip_kind, offsets),
                (325, strip_kind, counts),
            ]
        if self.subifds and not level and self.overviews:
            tags.append((SUB_IFDS, strip_kind, subs or [0] * len(self.overviews)))
        if self.rgb and n == 4:
            tags.append((338, SHORT, [2]))  # the fourth sample is unassociated alpha
        elif not self.rgb and n > 1:
            tags.append((338, SHORT, [0] * (n - 1)))  # bands beyond the first: unspecified data
        tags.append((339, SHORT, [self._sample_format] * n))
        tags.sort(key=lambda tag: tag[0])
        return tags + list(geo)

    def _prefix(self, start: int, stop: int) -> bytes:
        """Bytes [start, stop) of the part before the pixels: header, description, IFDs,
        padding."""
        parts, pos = [], start
        if pos < min(stop, self.header_size):
            parts.append(self._header()[pos:stop])
            pos = min(stop, self.header_size)
        described = self._description_at + len(self.description)
        if pos < min(stop, described):
            parts.append(self.description[pos - self._description_at : stop - self._description_at])
            pos = min(stop, described)
        if pos < min(stop, self._blocks_at):
            parts.append(b"\0" * (min(stop, self._blocks_at) - pos))
            pos = min(stop, self._blocks_at)
        ifds_end = min(stop, self._pages_end)
        if pos < ifds_end:
            z0 = (pos - self._blocks_at) // self.block_size
            z1 = (ifds_end - 1 - self._blocks_at) // self.block_size
            blocks = b"".join(self._page_block(z) for z in range(z0, z1 + 1))
            base = self._blocks_at + z0 * self.block_size
            parts.append(blocks[pos - base : ifds_end - base])
            pos = ifds_end
        if not self.subifds:
            for k, (at, size) in enumerate(zip(self._overview_ifds, self._overview_blocks)):
                if pos < stop and at <= pos < at + size:
                    end = min(stop, at + size)
                    parts.append(self._overview_block(k)[pos - at : end - at])
                    pos = end
        parts.append(b"\0" * (stop - pos))
        return b"".join(parts)

    def pixel_spans(self) -> list[tuple[int, int]]:
        """Where the pixels of the image and of each overview lie: (offset, length)."""
        return [
            (self.pixels_at, self.pages * self.page_bytes),
            *((at, self._level_pages() * o.page_bytes) for at, o in zip(self._overview_pixels, self.overviews)),
        ]

    def size(self) -> int:
        at, length = self.pixel_spans()[-1]
        return at + length


class TiffView(TiffLayout, FileView):
    def __init__(
        self,
        array: Array,
        chunks: Any = None,
        bigtiff: bool | None = None,
        geo: Georeference | None = None,
        overviews: Sequence[tuple[Array, object]] = (),
        **layout: Any,
    ) -> None:
        """`bigtiff` None chooses BigTIFF only when a classic TIFF cannot hold the file.
        `overviews`: (array, where its chunks come from) of each reduced-resolution image.
        `layout`: TiffLayout's keywords (a pyramid of SubIFDs, a description, pixel sizes,
        tiles)."""
        super().__init__(array, bigtiff, geo, [a for a, _ in overviews], **layout)
        self.data = DataView(array, chunks)
        datas = [self.data, *(DataView(a, c) for a, c in overviews[: len(self.overviews)])]
        self._sources = [d if image.tile is None else TiledPixels(d, image) for d, image in zip(datas, self._images())]

    def _pieces(self, offset: int, end: int) -> Iterator[tuple[DataView | TiledPixels, int, int]]:
        """(source, start, stop in its bytes) of each image's pixels in [offset, end)."""
        for (at, length), source in zip(self.pixel_spans(), self._sources):
            start, stop = max(offset, at), min(end, at + length)
            if start < stop:
                yield source, start - at, stop - at

    def data_span(self, offset: int, size: int) -> tuple[DataView, int, int] | None:
        for source, start, stop in self._pieces(offset, offset + size):
            return source.data_span(start, stop - start)
        return None

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size())
        if offset >= end:
            return b""
        head = self._prefix(offset, min(end, self.pixels_at)) if offset < self.pixels_at else b""
        if end <= self.pixels_at:
            return head
        return head + b"".join(source.read(start, stop - start) for source, start, stop in self._pieces(offset, end))
