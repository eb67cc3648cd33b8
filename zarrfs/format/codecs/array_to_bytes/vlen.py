"""`vlen-utf8` and `vlen-bytes`: variable-length strings and byte strings, each element
a little-endian u32 length then its bytes, after a u32 count."""

from __future__ import annotations

import math

import numcodecs
import numpy as np

from ...errors import ChunkDecodeError
from ..base import ArrayBytesCodec, ArraySpec


class _VLenCodec(ArrayBytesCodec):
    _impl: numcodecs.abc.Codec

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> bytes:
        return bytes(self._impl.encode(np.ascontiguousarray(chunk, dtype=object).reshape(-1)))

    def decode(self, data: bytes, spec: ArraySpec) -> np.ndarray:
        try:
            flat = self._impl.decode(data)
        except Exception as exc:  # numcodecs raises ValueError/RuntimeError on bad input
            raise ChunkDecodeError(f"{self.name}: {exc}") from None
        if flat.size != math.prod(spec.shape):
            raise ChunkDecodeError(f"{self.name}: {flat.size} elements, expected {math.prod(spec.shape)}")
        return flat.reshape(spec.shape)


class VLenUTF8Codec(_VLenCodec):
    name = "vlen-utf8"
    _impl = numcodecs.VLenUTF8()


class VLenBytesCodec(_VLenCodec):
    name = "vlen-bytes"
    _impl = numcodecs.VLenBytes()
