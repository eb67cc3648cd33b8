"""`bytes`: fixed-size elements laid out in C order with a declared byte order (every
multi-byte field of a structured element too); sub-byte types one element per byte."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import ChunkDecodeError, MetadataError
from ..base import ArrayBytesCodec, ArraySpec, BytesLike


class BytesCodec(ArrayBytesCodec):
    name = "bytes"

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        self.endian = self.configuration.get("endian")
        if self.endian not in (None, "little", "big"):
            raise MetadataError(f"bytes codec endian must be 'little' or 'big', got {self.endian!r}")

    def _stored_dtype(self, spec: ArraySpec) -> np.dtype:
        dtype = spec.dtype.numpy
        if dtype.newbyteorder("<") == dtype.newbyteorder(">"):  # no multi-byte numbers in it
            return dtype
        endian = self.endian
        if endian is None:
            if spec.dtype.kind != "structured":
                raise MetadataError(f"bytes codec needs 'endian' for {spec.dtype.name}")
            endian = "little"  # the registry's rule for zarr-python's `structured` arrays
        return dtype.newbyteorder("<" if endian == "little" else ">")

    def max_encoded_size(self, spec: ArraySpec) -> int | None:
        return None if spec.dtype.variable_length else math.prod(spec.shape) * spec.dtype.itemsize

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> bytes:
        chunk = spec.dtype.to_stored(chunk)
        return np.ascontiguousarray(chunk, dtype=self._stored_dtype(spec)).tobytes()

    def decode(self, data: BytesLike, spec: ArraySpec) -> np.ndarray:
        stored = self._stored_dtype(spec)
        expected = math.prod(spec.shape) * stored.itemsize
        if len(data) != expected:
            raise ChunkDecodeError(f"chunk decodes to {len(data)} bytes, expected {expected}")
        arr = np.frombuffer(data, dtype=stored).reshape(spec.shape)
        if stored != spec.dtype.numpy:
            arr = arr.astype(spec.dtype.numpy)
        return spec.dtype.from_stored(arr)
