"""`gzip`, `zstd` and `blosc`: the spec's compressors, on numcodecs (which releases the
GIL, so chunks decode in parallel threads)."""

from __future__ import annotations

import numcodecs

from ...errors import ChunkDecodeError, MetadataError
from ..base import BytesBytesCodec
from . import limits

_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


class FramedBlosc(numcodecs.Blosc):
    """numcodecs' Blosc, refusing a frame shorter than its header declares: the library
    itself decodes a truncated frame by reading past the buffer, returning garbage."""

    def decode(self, buf, out=None):
        data = memoryview(buf).cast("B")
        if len(data) < 16:
            raise ValueError(f"blosc frame of {len(data)} bytes is shorter than its header")
        declared = int.from_bytes(data[12:16], "little")
        if len(data) < declared:
            raise ValueError(f"blosc frame truncated: {len(data)} of {declared} bytes")
        return super().decode(buf, out)


class _NumcodecsCompressor(BytesBytesCodec):
    _impl: numcodecs.abc.Codec

    def encode(self, data: bytes) -> bytes:
        return bytes(self._impl.encode(data))

    def decode(self, data: bytes) -> bytes:
        try:
            return self._impl.decode(data)
        except Exception as exc:  # each compressor has its own error types
            raise ChunkDecodeError(f"{self.name}: corrupt chunk ({exc})") from None

    def decode_at_most(self, data: bytes, limit: int) -> bytes:
        return limits.decode_at_most(self._impl, data, limit, self.name)


class GzipCodec(_NumcodecsCompressor):
    name = "gzip"

    def __init__(self, configuration: dict | None = None) -> None:
        super().__init__(configuration)
        level = self.configuration.get("level", 5)
        if not isinstance(level, int) or not 0 <= level <= 9:
            raise MetadataError(f"gzip level must be 0-9, got {level!r}")
        self._impl = numcodecs.GZip(level=level)


class ZstdCodec(_NumcodecsCompressor):
    name = "zstd"

    def __init__(self, configuration: dict | None = None) -> None:
        super().__init__(configuration)
        level = self.configuration.get("level", 0)
        checksum = self.configuration.get("checksum", False)
        if not isinstance(level, int) or not isinstance(checksum, bool):
            raise MetadataError(f"invalid zstd configuration {self.configuration}")
        self._impl = numcodecs.Zstd(level=level, checksum=checksum)


class BloscCodec(_NumcodecsCompressor):
    name = "blosc"

    def __init__(self, configuration: dict | None = None) -> None:
        super().__init__(configuration)
        c = self.configuration
        shuffle = c.get("shuffle", "noshuffle")
        if not isinstance(shuffle, str) or shuffle not in _BLOSC_SHUFFLE:
            raise MetadataError(f"blosc shuffle must be one of {list(_BLOSC_SHUFFLE)}, got {shuffle!r}")
        cname = c.get("cname", "zstd")
        if cname not in ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"):
            raise MetadataError(f"unknown blosc cname {cname!r}")
        self._impl = FramedBlosc(
            cname=cname,
            clevel=c.get("clevel", 5),
            shuffle=_BLOSC_SHUFFLE[shuffle],
            blocksize=c.get("blocksize", 0),
            typesize=c.get("typesize") or 1,
        )
