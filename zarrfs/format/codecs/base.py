"""What every codec is: the spec's three kinds (array→array, array→bytes, bytes→bytes),
each with encode and decode, and the array spec a codec sees at its place in the chain."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from ..dtypes import DataType
from ..errors import ChunkTooLargeError
from .bytes_to_bytes import limits

# What decoding hands from step to step: the stored bytes, a view of part of them (a
# shard's inner chunk, the body before a checksum) or the byte array a compressor wrote.
BytesLike = bytes | memoryview | np.ndarray


def bytes_view(data: BytesLike) -> memoryview:
    """A memoryview of `data`'s buffer (no copy)."""
    # numpy's stubs give ndarray the buffer protocol (__buffer__) only from Python 3.12 on
    return memoryview(data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ArraySpec:
    """The shape and type of the array a codec receives when encoding."""

    shape: tuple[int, ...]
    dtype: DataType
    fill_value: Any

    def with_shape(self, shape: tuple[int, ...]) -> ArraySpec:
        return replace(self, shape=shape)


class Codec:
    name: str  # a class attribute, but per instance for the numcodecs.* wrappers
    configuration: dict[str, Any]

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        self.configuration = dict(configuration or {})

    def prepare(self) -> None:
        """Make what decoding needs that is made on first use (a library imported): a
        read does it on the codec pool while its first fetch is in flight."""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": self.configuration}

    def __repr__(self) -> str:
        return f"{self.name}({self.configuration})" if self.configuration else self.name


class ArrayArrayCodec(Codec):
    def resolve(self, spec: ArraySpec) -> ArraySpec:
        """The spec of the array this codec hands on when encoding `spec`."""
        return spec

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        raise NotImplementedError

    def decode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        """`spec` is the one this codec received when encoding (its input side)."""
        raise NotImplementedError


class NestedPipeline(Protocol):
    """A codec chain nested in a codec's configuration (sharding's inner and index chains,
    n5_default's): pipeline.py builds it and hands its builder to ArrayBytesCodec.bind."""

    max_encoded_size: int  # the most bytes a stored chunk of it can need
    array_array: list[tuple[ArrayArrayCodec, ArraySpec]]
    array_bytes: ArrayBytesCodec
    bytes_bytes: list[BytesBytesCodec]

    def decode(self, data: BytesLike) -> np.ndarray: ...

    def encode(self, chunk: np.ndarray) -> bytes | None: ...

    def prepare(self) -> None: ...


class ArrayBytesCodec(Codec):
    def bind(self, spec: ArraySpec, build_pipeline: Callable[[list[Any], ArraySpec], NestedPipeline]) -> None:
        """Check the codec against the chunks of `spec` it encodes; a codec that nests a
        chain of its own (sharding, n5_default) builds it here with `build_pipeline`."""

    def max_encoded_size(self, spec: ArraySpec) -> int | None:
        """The most bytes a chunk of `spec` encodes to; None when the metadata does not
        fix it (variable-length data)."""
        return None

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> bytes | None:
        """The stored bytes; None when there is nothing to store (a shard of fill values)."""
        raise NotImplementedError

    def decode(self, data: BytesLike, spec: ArraySpec) -> np.ndarray:
        raise NotImplementedError


class BytesBytesCodec(Codec):
    def encode(self, data: bytes) -> bytes:
        raise NotImplementedError

    def decode(self, data: BytesLike) -> BytesLike:
        raise NotImplementedError

    def encoded_size(self, size: int) -> int | None:
        """Encoded length for an input of `size` bytes, when it is fixed."""
        return None

    def max_encoded_size(self, size: int) -> int:
        """The most bytes an input of `size` bytes can encode to (a generous bound)."""
        return limits.max_encoded_size(self.name.removeprefix("numcodecs."), size)

    @property
    def decodes_into(self) -> bool:
        """Whether decode_into can write into a buffer it is given."""
        return False

    def decode_into(self, data: BytesLike, out: np.ndarray) -> np.ndarray | None:
        """decode() written into `out` (a byte buffer) when `data` says it decodes to exactly
        its size (and this codec can write into a buffer it is given); else None."""
        return None

    def decode_at_most(self, data: BytesLike, limit: int) -> BytesLike:
        """decode(), refusing with ChunkTooLargeError a result longer than `limit` bytes.
        Compressors override this to stop before they allocate past the limit."""
        out = self.decode(data)
        if bytes_view(out).nbytes > limit:
            raise ChunkTooLargeError(f"{self.name}: decodes to more than the {limit} bytes expected of this chunk")
        return out
