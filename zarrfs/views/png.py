"""PNG files of 8-bit pixels, written with numpy and zlib's checksums alone. The image
data is kept in stored (uncompressed) deflate blocks, so a file's size follows from its
width, height and colour type: a listing gives it exactly without rendering a pixel,
and the bytes are the same on every run and every zlib."""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
PALETTE = 3  # colour type: one byte per pixel, an index into a 256-entry palette
RGBA = 6  # colour type: four bytes per pixel
_BYTES_PER_PIXEL = {PALETTE: 1, RGBA: 4}
_STORED_BLOCK = 65535  # the most bytes one stored deflate block holds
_CHUNK_OVERHEAD = 12  # length, type and CRC around each chunk's data
_ZLIB_OVERHEAD = 2 + 4  # the stream's header and its Adler-32


def _raw_size(width: int, height: int, colour_type: int) -> int:
    """The filtered scanlines: a filter byte (0, none) before each row."""
    return height * (1 + width * _BYTES_PER_PIXEL[colour_type])


def png_size(width: int, height: int, colour_type: int) -> int:
    """The exact size of the file `encode` writes for an image of these dimensions."""
    raw = _raw_size(width, height, colour_type)
    blocks = max(1, -(-raw // _STORED_BLOCK))
    idat = _ZLIB_OVERHEAD + raw + 5 * blocks  # each block: a flag byte, LEN and NLEN
    size = len(SIGNATURE) + _CHUNK_OVERHEAD + 13 + _CHUNK_OVERHEAD + idat + _CHUNK_OVERHEAD
    if colour_type == PALETTE:
        size += _CHUNK_OVERHEAD + 3 * 256 + _CHUNK_OVERHEAD + 256  # PLTE and tRNS, always whole
    return size


def encode(pixels: np.ndarray, palette: np.ndarray | None = None) -> bytes:
    """A PNG of `pixels`: (height, width) uint8 indices into `palette` ((256, 4) uint8
    RGBA: PLTE holds the colours, tRNS the alphas), or (height, width, 4) uint8 RGBA."""
    height, width = pixels.shape[:2]
    colour_type = PALETTE if pixels.ndim == 2 else RGBA
    rows = np.ascontiguousarray(pixels, dtype=np.uint8).reshape(height, -1)
    raw = np.zeros((height, rows.shape[1] + 1), np.uint8)
    raw[:, 1:] = rows
    data = raw.tobytes()
    parts = [b"\x78\x01"]  # deflate, 32 KiB window, no preset dictionary (31 divides 0x7801)
    for at in range(0, max(1, len(data)), _STORED_BLOCK):
        block = data[at : at + _STORED_BLOCK]
        last = at + _STORED_BLOCK >= len(data)
        parts.append(struct.pack("<BHH", last, len(block), len(block) ^ 0xFFFF) + block)
    parts.append(struct.pack(">I", zlib.adler32(data)))
    out = [SIGNATURE, _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0))]
    if colour_type == PALETTE:
        assert palette is not None and palette.shape == (256, 4)
        table = np.ascontiguousarray(palette, dtype=np.uint8)
        out += [_chunk(b"PLTE", table[:, :3].tobytes()), _chunk(b"tRNS", table[:, 3].tobytes())]
    out += [_chunk(b"IDAT", b"".join(parts)), _chunk(b"IEND", b"")]
    encoded = b"".join(out)
    assert len(encoded) == png_size(width, height, colour_type)
    return encoded


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
