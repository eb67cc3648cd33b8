"""`data.tif`: an uncompressed baseline TIFF ("II"; BigTIFF once the file would pass
4 GiB) whose pixel data is `data` itself. The header and every IFD come first, one block
of the same size per page, so any byte of the file is found arithmetically; the pixels
follow at a 4 KiB boundary and reads there are reads of `data`. A georeferenced array's
file is a GeoTIFF (legacy/geotiff.py), its 3-D arrays one page of several bands."""

from __future__ import annotations

import itertools
import math
import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...format import Array
from ..base import FileView
from ..data import DataView
from ..georef import Georeference
from . import geotiff

_SAMPLE_FORMAT = {"u": 1, "i": 2, "f": 3}
# a strip this large is read whole by most readers; below it, strips follow chunk rows
_STRIP_TARGET = 1 << 20
_PIXEL_ALIGN = 4096
_CLASSIC_LIMIT = 1 << 32

ASCII, SHORT, LONG, RATIONAL, DOUBLE, LONG8 = 2, 3, 4, 5, 12, 16
_TYPE_DTYPE = {SHORT: "<u2", LONG: "<u4", RATIONAL: "<u4", DOUBLE: "<f8", LONG8: "<u8"}
_VALUE_SIZE = {ASCII: 1, SHORT: 2, LONG: 4, RATIONAL: 4, DOUBLE: 8, LONG8: 8}


def _is_rgb(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    return len(shape) == 3 and shape[2] in (3, 4) and dtype.kind == "u" and dtype.itemsize in (1, 2)


def represents(array: Array) -> bool:
    """2-D (Y, X), 3-D (Z, Y, X) pages, or (Y, X, 3|4) uint8/16 as RGB(A); integer and
    float samples of 8-64 bits (no bool, no complex)."""
    dtype = array.dtype.little_endian
    shape = array.shape
    return (len(shape) in (2, 3) and dtype.kind in _SAMPLE_FORMAT
            and all(n < _CLASSIC_LIMIT for n in shape))


def rows_per_strip(height: int, chunk_height: int, row_bytes: int) -> int:
    """As many rows as fit in a strip of about `_STRIP_TARGET` bytes, taken so that no
    strip crosses a chunk row: reading a strip then touches one row of chunks."""
    most = max(1, _STRIP_TARGET // row_bytes)
    if chunk_height >= height:
        return min(height, most)
    divisors = set()
    for d in range(1, math.isqrt(chunk_height) + 1):
        if chunk_height % d == 0:
            divisors.update((d, chunk_height // d))
    return max(d for d in divisors if d <= most)


def _ifd(tags: list[tuple[int, int, np.ndarray]], at: int, big: bool, next_ifd: int) -> bytes:
    """One IFD written at file offset `at`, its out-of-line values right after it."""
    count_fmt, entry_fmt, inline = ("<Q", "<HHQ", 8) if big else ("<H", "<HHI", 4)
    offset_fmt = "<Q" if big else "<I"
    entry_size = struct.calcsize(entry_fmt) + inline
    extra_at = at + struct.calcsize(count_fmt) + len(tags) * entry_size + inline
    entries, extra = [struct.pack(count_fmt, len(tags))], []
    for tag, kind, values in tags:
        raw = bytes(values) if kind == ASCII else np.asarray(values, dtype=_TYPE_DTYPE[kind]).tobytes()
        count = len(values) // 2 if kind == RATIONAL else len(values)
        if len(raw) <= inline:
            field = raw.ljust(inline, b"\0")
        else:
            field = struct.pack(offset_fmt, extra_at)
            raw += b"\0" * (len(raw) % 2)  # values start on a word boundary
            extra.append(raw)
            extra_at += len(raw)
        entries.append(struct.pack(entry_fmt, tag, kind, count) + field)
    block = b"".join(entries) + struct.pack(offset_fmt, next_ifd) + b"".join(extra)
    return block + b"\0" * (-len(block) % 8)


def _ifd_size(tags: list[tuple[int, int, Sequence[int]]], big: bool) -> int:
    """len(_ifd(tags, ...)), from the number of each tag's values alone."""
    count_size, entry_size, inline = (8, 20, 8) if big else (2, 12, 4)
    size = count_size + len(tags) * entry_size + inline
    for _, kind, values in tags:
        raw = len(values) * _VALUE_SIZE[kind]
        if raw > inline:
            size += raw + raw % 2
    return size + (-size % 8)


def tiff_size(array: Array, geo: Georeference | None = None, overviews: Sequence[Array] = ()) -> int:
    """The size of `data.tif` (TiffView's), from the metadata alone."""
    return TiffLayout(array, geo=geo, overviews=overviews).size()


@dataclass(frozen=True)
class _Image:
    """The pixel geometry of one image: `pages` of height × width pixels of `samples`
    samples each, in strips that never cross a chunk row."""

    pages: int
    height: int
    width: int
    samples: int
    planar: bool  # bands one after the other (PlanarConfiguration 2), as in (B, Y, X)
    row_bytes: int  # of one band, where planar
    rows_per_strip: int

    @classmethod
    def of(cls, array: Array, band: int | None, rgb: bool) -> _Image:
        """`band`: the dimension of a georeferenced 3-D array that is not Y or X."""
        shape, chunks, itemsize = array.shape, array.chunk_shape, array.dtype.itemsize
        planar = band == 0
        if planar:
            pages, height, width, samples, chunk_height = 1, shape[1], shape[2], shape[0], chunks[1]
        elif band == 2 or rgb:
            pages, height, width, samples, chunk_height = 1, shape[0], shape[1], shape[2], chunks[0]
        elif len(shape) == 2:
            pages, height, width, samples, chunk_height = 1, shape[0], shape[1], 1, chunks[0]
        else:
            pages, height, width, samples, chunk_height = shape[0], shape[1], shape[2], 1, chunks[1]
        row_bytes = width * (1 if planar else samples) * itemsize
        return cls(pages, height, width, samples, planar, row_bytes, rows_per_strip(height, chunk_height, row_bytes))

    @property
    def strips(self) -> int:
        """Strips per page (per band, where planar)."""
        return -(-self.height // self.rows_per_strip)

    @property
    def plane_bytes(self) -> int:
        """Of one band, or of all where interleaved."""
        return self.height * self.row_bytes

    @property
    def page_bytes(self) -> int:
        return self.plane_bytes * (self.samples if self.planar else 1)

    def strip_table(self, at: int) -> tuple[np.ndarray, np.ndarray]:
        """The offsets and byte counts of a page's strips whose pixels start at `at`."""
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
    """Where everything lies in the file: the header, one IFD block per page, one per
    overview (reduced-resolution image), then the pixels of each in that order."""

    def __init__(self, array: Array, bigtiff: bool | None = None, geo: Georeference | None = None,
                 overviews: Sequence[Array] = ()) -> None:
        """`bigtiff` None chooses BigTIFF only when a classic TIFF cannot hold the file.
        `overviews`: arrays of the same samples at lower resolutions, largest first."""
        dtype = array.dtype.little_endian
        band = geo.band_dim(len(array.shape)) if geo is not None else None
        self.rgb = band != 0 and _is_rgb(array.shape, dtype)
        self.geo = geo
        self.image = image = _Image.of(array, band, self.rgb)
        self.pages, self.height, self.width, self.samples = image.pages, image.height, image.width, image.samples
        self.planar, self.row_bytes, self.page_bytes = image.planar, image.row_bytes, image.page_bytes
        self.rows_per_strip, self.strips = image.rows_per_strip, image.strips
        self.overviews = [_Image.of(a, band, self.rgb) for a in overviews] if image.pages == 1 else []
        self._bits = 8 * dtype.itemsize
        self._sample_format = _SAMPLE_FORMAT[dtype.kind]
        if bigtiff is None:
            self._set_layout(big=False)
            bigtiff = self.size() >= _CLASSIC_LIMIT
        self._set_layout(bigtiff)

    def _set_layout(self, big: bool) -> None:
        self.big = big
        self.header_size = 16 if big else 8
        # the block size depends on the number of strips, not on where they lie, and on
        # the largest georeferencing tags the file may carry, not on their values
        self.block_size = self._block_size(self.image, geotiff.reserved_tags(self.geo))
        self._overview_blocks = [self._block_size(o) for o in self.overviews]
        self._pages_end = self.header_size + self.pages * self.block_size
        n = len(self.overviews)
        self._overview_ifds = list(itertools.accumulate(self._overview_blocks[:-1], initial=self._pages_end))[:n]
        ifds_end = self._pages_end + sum(self._overview_blocks)
        self.pixels_at = ifds_end + (-ifds_end % _PIXEL_ALIGN)
        pixels_end = self.pixels_at + self.pages * self.page_bytes
        self._overview_pixels = list(itertools.accumulate((o.page_bytes for o in self.overviews[:-1]),
                                                          initial=pixels_end))[:n]

    def _block_size(self, image: _Image, geo: list = ()) -> int:
        strips = range(image.strips * (image.samples if image.planar else 1))
        return _ifd_size(self._tags(image, strips, strips, geo, overview=image is not self.image), self.big)

    # ------------------------------------------------------------------ layout
    def _header(self) -> bytes:
        if self.big:
            return b"II" + struct.pack("<HHHQ", 43, 8, 0, self.header_size)
        return b"II" + struct.pack("<HI", 42, self.header_size)

    def _page_block(self, z: int) -> bytes:
        offsets, counts = self.image.strip_table(self.pixels_at + z * self.page_bytes)
        at = self.header_size + z * self.block_size
        following = self._overview_ifds[:1] if z + 1 == self.pages else [at + self.block_size]
        geo = geotiff.geo_tags(self.geo) if z == 0 else []
        # georeferencing smaller than reserved (or none, of irregular coordinates) leaves padding
        block = _ifd(self._tags(self.image, offsets, counts, geo), at, self.big, following[0] if following else 0)
        return block.ljust(self.block_size, b"\0")

    def _overview_block(self, k: int) -> bytes:
        image = self.overviews[k]
        offsets, counts = image.strip_table(self._overview_pixels[k])
        following = self._overview_ifds[k + 1] if k + 1 < len(self.overviews) else 0
        return _ifd(self._tags(image, offsets, counts, overview=True), self._overview_ifds[k], self.big, following)

    def _tags(self, image: _Image, offsets: Sequence[int], counts: Sequence[int],
              geo: list | tuple = (), overview: bool = False) -> list[tuple[int, int, Sequence[int]]]:
        """An image's tags, given its strips' offsets and byte counts and its GeoTIFF tags."""
        n, rps = image.samples, image.rows_per_strip
        strip_kind = LONG8 if self.big else LONG
        tags = [(254, LONG, [1])] if overview else []  # a reduced-resolution image of the first
        tags += [
            (256, LONG, [image.width]),
            (257, LONG, [image.height]),
            (258, SHORT, [self._bits] * n),
            (259, SHORT, [1]),  # no compression
            (262, SHORT, [2 if self.rgb else 1]),  # RGB, or BlackIsZero
            (273, strip_kind, offsets),
            (277, SHORT, [n]),
            (278, LONG, [rps]),
            (279, strip_kind, counts),
            (282, RATIONAL, [1, 1]),
            (283, RATIONAL, [1, 1]),
            (284, SHORT, [2 if image.planar else 1]),  # as in C order: bands apart, or interleaved
            (296, SHORT, [1]),  # no resolution unit
        ]
        if self.rgb and n == 4:
            tags.append((338, SHORT, [2]))  # the fourth sample is unassociated alpha
        elif not self.rgb and n > 1:
            tags.append((338, SHORT, [0] * (n - 1)))  # bands beyond the first: unspecified data
        tags.append((339, SHORT, [self._sample_format] * n))
        return tags + list(geo)

    def _prefix(self, start: int, stop: int) -> bytes:
        """Bytes [start, stop) of the part before the pixels: header, IFDs, padding."""
        parts, pos = [], start
        if pos < min(stop, self.header_size):
            parts.append(self._header()[pos:stop])
            pos = min(stop, self.header_size)
        ifds_end = min(stop, self._pages_end)
        if pos < ifds_end:
            z0 = (pos - self.header_size) // self.block_size
            z1 = (ifds_end - 1 - self.header_size) // self.block_size
            blocks = b"".join(self._page_block(z) for z in range(z0, z1 + 1))
            base = self.header_size + z0 * self.block_size
            parts.append(blocks[pos - base:ifds_end - base])
            pos = ifds_end
        for k, (at, size) in enumerate(zip(self._overview_ifds, self._overview_blocks)):
            if pos < stop and at <= pos < at + size:
                end = min(stop, at + size)
                parts.append(self._overview_block(k)[pos - at:end - at])
                pos = end
        parts.append(b"\0" * (stop - pos))
        return b"".join(parts)

    def pixel_spans(self) -> list[tuple[int, int]]:
        """Where the pixels of the image and of each overview lie: (offset, length)."""
        return [(self.pixels_at, self.pages * self.page_bytes),
                *((at, o.page_bytes) for at, o in zip(self._overview_pixels, self.overviews))]

    def size(self) -> int:
        at, length = self.pixel_spans()[-1]
        return at + length


class TiffView(TiffLayout, FileView):
    def __init__(self, array: Array, chunks=None, bigtiff: bool | None = None, geo: Georeference | None = None,
                 overviews: Sequence[tuple[Array, object]] = ()) -> None:
        """`bigtiff` None chooses BigTIFF only when a classic TIFF cannot hold the file.
        `overviews`: (array, where its chunks come from) of each reduced-resolution image."""
        super().__init__(array, bigtiff, geo, [a for a, _ in overviews])
        self.data = DataView(array, chunks)
        self._sources = [self.data, *(DataView(a, c) for a, c in overviews[:len(self.overviews)])]

    def _pieces(self, offset: int, end: int):
        """(DataView, start, stop in its bytes) of each image's pixels in [offset, end)."""
        for (at, length), data in zip(self.pixel_spans(), self._sources):
            start, stop = max(offset, at), min(end, at + length)
            if start < stop:
                yield data, start - at, stop - at

    def data_span(self, offset: int, size: int) -> tuple[DataView, int, int] | None:
        for data, start, stop in self._pieces(offset, offset + size):
            return data.data_span(start, stop - start)
        return None

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size())
        if offset >= end:
            return b""
        head = self._prefix(offset, min(end, self.pixels_at)) if offset < self.pixels_at else b""
        if end <= self.pixels_at:
            return head
        return head + b"".join(data.read(start, stop - start) for data, start, stop in self._pieces(offset, end))
