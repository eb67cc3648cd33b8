"""How large a bytes-to-bytes codec's data can be (docs/errors.md, Bounded memory): the worst-case
encoded size of n bytes, so that a stored object larger than its chunk can need is refused
unread; and decoding that stops at a limit, so that a small decompression bomb never
allocates past the chunk's decoded size. Keyed by numcodecs codec id, because every
compressor here (v3 gzip/zstd/blosc, `numcodecs.*`, v2 compressors) is a numcodecs codec.

Bounds are the libraries' documented worst cases (zlib's and zstd's compressBound, blosc's
and lz4's fixed overheads) plus a little; an unknown codec may double its input. They
err on the generous side: refusing real data would be worse than reading a few KiB more.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ...errors import ChunkDecodeError, ChunkTooLargeError

if TYPE_CHECKING:
    import numcodecs

# The bound for chunks whose decoded size the metadata does not fix (variable-length
# strings and bytes), and the slack an unknown codec gets.
VARIABLE_LENGTH_LIMIT = 1 << 30
_SLACK = 64 << 10
_LZMA_MEMORY = 96 << 20  # what xz's strongest preset needs to decode, with room to spare


def _deflate(n: int) -> int:
    return n + (n >> 12) + (n >> 14) + (n >> 25) + 13  # zlib's compressBound


_BOUNDS: dict[str, Callable[[int], int]] = {
    "gzip": lambda n: _deflate(n) + 256,  # header (name, comment, extra) and trailer
    "zlib": lambda n: _deflate(n) + 64,
    "zstd": lambda n: n + (n >> 8) + (((128 << 10) - n) >> 11 if n < 128 << 10 else 0) + 64,
    "blosc": lambda n: n + 16 + 64,  # BLOSC_MAX_OVERHEAD: it copies what does not compress
    "lz4": lambda n: 4 + n + n // 255 + 16 + 64,
    "bz2": lambda n: n + n // 100 + 600 + 64,
    "lzma": lambda n: n + (n >> 5) + 4096,
    "base64": lambda n: 4 * (n // 3 + 1) + 64,
    "shuffle": lambda n: n,
    **{name: (lambda n: n + 16) for name in ("crc32c", "crc32", "adler32", "fletcher32", "jenkins_lookup3")},
}


def max_encoded_size(codec_id: str, size: int) -> int:
    """The most bytes codec `codec_id` can turn `size` bytes into."""
    bound = _BOUNDS.get(codec_id)
    return bound(size) if bound is not None else 2 * size + _SLACK


def decode_at_most(codec: numcodecs.abc.Codec, data: Any, limit: int, name: str) -> Any:
    """`codec.decode(data)`, raising ChunkTooLargeError if the result would be longer
    than `limit` bytes and ChunkDecodeError (naming codec `name`) if it is corrupt.
    Compressors stop before they allocate past the limit; codecs that cannot grow their
    input (checksums, shuffle) are checked after decoding."""
    decode = _BOUNDED_DECODERS.get(codec.codec_id)
    try:
        out = decode(codec, data, limit) if decode is not None else codec.decode(data)
    except ChunkDecodeError:
        raise
    except Exception as exc:  # each library has its own error types
        raise ChunkDecodeError(f"{name}: corrupt chunk ({exc})") from None
    size = out.nbytes if isinstance(out, (np.ndarray, memoryview)) else len(out)
    if size > limit:
        raise _too_large(codec.codec_id, limit)
    return out


def declares_size(codec_id: str) -> bool:
    """Whether codec `codec_id`'s data declares its decoded size, so that decode_into can
    decode it into a buffer given."""
    return codec_id in _DECLARED_SIZES


def decode_into(codec: numcodecs.abc.Codec, data: Any, out: np.ndarray, name: str) -> np.ndarray | None:
    """`codec.decode(data)` written into `out` (a byte buffer), when `data`'s header declares
    exactly `out`'s size (zstd's frame, blosc's header; the library then checks the data
    against it); None, with `out` untouched, when it does not: decode_at_most judges then."""
    declared = _DECLARED_SIZES.get(codec.codec_id)
    if declared is None or declared(memoryview(data).cast("B")) != out.nbytes:
        return None
    try:
        return cast("np.ndarray | None", codec.decode(data, out=out))
    except Exception as exc:  # each library has its own error types
        raise ChunkDecodeError(f"{name}: corrupt chunk ({exc})") from None


def _too_large(codec_id: str, limit: int) -> ChunkTooLargeError:
    return ChunkTooLargeError(f"{codec_id}: decodes to more than the {limit} bytes expected of this chunk")


def _zstd(codec: numcodecs.abc.Codec, data: Any, limit: int) -> Any:
    # numcodecs decodes every frame of the input, so the first frame's size says little:
    # one declaring 10 bytes (or none) may be followed by one that never ends
    sizes = _zstd_frame_sizes(memoryview(data).cast("B"))
    if sizes is not None and None not in sizes:
        total = sum(size for size in sizes if size is not None)  # drops nothing: None is not in sizes
        if total > limit:
            raise _too_large("zstd", limit)
        # into a buffer of exactly that size (numcodecs pads a larger one silently)
        return codec.decode(data, out=np.empty(total, dtype="u1")) if total else codec.decode(data)
    # A frame without a size: numcodecs would grow its output without end, so decode into
    # a buffer of the limit. It insists on filling that buffer exactly; a shorter input is
    # then known to be small and decoded again without one.
    out = np.empty(limit, dtype="u1")
    try:
        return codec.decode(data, out=out)
    except RuntimeError as exc:
        if "too small" in str(exc):
            raise _too_large("zstd", limit) from None
    return codec.decode(data)


_ZSTD_MAGIC = 0xFD2FB528


def _zstd_frame_sizes(data: memoryview) -> list[int | None] | None:
    """The decoded size each zstd frame of `data` declares (None: it declares none; skippable
    frames are left out); None where `data` is not a sequence of whole frames."""
    sizes: list[int | None] = []
    at = 0
    while at < len(data):
        if len(data) - at < 8:
            return None
        magic = int.from_bytes(data[at : at + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable: a length, then that many bytes
            at += 8 + int.from_bytes(data[at + 4 : at + 8], "little")
            continue
        if magic != _ZSTD_MAGIC:
            return None
        checksum = data[at + 4] & 4
        declared, header = _zstd_frame_header(data[at:])
        sizes.append(declared)
        at += header
        while True:  # blocks: a 3-byte header (last flag, type, size), then the block
            if len(data) - at < 3:
                return None
            header = int.from_bytes(data[at : at + 3], "little")
            kind, size = (header >> 1) & 3, header >> 3
            at += 3 + (1 if kind == 1 else size)  # an RLE block holds one byte
            if header & 1:
                break
        at += 4 if checksum else 0  # content checksum
    return sizes if at == len(data) else None


def _zstd_content_size(frame: memoryview) -> int | None:
    """The decompressed size a zstd frame header declares, None if it declares none."""
    if len(frame) < 5 or int.from_bytes(frame[:4], "little") != _ZSTD_MAGIC:
        return None
    return _zstd_frame_header(frame)[0]


def _zstd_frame_header(frame: memoryview) -> tuple[int | None, int]:
    """(the size a zstd frame header declares or None, the header's length), of a frame
    of at least 5 bytes whose magic number is checked."""
    descriptor = frame[4]
    single_segment = (descriptor >> 5) & 1
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
    width = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    if width == 0 or len(frame) < start + width:
        return None, start + width
    value = int.from_bytes(frame[start : start + width], "little")
    return (value + 256 if width == 2 else value), start + width


def _blosc_size(header: memoryview) -> int | None:
    """The decoded size a blosc header declares (bytes 4-8)."""
    return int.from_bytes(header[4:8], "little") if len(header) >= 16 else None


def _gzip(codec: numcodecs.abc.Codec, data: Any, limit: int) -> bytes:
    return _streams(lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), data, limit)


def _zlib(codec: numcodecs.abc.Codec, data: Any, limit: int) -> bytes:
    stream = zlib.decompressobj()
    out = stream.decompress(data, limit + 1)
    if len(out) <= limit and not stream.eof:
        raise zlib.error("incomplete or truncated stream")
    return out


def _streams(make: Callable[[], Any], data: Any, limit: int) -> bytes:
    """Concatenated gzip members, bz2 or xz streams, as gzip, bz2 and lzma read them."""
    parts, size = [], 0
    data = bytes(data)
    while True:
        stream = make()
        part = stream.decompress(data, limit + 1 - size)
        parts.append(part)
        size += len(part)
        if size > limit:
            break
        if not stream.eof:
            raise EOFError("compressed data ended before the end-of-stream marker")
        data = stream.unused_data
        if not data:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _bz2(codec: numcodecs.abc.Codec, data: Any, limit: int) -> bytes:
    return _streams(bz2.BZ2Decompressor, data, limit)


def _lzma(codec: numcodecs.abc.Codec, data: Any, limit: int) -> bytes:
    # The stream header sets the decoder's dictionary size (8 MiB at the default preset,
    # 64 MiB at preset 9, up to 1.5 GiB if hostile): bound it too, where the format can.
    memlimit = None if codec.format == lzma.FORMAT_RAW else limit + _LZMA_MEMORY
    return _streams(lambda: lzma.LZMADecompressor(codec.format, memlimit, codec.filters), data, limit)


def _declared_size(offset: int, codec_id: str) -> Callable[[numcodecs.abc.Codec, Any, int], Any]:
    """For formats whose header holds the decoded size as a little-endian u32 at `offset`
    (blosc: bytes 4-8; numcodecs' lz4: bytes 0-4), which the library then allocates."""

    def decode(codec: numcodecs.abc.Codec, data: Any, limit: int) -> Any:
        header = memoryview(data).cast("B")[offset : offset + 4]
        if len(header) == 4 and int.from_bytes(header, "little") > limit:
            raise _too_large(codec_id, limit)
        return codec.decode(data)

    return decode


_BOUNDED_DECODERS: dict[str, Callable[[numcodecs.abc.Codec, Any, int], Any]] = {
    "zstd": _zstd,
    "gzip": _gzip,
    "zlib": _zlib,
    "bz2": _bz2,
    "lzma": _lzma,
    "blosc": _declared_size(4, "blosc"),
    "lz4": _declared_size(0, "lz4"),
}

# decoded sizes that headers declare, for decode_into
_DECLARED_SIZES: dict[str, Callable[[memoryview], int | None]] = {
    "zstd": _zstd_content_size,
    "blosc": _blosc_size,
}
