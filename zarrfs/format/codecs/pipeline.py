"""A chunk's codec chain: array→array codecs, one array→bytes codec, bytes→bytes codecs,
bound to the chunk's spec. `V2Pipeline` is the same for Zarr v2's filters + compressor."""

from __future__ import annotations

import math

import numcodecs
import numpy as np

from ..errors import ChunkDecodeError, MetadataError
from .array_to_bytes.sharding import ShardingCodec
from .base import ArrayArrayCodec, ArrayBytesCodec, ArraySpec, BytesBytesCodec, Codec
from .numcodecs_adapter import numcodecs_codec
from .registry import build_codec


class CodecPipeline:
    """Decodes stored bytes to a chunk of `spec.shape` and encodes it back."""

    def __init__(self, codecs: list[Codec], spec: ArraySpec) -> None:
        self.codecs = codecs
        self.spec = spec
        self.array_array: list[tuple[ArrayArrayCodec, ArraySpec]] = []
        self.bytes_bytes: list[BytesBytesCodec] = []
        array_bytes = None
        for codec in codecs:
            if isinstance(codec, ArrayArrayCodec):
                if array_bytes is not None:
                    raise MetadataError(f"array-to-array codec {codec.name} after the array-to-bytes codec")
                self.array_array.append((codec, spec))
                spec = codec.resolve(spec)
            elif isinstance(codec, ArrayBytesCodec):
                if array_bytes is not None:
                    raise MetadataError("more than one array-to-bytes codec")
                array_bytes = codec
            elif isinstance(codec, BytesBytesCodec):
                if array_bytes is None:
                    raise MetadataError(f"bytes-to-bytes codec {codec.name} before the array-to-bytes codec")
                self.bytes_bytes.append(codec)
        if array_bytes is None:
            raise MetadataError("the codec chain has no array-to-bytes codec")
        if isinstance(array_bytes, ShardingCodec):
            array_bytes.bind(spec, build_pipeline)
        self.array_bytes = array_bytes
        self.bytes_spec = spec

    @property
    def sharding(self) -> ShardingCodec | None:
        """The sharding codec when inner chunks can be read on their own by byte range."""
        if isinstance(self.array_bytes, ShardingCodec) and not self.array_array and not self.bytes_bytes:
            return self.array_bytes
        return None

    def decode(self, data: bytes) -> np.ndarray:
        for codec in reversed(self.bytes_bytes):
            data = codec.decode(data)
        chunk = self.array_bytes.decode(data, self.bytes_spec)
        for codec, spec in reversed(self.array_array):
            chunk = codec.decode(chunk, spec)
        return chunk

    def encode(self, chunk: np.ndarray) -> bytes | None:
        """Stored bytes for a chunk; None when there is nothing to store (an empty shard)."""
        for codec, spec in self.array_array:
            chunk = codec.encode(chunk, spec)
        data = self.array_bytes.encode(chunk, self.bytes_spec)
        if data is None:
            return None
        for codec in self.bytes_bytes:
            data = codec.encode(data)
        return data

    def describe(self) -> str:
        return " -> ".join(repr(c) for c in self.codecs)


def build_pipeline(documents: list, spec: ArraySpec) -> CodecPipeline:
    return CodecPipeline([build_codec(d) for d in documents], spec)


class V2Pipeline:
    """Zarr v2: numcodecs filters then a compressor, elements in C or F order."""

    def __init__(self, filters: tuple, compressor: dict | None, spec: ArraySpec, order: str) -> None:
        self.spec = spec
        self.order = order
        self.filters = [numcodecs_codec(f["id"], {k: v for k, v in f.items() if k != "id"}) for f in filters]
        self.compressor = (
            numcodecs_codec(compressor["id"], {k: v for k, v in compressor.items() if k != "id"})
            if compressor else None
        )
        self.sharding = None

    def decode(self, data: bytes) -> np.ndarray:
        try:
            out = self.compressor.decode(data) if self.compressor else data
            for f in reversed(self.filters):
                out = f.decode(out)
        except Exception as exc:  # numcodecs errors vary by codec
            raise ChunkDecodeError(f"corrupt chunk ({exc})") from None
        dtype = self.spec.dtype.numpy
        if isinstance(out, np.ndarray) and out.dtype == dtype:
            arr = out.reshape(-1)
        else:
            if dtype.kind == "O":
                raise ChunkDecodeError("object chunk did not decode to objects")
            buf = memoryview(out).cast("B") if not isinstance(out, np.ndarray) else out.view("u1").reshape(-1)
            if len(buf) != math.prod(self.spec.shape) * dtype.itemsize:
                raise ChunkDecodeError(
                    f"chunk decodes to {len(buf)} bytes, expected {math.prod(self.spec.shape) * dtype.itemsize}"
                )
            arr = np.frombuffer(buf, dtype=dtype)
        if arr.size != math.prod(self.spec.shape):
            raise ChunkDecodeError(f"chunk has {arr.size} elements, expected {math.prod(self.spec.shape)}")
        return self.spec.dtype.from_stored(arr).reshape(self.spec.shape, order=self.order)

    def encode(self, chunk: np.ndarray) -> bytes:
        chunk = self.spec.dtype.to_stored(np.asarray(chunk, dtype=self.spec.dtype.numpy))
        out = chunk.ravel(order=self.order)
        if self.order == "F" or not out.flags.c_contiguous:
            out = np.ascontiguousarray(out)
        for f in self.filters:
            out = f.encode(out)
        if self.compressor:
            out = self.compressor.encode(out)
        return bytes(out) if not isinstance(out, bytes) else out

    def describe(self) -> str:
        parts = [str(f.get_config()) for f in self.filters]
        if self.compressor:
            parts.append(str(self.compressor.get_config()))
        return " -> ".join(parts) or "none"
