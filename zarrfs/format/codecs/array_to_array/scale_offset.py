"""`scale_offset` (zarr-extensions registry): `(x - offset) * scale` on encode and
`x / scale + offset` on decode, in the input data type's own arithmetic; a value that
type cannot hold (overflow, an inexact integer division) is an error, never wrapped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ...dtypes import DataType
from ...errors import ChunkDecodeError, InvalidWriteError, MetadataError, UnsupportedError
from ...fill_values import parse_fill_value
from ..base import ArrayArrayCodec, ArraySpec


class ScaleOffsetCodec(ArrayArrayCodec):
    name = "scale_offset"

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        unknown = set(self.configuration) - {"offset", "scale"}
        if unknown:
            raise MetadataError(f"scale_offset: unknown configuration keys {sorted(unknown)}")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": self.configuration} if self.configuration else {"name": self.name}

    def _parameters(self, dtype: DataType) -> tuple[np.generic, np.generic]:
        if dtype.kind != "numeric" or dtype.numpy.kind not in "iuf":
            raise UnsupportedError(f"scale_offset is defined for integer and float types, not {dtype.name}")
        offset, scale = (
            parse_fill_value(self.configuration.get(k, d), dtype, 3) for k, d in (("offset", 0), ("scale", 1))
        )
        if scale == 0:
            raise MetadataError("scale_offset: scale must not be zero")
        return offset, scale

    def resolve(self, spec: ArraySpec) -> ArraySpec:
        # the fill value goes through the codec as the elements do (the spec's rule), so
        # the codecs after this one (sharding's empty inner chunks) see it transformed
        try:
            fill = self.encode(np.asarray(spec.fill_value, dtype=spec.dtype.numpy), spec)
        except InvalidWriteError as exc:
            raise MetadataError(f"scale_offset: the fill value cannot be encoded ({exc})") from None
        return ArraySpec(spec.shape, spec.dtype, fill.dtype.type(fill[()]))

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        offset, scale = self._parameters(spec.dtype)
        native = _native(chunk)
        if native.dtype.kind == "f":
            return cast("np.ndarray", (native - offset) * scale)
        return _checked_int(native, lambda x: (x - int(offset)) * int(scale), InvalidWriteError)

    def decode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        offset, scale = self._parameters(spec.dtype)
        native = _native(chunk)
        if native.dtype.kind == "f":
            return cast("np.ndarray", (native / scale + offset).astype(spec.dtype.numpy, copy=False))
        wide = _widened(native)
        if np.any(wide % int(scale)):
            raise ChunkDecodeError(f"scale_offset: a stored value is not a multiple of scale {scale}")
        out = _checked_int(native, lambda x: x // int(scale) + int(offset), ChunkDecodeError)
        return out.astype(spec.dtype.numpy, copy=False)


def _native(chunk: np.ndarray) -> np.ndarray:
    return np.asarray(chunk).astype(chunk.dtype.newbyteorder("="), copy=False)


def _widened(values: np.ndarray) -> np.ndarray:
    """Integers in a type that holds any result of one multiplication or addition of two
    of them: int64 up to 32 bits, Python integers (object) for 64-bit types."""
    return values.astype(object if values.dtype.itemsize == 8 else np.int64)


def _checked_int(values: np.ndarray, operation: Callable[[np.ndarray], Any], error: type[Exception]) -> np.ndarray:
    result = np.asarray(operation(_widened(values)))
    info = np.iinfo(values.dtype)
    if result.size and (result.min() < int(info.min) or result.max() > int(info.max)):
        raise error(f"scale_offset: a value falls outside the range of {values.dtype}")
    return result.astype(values.dtype)
