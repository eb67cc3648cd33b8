"""`gzip`, `zstd` and `blosc`: the spec's compressors, on numcodecs (which releases the
GIL, so chunks decode in parallel threads). The configuration is checked when the array
is opened; numcodecs, whose import loads every codec it has, when the first chunk is
encoded or decoded."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, cast

from ...errors import ChunkDecodeError, MetadataError
from ..base import BytesBytesCodec, BytesLike
from . import limits

if TYPE_CHECKING:
    import numcodecs
    import numpy as np

_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


class NumcodecsCompressor(BytesBytesCodec):
    """A bytes-to-bytes codec on a numcodecs codec, made on first use (`_make`)."""

    def _make(self) -> numcodecs.abc.Codec:
        raise NotImplementedError

    @functools.cached_property
    def _impl(self) -> numcodecs.abc.Codec:
        return self._make()

    def prepare(self) -> None:
        _ = self._impl  # numcodecs imported, the codec made (a cached property)

    def encode(self, data: bytes) -> bytes:
        return bytes(self._impl.encode(data))

    def decode(self, data: BytesLike) -> BytesLike:
        impl = self._impl
        try:
            return cast("BytesLike", impl.decode(data))
        except Exception as exc:  # each compressor has its own error types
            raise ChunkDecodeError(f"{self.name}: corrupt chunk ({exc})") from None

    @property
    def decodes_into(self) -> bool:
        return limits.declares_size(self.name.removeprefix("numcodecs."))

    def decode_into(self, data: BytesLike, out: np.ndarray) -> np.ndarray | None:
        return limits.decode_into(self._impl, data, out, self.name)

    def decode_at_most(self, data: BytesLike, limit: int) -> BytesLike:
        return cast("BytesLike", limits.decode_at_most(self._impl, data, limit, self.name))


class GzipCodec(NumcodecsCompressor):
    name = "gzip"

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        self._level = self.configuration.get("level", 5)
        if not isinstance(self._level, int) or not 0 <= self._level <= 9:
            raise MetadataError(f"gzip level must be 0-9, got {self._level!r}")

    def _make(self) -> numcodecs.abc.Codec:
        import numcodecs

        return numcodecs.GZip(level=self._level)


class ZstdCodec(NumcodecsCompressor):
    name = "zstd"

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        self._level = self.configuration.get("level", 0)
        self._checksum = self.configuration.get("checksum", False)
        if not isinstance(self._level, int) or not isinstance(self._checksum, bool):
            raise MetadataError(f"invalid zstd configuration {self.configuration}")

    def _make(self) -> numcodecs.abc.Codec:
        import numcodecs

        return numcodecs.Zstd(level=self._level, checksum=self._checksum)


class BloscCodec(NumcodecsCompressor):
    name = "blosc"

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        c = self.configuration
        shuffle = c.get("shuffle", "noshuffle")
        if not isinstance(shuffle, str) or shuffle not in _BLOSC_SHUFFLE:
            raise MetadataError(f"blosc shuffle must be one of {list(_BLOSC_SHUFFLE)}, got {shuffle!r}")
        cname = c.get("cname", "zstd")
        if cname not in ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"):
            raise MetadataError(f"unknown blosc cname {cname!r}")
        typesize = c.get("typesize") or 1
        if isinstance(typesize, int) and typesize < 1:  # numcodecs refuses it when made
            raise MetadataError(f"blosc typesize must be at least 1, got {typesize!r}")
        self._settings = {
            "cname": cname,
            "clevel": c.get("clevel", 5),
            "shuffle": _BLOSC_SHUFFLE[shuffle],
            "blocksize": c.get("blocksize", 0),
            "typesize": typesize,
        }

    def _make(self) -> numcodecs.abc.Codec:
        from .framed_blosc import FramedBlosc

        return FramedBlosc(**self._settings)
