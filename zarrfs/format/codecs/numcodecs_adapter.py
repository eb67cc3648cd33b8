"""`numcodecs.<id>` codecs as zarr-python writes them into v3 metadata: any numcodecs
filter (array→array) or compressor (bytes→bytes) by its id; the serializers (pcodec,
zfpy) have modules of their own in array_to_bytes/ that build on `NumcodecsArrayBytes`."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numcodecs
import numpy as np

from ..dtypes import DataType
from ..errors import ChunkDecodeError, UnsupportedError
from .base import ArrayArrayCodec, ArrayBytesCodec, ArraySpec, BytesLike
from .bytes_to_bytes.compressors import NumcodecsCompressor
from .bytes_to_bytes.framed_blosc import FramedBlosc

# numcodecs ids that transform arrays (the rest of numcodecs works on bytes)
ARRAY_TO_ARRAY_IDS = {"delta", "bitround", "fixedscaleoffset", "quantize", "packbits", "astype"}
_UINT8 = DataType("uint8", np.dtype("u1"))
# numcodecs codecs replaced by subclasses that check what the library does not
_VALIDATING = {"blosc": FramedBlosc}
# decoding these runs code that the store supplies (pickle.loads): never from a mount
_REFUSED = {"pickle"}


def numcodecs_codec(codec_id: str, configuration: dict[str, Any]) -> numcodecs.abc.Codec:
    """A numcodecs codec from its id and configuration, or UnsupportedError."""
    if codec_id in _REFUSED:
        raise UnsupportedError(f"codec {codec_id!r} would run code stored in the data; refused")
    try:
        if codec_id in _VALIDATING:
            return _VALIDATING[codec_id](**configuration)
        return numcodecs.get_codec({"id": codec_id, **configuration})
    except (ValueError, TypeError, KeyError) as exc:
        raise UnsupportedError(f"unknown or invalid numcodecs codec {codec_id!r}: {exc}") from None


def require_package(codec: str, package: str) -> None:
    """UnsupportedError naming `package` when the codec needs it and it is not installed."""
    try:
        importlib.import_module(package)
    except ImportError:
        raise UnsupportedError(
            f"codec {codec} needs the Python package {package!r}, which is not installed "
            f"(pip install 'zarrfs[extra-codecs]')"
        ) from None


class NumcodecsArrayArray(ArrayArrayCodec):
    def __init__(self, name: str, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        self.name = name
        self._impl = numcodecs_codec(name.removeprefix("numcodecs."), self.configuration)

    def resolve(self, spec: ArraySpec) -> ArraySpec:
        # the encoded array's shape and type, as zarr-python's `resolve_metadata` has them
        codec_id = self.name.removeprefix("numcodecs.")
        if codec_id == "packbits":
            return ArraySpec((1 + math.ceil(math.prod(spec.shape) / 8),), _UINT8, np.uint8(0))
        astype = self.configuration.get("encode_dtype" if codec_id == "astype" else "astype")
        if astype is None:
            return spec
        dtype = np.dtype(astype)
        return ArraySpec(spec.shape, DataType(str(dtype), dtype), dtype.type(0))

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        out = np.asarray(self._impl.encode(np.ascontiguousarray(chunk)))
        return out.reshape(self.resolve(spec).shape)

    def decode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        try:
            out = np.asarray(self._impl.decode(np.ascontiguousarray(chunk)))
        except Exception as exc:  # numcodecs errors vary by codec
            raise ChunkDecodeError(f"{self.name}: {exc}") from None
        if out.dtype != spec.dtype.numpy:
            out = (
                out.view(spec.dtype.numpy)
                if out.dtype.itemsize == spec.dtype.itemsize
                else out.astype(spec.dtype.numpy)
            )
        if out.size != math.prod(spec.shape):
            raise ChunkDecodeError(f"{self.name}: decoded {out.size} elements, expected {math.prod(spec.shape)}")
        return out.reshape(spec.shape)


class NumcodecsArrayBytes(ArrayBytesCodec):
    """A numcodecs codec that encodes an array itself (its own layout of the elements)."""

    def __init__(self, name: str, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        self.name = name
        self._impl = numcodecs_codec(name.removeprefix("numcodecs."), self.configuration)

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> bytes:
        return bytes(self._impl.encode(np.ascontiguousarray(chunk, dtype=spec.dtype.little_endian)))

    def decode(self, data: BytesLike, spec: ArraySpec) -> np.ndarray:
        try:
            out = np.asarray(self._impl.decode(data))
        except Exception as exc:  # numcodecs errors vary by codec
            raise ChunkDecodeError(f"{self.name}: corrupt chunk ({exc})") from None
        if out.size != math.prod(spec.shape) or out.dtype.itemsize != spec.dtype.itemsize:
            raise ChunkDecodeError(
                f"{self.name}: decoded {out.size} elements of {out.dtype}, "
                f"expected {math.prod(spec.shape)} of {spec.dtype.name}"
            )
        return out.reshape(spec.shape).view(spec.dtype.little_endian).astype(spec.dtype.numpy, copy=False)


class NumcodecsBytesBytes(NumcodecsCompressor):
    def __init__(self, name: str, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        self.name = name
        self.prepare()  # an unknown or invalid codec is refused when the array is opened

    def _make(self) -> numcodecs.abc.Codec:
        return numcodecs_codec(self.name.removeprefix("numcodecs."), self.configuration)


def numcodecs_v3_codec(name: str, configuration: dict[str, Any]) -> NumcodecsArrayArray | NumcodecsBytesBytes:
    codec_id = name.removeprefix("numcodecs.")
    if codec_id in ARRAY_TO_ARRAY_IDS:
        return NumcodecsArrayArray(name, configuration)
    return NumcodecsBytesBytes(name, configuration)
