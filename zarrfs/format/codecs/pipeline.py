"""A chunk's codec chain: array→array codecs, one array→bytes codec, bytes→bytes codecs,
bound to the chunk's spec. `V2Pipeline` is the same for Zarr v2's filters + compressor.

Each knows the most bytes a stored chunk can take (`max_encoded_size`), and decodes each
step with a limit of what that step's input was when encoding, so that nothing decodes
past the chunk's decoded size (docs/errors.md, Bounded memory)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from ..errors import ChunkDecodeError, ChunkTooLargeError, MetadataError
from .array_to_bytes.bytes import BytesCodec
from .array_to_bytes.sharding import ShardingCodec
from .array_to_bytes.vlen import check_count
from .base import ArrayArrayCodec, ArrayBytesCodec, ArraySpec, BytesBytesCodec, BytesLike, Codec, bytes_view
from .bytes_to_bytes import limits
from .registry import build_codec

if TYPE_CHECKING:
    from collections.abc import Callable

    import numcodecs


class CodecPipeline:
    """Decodes stored bytes to a chunk of `spec.shape` and encodes it back."""

    def __init__(self, codecs: list[Codec], spec: ArraySpec) -> None:
        self.codecs = codecs
        self.spec = spec
        self.prepared = False  # whether a read has asked for prepare()
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
        array_bytes.bind(spec, build_pipeline)
        self.array_bytes = array_bytes
        self.bytes_spec = spec
        # limits[i]: the most bytes bytes_bytes[i] can have been given when encoding
        size = array_bytes.max_encoded_size(spec)
        self._limits = []
        for codec in self.bytes_bytes:
            self._limits.append(limits.VARIABLE_LENGTH_LIMIT if size is None else size)
            size = None if size is None else codec.max_encoded_size(size)
        self.max_encoded_size = limits.VARIABLE_LENGTH_LIMIT if size is None else size

    def prepare(self) -> None:
        """Make what decoding needs that its codecs make on first use (Codec.prepare)."""
        for codec in (*(c for c, _ in self.array_array), self.array_bytes, *self.bytes_bytes):
            codec.prepare()

    @property
    def sharding(self) -> ShardingCodec | None:
        """The sharding codec when inner chunks can be read on their own by byte range."""
        if isinstance(self.array_bytes, ShardingCodec) and not self.array_array and not self.bytes_bytes:
            return self.array_bytes
        return None

    @property
    def decoded_size(self) -> int | None:
        """How many bytes a chunk decompresses to, where `decode` can decompress it into a
        buffer it is given (`out`): elements of fixed size, no array-to-array codec, one
        compressor whose data declares its size. None elsewhere."""
        if len(self.bytes_bytes) != 1 or self.array_array or not isinstance(self.array_bytes, BytesCodec):
            return None
        if not self.bytes_bytes[0].decodes_into or self.bytes_spec.dtype.variable_length:
            return None
        return self.array_bytes.max_encoded_size(self.bytes_spec)

    def decode(self, data: BytesLike, out: np.ndarray | None = None) -> np.ndarray:
        """The chunk; with `out` (`decoded_size` bytes), decompressed into it where the
        stored bytes declare that size (else as without it)."""
        _check_stored_size(data, self.max_encoded_size)
        if out is not None and self.bytes_bytes[0].decode_into(data, out) is not None:
            return self.array_bytes.decode(out, self.bytes_spec)
        for codec, limit in zip(reversed(self.bytes_bytes), reversed(self._limits)):
            data = codec.decode_at_most(data, limit)
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


def build_pipeline(documents: list[Any], spec: ArraySpec) -> CodecPipeline:
    """The chain of codec `documents` bound to `spec`: one made already for the same
    documents and spec where there is one (see _made)."""
    return _shared(
        _made_key(documents, spec), CodecPipeline, lambda: CodecPipeline([build_codec(d) for d in documents], spec)
    )


def v2_pipeline(filters: tuple[Any, ...], compressor: dict[str, Any] | None, spec: ArraySpec, order: str) -> V2Pipeline:
    """As build_pipeline, for Zarr v2's filters and compressor."""
    return _shared(
        _made_key((filters, compressor, order), spec), V2Pipeline, lambda: V2Pipeline(filters, compressor, spec, order)
    )


# Chains made, by what they were made of. A chain holds nothing of one array's (its codecs
# are shared by the threads reading the array already), and the arrays of a hierarchy
# mostly share their codecs, chunk shape, type and fill value: opening thousands of them
# (a listing of groups from consolidated metadata) makes one chain, not one each.
_made: dict[tuple[Any, ...], CodecPipeline | V2Pipeline] = {}
_MADE_KEPT = 256  # (all forgotten past this many, and made again as met)
_Chain = TypeVar("_Chain", "CodecPipeline", "V2Pipeline")


def _made_key(documents: object, spec: ArraySpec) -> tuple[Any, ...] | None:
    """What a chain is made of, or None where a chain is not kept: types with a
    configuration or fields (which DataType's equality leaves out). The documents are
    JSON values, which their repr tells apart (1, 1.0, True)."""
    dtype, fill = spec.dtype, spec.fill_value
    if dtype.document is not None or dtype.fields:
        return None
    return (repr(documents), spec.shape, dtype, type(fill), repr(fill))


def _shared(key: tuple[Any, ...] | None, kind: type[_Chain], make: Callable[[], _Chain]) -> _Chain:
    """The chain of `kind` kept under `key`, else one made (and kept, where `key` is not None)."""
    made = _made.get(key) if key is not None else None
    if isinstance(made, kind):
        return made
    chain = make()
    if key is not None:
        if len(_made) >= _MADE_KEPT:
            _made.clear()
        _made[key] = chain
    return chain


def _v2_filter_bound(codec: numcodecs.abc.Codec, size: int) -> int | None:
    """The most bytes a v2 filter turns `size` bytes into: filters that convert the data
    type (delta, fixedscaleoffset, quantize, astype) grow it by the ratio of item sizes."""
    # numpy dtypes are falsy (they have no fields), hence no `or` here
    encoded = getattr(codec, "astype", getattr(codec, "encode_dtype", None))
    decoded = getattr(codec, "dtype", getattr(codec, "decode_dtype", None))
    if encoded is not None and decoded is not None:
        try:
            ratio: float = np.dtype(encoded).itemsize / max(1, np.dtype(decoded).itemsize)
        except TypeError:
            return None
        return math.ceil(size * max(1.0, ratio)) + 64
    return limits.max_encoded_size(codec.codec_id, size)


def _check_stored_size(data: BytesLike, limit: int) -> None:
    size = bytes_view(data).nbytes
    if size > limit:
        raise ChunkTooLargeError(
            f"stored chunk of {size} bytes is larger than the {limit} expected of this chunk at most"
        )


class V2Pipeline:
    """Zarr v2: numcodecs filters then a compressor, elements in C or F order."""

    def __init__(
        self, filters: tuple[Any, ...], compressor: dict[str, Any] | None, spec: ArraySpec, order: str
    ) -> None:
        from .numcodecs_adapter import numcodecs_codec

        self.spec = spec
        self.order: Literal["C", "F"] = "F" if order == "F" else "C"  # the two metadata.py allows
        self.prepared = False
        self.filters = [numcodecs_codec(f["id"], {k: v for k, v in f.items() if k != "id"}) for f in filters]
        self.compressor = (
            numcodecs_codec(compressor["id"], {k: v for k, v in compressor.items() if k != "id"})
            if compressor
            else None
        )
        self.sharding = None
        # the most bytes the filters hand the compressor, then the compressor stores
        size = None if spec.dtype.variable_length else math.prod(spec.shape) * spec.dtype.itemsize
        for f in self.filters:
            size = None if size is None else _v2_filter_bound(f, size)
        self._compressor_limit = limits.VARIABLE_LENGTH_LIMIT if size is None else size
        if size is not None and self.compressor:
            size = limits.max_encoded_size(self.compressor.codec_id, size)
        self.max_encoded_size = limits.VARIABLE_LENGTH_LIMIT if size is None else size

    @property
    def decoded_size(self) -> int | None:
        """As CodecPipeline's: elements of fixed size, no filters, a compressor whose data
        declares its size."""
        if self.compressor is None or self.filters or self.spec.dtype.variable_length:
            return None
        if not limits.declares_size(self.compressor.codec_id):
            return None
        return self._compressor_limit

    def decode(self, data: BytesLike, out: np.ndarray | None = None) -> np.ndarray:
        """As CodecPipeline's (`out` only where `decoded_size` is not None)."""
        _check_stored_size(data, self.max_encoded_size)
        try:
            compressor = self.compressor
            if compressor is None:
                out = data  # and no `out` was given: decoded_size is None
            elif out is None or limits.decode_into(compressor, data, out, compressor.codec_id) is None:
                out = limits.decode_at_most(compressor, data, self._compressor_limit, compressor.codec_id)
            for f in reversed(self.filters):
                if f.codec_id in ("vlen-utf8", "vlen-bytes"):
                    check_count(out, math.prod(self.spec.shape), f.codec_id)
                out = f.decode(out)
        except ChunkDecodeError:
            raise
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
        if isinstance(out, np.ndarray):  # tobytes: datetime64/timedelta64 arrays export no buffer
            return out.tobytes()
        return out if isinstance(out, bytes) else bytes(out)

    def prepare(self) -> None:
        """Nothing: numcodecs made its codecs when the array was opened."""

    def describe(self) -> str:
        parts = [str(f.get_config()) for f in self.filters]
        if self.compressor:
            parts.append(str(self.compressor.get_config()))
        return " -> ".join(parts) or "none"
