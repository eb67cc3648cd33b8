"""`n5_default` (zarr-extensions registry): a default-mode N5 block, i.e. a big-endian header
(mode, dimension count, the block's size per dimension) before the elements, which its
nested chain (a full transpose, big-endian `bytes`, at most one compressor) encodes."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import ChunkDecodeError, ChunkTooLargeError, MetadataError
from ...fill_values import fill_array
from ..array_to_array.transpose import TransposeCodec
from ..base import ArrayBytesCodec, ArraySpec, BytesLike, NestedPipeline, bytes_view
from .bytes import BytesCodec

_DEFAULT_MODE = 0
# chains kept for the block shapes of truncated edge blocks (made again past this many)
_SHAPES_KEPT = 64


def header_size(ndim: int) -> int:
    return 4 + 4 * ndim


class N5DefaultCodec(ArrayBytesCodec):
    name = "n5_default"
    # the nested chain for whole blocks: bind() makes it, before any other use
    inner: NestedPipeline

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        codecs = self.configuration.get("codecs")
        if not isinstance(codecs, list) or not 2 <= len(codecs) <= 3:
            raise MetadataError(f"n5_default codecs must be a list of 2 or 3 codecs, got {codecs!r}")
        self.codecs = codecs

    def bind(self, spec: ArraySpec, build_pipeline: Callable[[list[Any], ArraySpec], NestedPipeline]) -> None:
        """Build the nested chain for chunks of `spec` and check it is the one the registry
        allows: transpose reversing every dimension, then `bytes`, then one compressor."""
        ndim = len(spec.shape)
        if ndim == 0 or ndim > 0xFFFF or any(n > 0xFFFFFFFF for n in spec.shape):
            raise MetadataError(f"n5_default: an N5 block cannot have the shape {spec.shape}")
        if spec.dtype.variable_length:
            raise MetadataError(f"n5_default: N5 has no data type like {spec.dtype.name}")
        # the chain's own checks leave, for 2 or 3 codecs with these two, a compressor third
        inner = build_pipeline(self.codecs, spec)
        transposes = [codec for codec, _ in inner.array_array]
        if (
            len(transposes) != 1
            or not isinstance(transposes[0], TransposeCodec)
            or transposes[0].order != tuple(range(ndim - 1, -1, -1))
        ):
            raise MetadataError("n5_default: the first codec must be a transpose reversing every dimension")
        serializer = inner.array_bytes
        if (
            not isinstance(serializer, BytesCodec)
            or serializer.endian == "little"
            or (serializer.endian is None and spec.dtype.itemsize > 1)
        ):
            raise MetadataError("n5_default: the second codec must be a big-endian bytes codec")
        self._build = build_pipeline
        self.inner = inner
        self.chunk_shape = spec.shape
        self._by_shape: dict[tuple[int, ...], NestedPipeline] = {spec.shape: inner}

    def prepare(self) -> None:
        self.inner.prepare()

    def max_encoded_size(self, spec: ArraySpec) -> int | None:
        return header_size(len(spec.shape)) + self.inner.max_encoded_size

    def _pipeline_of(self, shape: tuple[int, ...], spec: ArraySpec) -> NestedPipeline:
        """The nested chain for a block of `shape` (an edge block stored truncated)."""
        pipeline = self._by_shape.get(shape)
        if pipeline is None:
            if len(self._by_shape) >= _SHAPES_KEPT:
                self._by_shape = {self.chunk_shape: self.inner}
            pipeline = self._by_shape[shape] = self._build(self.codecs, spec.with_shape(shape))
        return pipeline

    def read_header(self, data: BytesLike, spec: ArraySpec) -> tuple[int, ...]:
        """The block's shape from its header, checked against the chunk's: a block may be
        smaller (N5 writers store edge blocks truncated) but never holds more elements."""
        view = bytes_view(data).cast("B")
        ndim = len(spec.shape)
        if len(view) < 4:
            raise ChunkDecodeError(f"N5 block of {len(view)} bytes is shorter than its header")
        mode, stored_ndim = struct.unpack_from(">HH", view)
        if mode != _DEFAULT_MODE:
            kind = {1: "varlength", 2: "object"}.get(mode, "unknown")
            raise ChunkDecodeError(f"N5 block in {kind} mode ({mode}); n5_default reads default mode (0) only")
        if stored_ndim != ndim:
            raise ChunkDecodeError(f"N5 block header has {stored_ndim} dimensions, the array {ndim}")
        if len(view) < header_size(ndim):
            raise ChunkDecodeError(f"N5 block of {len(view)} bytes is shorter than its header")
        shape = struct.unpack_from(f">{ndim}I", view, 4)
        if math.prod(shape) > math.prod(spec.shape):
            raise ChunkTooLargeError(
                f"N5 block header gives a block of shape {list(shape)}, more elements than a chunk of {list(spec.shape)}"
            )
        return shape

    def decode(self, data: BytesLike, spec: ArraySpec) -> np.ndarray:
        shape = self.read_header(data, spec)
        body = bytes_view(data).cast("B")[header_size(len(shape)) :]
        block = self._pipeline_of(shape, spec).decode(body)
        if shape == spec.shape:
            return block
        # a truncated edge block: the rest of the chunk is the fill value (and a block
        # larger along some dimension is cut to the chunk, as the registry says)
        out = fill_array(spec.shape, spec.dtype, spec.fill_value)
        common = tuple(slice(0, min(a, b)) for a, b in zip(shape, spec.shape))
        out[common] = block[common]
        return out

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> bytes:
        # whole blocks, as tensorstore writes them: N5 readers take either
        header = struct.pack(f">HH{len(spec.shape)}I", _DEFAULT_MODE, len(spec.shape), *spec.shape)
        body = self.inner.encode(chunk)
        assert body is not None  # bind() checked the chain's serializer is `bytes`, which always stores
        return header + body
