"""`sharding_indexed`: many inner chunks in one stored object, with an index of
(offset, nbytes) pairs at its start or end. Inner chunks can be read alone by byte range."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ....store import ByteRange
from ...dtypes import DataType
from ...errors import ChunkDecodeError, ChunkTooLargeError, MetadataError
from ...fill_values import fill_array, is_fill
from ..base import ArrayBytesCodec, ArraySpec, BytesLike, NestedPipeline, bytes_view
from .bytes import BytesCodec

EMPTY = np.uint64(2**64 - 1)
_INDEX_TYPE = DataType("uint64", np.dtype("<u8"))
_DEFAULT_INDEX_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
# Every read of a shard reads its whole index: 2**24 inner chunks (256 MiB) is past any use.
_MAX_INDEX_ENTRIES = 1 << 24
# inner chunks this close together are fetched with one ranged read (the gap read too)
_COALESCE_GAP = 64 << 10


@dataclass
class ShardRead:
    """One ranged read of a shard, bytes [start, end), and the inner chunks it fetches:
    (position among those wanted, start, end)."""

    start: int
    end: int
    members: list[tuple[int, int, int]]


class ShardingCodec(ArrayBytesCodec):
    name = "sharding_indexed"
    # the inner chunks' chain and the index's: bind() makes them, before any other use
    inner: NestedPipeline
    index: NestedPipeline

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        c = self.configuration
        shape = c.get("chunk_shape")
        if not isinstance(shape, list) or not all(isinstance(n, int) and n > 0 for n in shape):
            raise MetadataError(f"sharding chunk_shape must be a list of positive integers, got {shape!r}")
        self.inner_shape = tuple(shape)
        self.index_location = c.get("index_location", "end")
        if self.index_location not in ("start", "end"):
            raise MetadataError(f"sharding index_location must be 'start' or 'end', got {self.index_location!r}")
        if not isinstance(c.get("codecs"), list):
            raise MetadataError("sharding codecs must be a list")
        if not isinstance(c.get("index_codecs", []), list):
            raise MetadataError("sharding index_codecs must be a list")

    def bind(self, spec: ArraySpec, build_pipeline: Callable[[list[Any], ArraySpec], NestedPipeline]) -> None:
        """Build the inner and index pipelines for shards of `spec` (with the builder of
        the pipeline this codec stands in, which its own configuration nests)."""
        if len(self.inner_shape) != len(spec.shape) or any(s % n for s, n in zip(spec.shape, self.inner_shape)):
            raise MetadataError(
                f"sharding inner chunk shape {self.inner_shape} must divide the shard shape {spec.shape}"
            )
        self.shard_shape = spec.shape
        self.chunks_per_shard = tuple(s // n for s, n in zip(spec.shape, self.inner_shape))
        if math.prod(self.chunks_per_shard) > _MAX_INDEX_ENTRIES:
            raise MetadataError(
                f"shards of {math.prod(self.chunks_per_shard)} inner chunks: the index would "
                f"be larger than {_MAX_INDEX_ENTRIES * 16} bytes"
            )
        self.inner = build_pipeline(self.configuration["codecs"], spec.with_shape(self.inner_shape))
        index_spec = ArraySpec((*self.chunks_per_shard, 2), _INDEX_TYPE, EMPTY)
        self.index = build_pipeline(self.configuration.get("index_codecs", _DEFAULT_INDEX_CODECS), index_spec)
        self.index_size = self._index_size(index_spec)

    def prepare(self) -> None:
        self.inner.prepare()
        self.index.prepare()

    def _index_size(self, index_spec: ArraySpec) -> int:
        """Encoded size of the index: from the codecs' fixed sizes where they have them,
        so that opening an array allocates no index."""
        size: int | None = math.prod(index_spec.shape) * 8
        if not isinstance(self.index.array_bytes, BytesCodec):
            size = None
        for codec in self.index.bytes_bytes:
            if size is None:
                break
            size = codec.encoded_size(size)
        if size is not None:
            return size
        encoded = self.index.encode(np.full(index_spec.shape, EMPTY, dtype="<u8"))
        if encoded is None:  # a sharding codec among them: it stores no index of empty entries
            raise MetadataError("sharding index_codecs must encode an index of empty entries")
        return len(encoded)

    def max_encoded_size(self, spec: ArraySpec) -> int:
        return self.index_size + self.inner_chunk_count * self.inner.max_encoded_size

    def decode_index(self, raw: bytes, shard_size: int | None = None) -> np.ndarray:
        """The (offset, nbytes) table, shape chunks_per_shard + (2,)."""
        if len(raw) != self.index_size:
            raise ChunkDecodeError(f"shard index is {len(raw)} bytes, expected {self.index_size}")
        index = np.asarray(self.index.decode(raw), dtype="<u8")
        if shard_size is not None:
            used = index[..., 0] != EMPTY
            ends = index[..., 0][used] + index[..., 1][used]
            if ends.size and int(ends.max()) > shard_size:
                raise ChunkDecodeError("shard index points past the end of the shard")
        return index

    def split_index(self, shard: BytesLike, check_ends: bool = True) -> tuple[np.ndarray, memoryview]:
        """Index of a whole stored shard, and the shard's bytes (offsets index into them).
        With `check_ends` False an entry may point past the end (its reader finds out)."""
        if len(shard) < self.index_size:
            raise ChunkDecodeError(f"shard of {len(shard)} bytes is shorter than its index")
        view = bytes_view(shard)
        raw = view[: self.index_size] if self.index_location == "start" else view[len(shard) - self.index_size :]
        return self.decode_index(bytes(raw), len(shard) if check_ends else None), view

    @staticmethod
    def entry(index: np.ndarray, inner: tuple[int, ...]) -> tuple[int, int] | None:
        """Where inner chunk `inner` lies in its shard, (offset, nbytes); None where the
        index marks it empty (not stored)."""
        offset, nbytes = index[inner]
        return None if offset == EMPTY else (int(offset), int(nbytes))

    def stored_inner(self, shard: BytesLike) -> dict[tuple[int, ...], bytes]:
        """The encoded inner chunks a whole stored shard holds, by inner coords (those its
        index marks empty left out)."""
        index, view = self.split_index(shard)
        out = {}
        for inner, _ in self.inner_regions():
            entry = self.entry(index, inner)
            if entry is not None:
                out[inner] = bytes(view[entry[0] : entry[0] + entry[1]])
        return out

    def shard_of(self, coords: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(shard coords, inner coords within it) of inner chunk `coords`."""
        cps = self.chunks_per_shard
        return tuple(c // n for c, n in zip(coords, cps)), tuple(c % n for c, n in zip(coords, cps))

    @property
    def index_range(self) -> ByteRange:
        """Where the index lies in a shard of unknown size."""
        return (
            ByteRange.span(0, self.index_size) if self.index_location == "start" else ByteRange.suffix(self.index_size)
        )

    def plan_reads(
        self, index: np.ndarray, inners: list[tuple[int, ...]], shard_key: str, max_request: int
    ) -> tuple[list[ShardRead], list[int]]:
        """The ranged reads that fetch inner chunks `inners` of a shard with this `index`,
        and the positions in `inners` of those not stored. Chunks that lie close together
        share one read, as tensorstore coalesces them: a read spans the gaps between its
        chunks when they are small beside what it fetches, up to `max_request` bytes. An
        index that gives an inner chunk more bytes than it can need is refused here."""
        limit = self.inner.max_encoded_size
        empty, located = [], []
        for position, inner in enumerate(inners):
            entry = self.entry(index, inner)
            if entry is None:
                empty.append(position)
                continue
            offset, nbytes = entry
            if nbytes > limit:
                raise ChunkTooLargeError(
                    f"{shard_key}: shard index gives inner chunk {inner} {nbytes} "
                    f"bytes, more than the {limit} it can need"
                )
            located.append((offset, offset + nbytes, position))
        located.sort()
        reads: list[ShardRead] = []
        for start, end, position in located:
            last = reads[-1] if reads else None
            if (
                last is not None
                and start >= last.start
                and end - last.start <= max(max_request, limit)
                and start - last.end <= max(_COALESCE_GAP, (last.end - last.start) // 4)
            ):
                last.end = max(last.end, end)
                last.members.append((position, start, end))
            else:
                reads.append(ShardRead(start, end, [(position, start, end)]))
        return reads, empty

    def whole_shard_pays(self, wanted: int) -> bool:
        """Whether reading a whole shard beats reading its index, then `wanted` inner
        chunks of it: when at least half of them are wanted."""
        return 2 * wanted >= self.inner_chunk_count

    def inner_regions(self) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
        for coords in np.ndindex(*self.chunks_per_shard):
            yield coords, tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, self.inner_shape))

    def decode(self, data: BytesLike, spec: ArraySpec) -> np.ndarray:
        index, view = self.split_index(data)
        out = fill_array(spec.shape, spec.dtype, spec.fill_value)
        for coords, region in self.inner_regions():
            entry = self.entry(index, coords)
            if entry is not None:
                offset, nbytes = entry
                out[region] = self.inner.decode(bytes(view[offset : offset + nbytes]))
        return out

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> bytes | None:
        parts: dict[tuple[int, ...], bytes | None] = {}
        for coords, region in self.inner_regions():
            sub = chunk[region]
            if not is_fill(sub, spec.fill_value, spec.dtype):
                parts[coords] = self.inner.encode(sub)
        return self.assemble(parts)

    def assemble(self, parts: dict[tuple[int, ...], bytes | None]) -> bytes | None:
        """A shard from encoded inner chunks (None or absent: empty). None when all are empty."""
        present = [(c, b) for c, b in sorted(parts.items()) if b is not None]
        if not present:
            return None
        index = np.full((*self.chunks_per_shard, 2), EMPTY, dtype="<u8")
        offset = self.index_size if self.index_location == "start" else 0
        for coords, encoded in present:
            index[coords] = (offset, len(encoded))
            offset += len(encoded)
        body = b"".join(b for _, b in present)
        raw_index = self.index.encode(index)
        assert raw_index is not None  # _index_size refused index codecs that store nothing
        return raw_index + body if self.index_location == "start" else body + raw_index

    @property
    def inner_chunk_count(self) -> int:
        return math.prod(self.chunks_per_shard)
