"""`vlen-utf8` and `vlen-bytes`: variable-length strings and byte strings, each element
a little-endian u32 length then its bytes, after a u32 count. numcodecs encodes and
decodes them; it is imported with the first chunk."""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, cast

import numpy as np

from ...errors import ChunkDecodeError
from ..base import ArrayBytesCodec, ArraySpec, BytesLike, bytes_view

if TYPE_CHECKING:
    import numcodecs


class _VLenCodec(ArrayBytesCodec):
    _numcodecs_class: str

    @functools.cached_property
    def _impl(self) -> numcodecs.abc.Codec:
        import numcodecs

        return getattr(numcodecs, self._numcodecs_class)()

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> bytes:
        return bytes(self._impl.encode(np.ascontiguousarray(chunk, dtype=object).reshape(-1)))

    def decode(self, data: BytesLike, spec: ArraySpec) -> np.ndarray:
        check_count(data, math.prod(spec.shape), self.name)
        impl = self._impl
        try:
            flat = impl.decode(data)
        except Exception as exc:  # numcodecs raises ValueError/RuntimeError on bad input
            raise ChunkDecodeError(f"{self.name}: {exc}") from None
        if flat.size != math.prod(spec.shape):
            raise ChunkDecodeError(f"{self.name}: {flat.size} elements, expected {math.prod(spec.shape)}")
        return cast("np.ndarray", flat.reshape(spec.shape))


def check_count(data: BytesLike, expected: int, name: str) -> None:
    """Refuse a chunk whose header counts other than `expected` elements: numcodecs
    allocates as many objects as the header says before reading any."""
    header = bytes_view(data).cast("B")[:4]
    if len(header) == 4 and int.from_bytes(header, "little") != expected:
        raise ChunkDecodeError(
            f"{name}: header counts {int.from_bytes(header, 'little')} elements, expected {expected}"
        )


class VLenUTF8Codec(_VLenCodec):
    name = "vlen-utf8"
    _numcodecs_class = "VLenUTF8"


class VLenBytesCodec(_VLenCodec):
    name = "vlen-bytes"
    _numcodecs_class = "VLenBytes"
