"""The write pipeline of an array, the mirror of reads.py: whole chunks (finest grid)
encoded on the codec pool and stored on the I/O stage as each is encoded; the inner
chunks of a shard merged into what the shard holds (read whole, rebuilt, stored whole).
A chunk that is all fill value, or None, is erased rather than stored. Callers
serialize writes of one array themselves (array.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..store import Store
from .context import IOContext, on_codec_thread
from .errors import InvalidWriteError
from .fill_values import is_fill
from .reads import get_bounded

if TYPE_CHECKING:
    from .chunk_grid import ChunkGrid
    from .codecs import CodecPipeline, V2Pipeline
    from .codecs.array_to_bytes.sharding import ShardingCodec
    from .codecs.base import NestedPipeline
    from .dtypes import DataType

Chunks = Mapping[tuple[int, ...], np.ndarray | None]


class Array(Protocol):
    """What a write needs of its array (array.py's Array, which starts writes)."""

    path: str
    store: Store
    context: IOContext
    chunk_grid: ChunkGrid

    @property
    def pipeline(self) -> CodecPipeline | V2Pipeline: ...
    @property
    def sharding(self) -> ShardingCodec | None: ...
    @property
    def dtype(self) -> DataType: ...
    @property
    def fill_value(self) -> Any: ...

    def stored_key(self, stored_coords: tuple[int, ...]) -> str: ...
    def chunk_shape_of(self, coords: tuple[int, ...]) -> tuple[int, ...]: ...
    def pipeline_of(self, stored_coords: tuple[int, ...]) -> CodecPipeline | V2Pipeline: ...
    def sharding_of(self, shard: tuple[int, ...]) -> ShardingCodec: ...
    def shard_of(self, coords: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]: ...


def write_chunks(array: Array, chunks: Chunks) -> None:
    """Store whole chunks of `array` (finest grid), then forget what the caches hold of
    them."""
    for coords, chunk in chunks.items():
        if not array.chunk_grid.contains(coords):
            raise InvalidWriteError(f"chunk {coords} is outside the grid {array.chunk_grid.grid_shape}")
        if chunk is not None and chunk.shape != array.chunk_shape_of(coords):
            raise InvalidWriteError(f"chunk {coords} has shape {chunk.shape}, expected {array.chunk_shape_of(coords)}")
    context = array.context
    if array.sharding:
        indexes = context.shard_indexes
        if indexes is not None:  # readers of these shards' bytes by their index read them again
            indexes.begin_write(array.path)
        try:
            _write_sharded(array, chunks)
        finally:
            if indexes is not None:
                indexes.end_write(array.path)
    else:
        _write_plain(array, chunks)
    shards = {array.shard_of(c)[0] for c in chunks} if array.sharding else None
    context.invalidate(array.path, chunks.keys(), shards)
    if context.unanswered is not None:  # the store has answered for them now
        context.unanswered.forget(array.stored_key(c) for c in (chunks if shards is None else shards))


def _encode_or_none(
    array: Array, pipeline: CodecPipeline | V2Pipeline | NestedPipeline, chunk: np.ndarray | None
) -> bytes | None:
    if chunk is None or is_fill(chunk, array.fill_value, array.dtype):
        return None
    return pipeline.encode(chunk)


def _write_plain(array: Array, chunks: Chunks) -> None:
    """Each chunk is encoded on the codec pool and handed to the I/O stage as soon as it
    is, so that storing the first chunks overlaps encoding the rest."""
    items = list(chunks.items())
    context, store = array.context, array.store

    def encode(item: tuple[tuple[int, ...], np.ndarray | None]) -> bytes | None:
        return _encode_or_none(array, array.pipeline_of(item[0]), item[1])

    if context.executor is None or context.io_executor is None or len(items) < 2 or on_codec_thread():
        encoded = context.map(encode, items)
        to_set = {array.stored_key(c): e for (c, _), e in zip(items, encoded) if e is not None}
        if to_set:
            store.set_values(to_set)
            context.stats.add("bytes_stored", sum(len(v) for v in to_set.values()))
        if len(to_set) < len(items):
            store.erase_values([array.stored_key(c) for (c, _), e in zip(items, encoded) if e is None])
        return
    stores: list[Future[None]] = []
    try:
        for (coords, _), value in zip(items, context.executor.map(encode, items)):
            stores.append(context.io_executor.submit(_store_chunk, array, array.stored_key(coords), value))
    finally:
        wait(stores)  # none is left running behind a failure
    for stored in stores:
        stored.result()  # the first failure is the one reported


def _store_chunk(array: Array, key: str, value: bytes | None) -> None:
    """Store one encoded chunk (None: erase it)."""
    if value is None:
        array.store.erase_values([key])
        return
    array.store.set_values({key: value})
    array.context.stats.add("bytes_stored", len(value))


def _write_sharded(array: Array, chunks: Chunks) -> None:
    by_shard: dict[tuple[int, ...], dict[tuple[int, ...], np.ndarray | None]] = defaultdict(dict)
    for coords, chunk in chunks.items():
        shard, inner = array.shard_of(coords)
        by_shard[shard][inner] = chunk
    shards = sorted(by_shard)
    store = array.store
    existing = get_bounded(store, [(array.stored_key(s), None) for s in shards], array.pipeline.max_encoded_size)

    def rebuild(args: tuple[tuple[int, ...], bytes | memoryview | None]) -> bytes | None:
        shard, raw = args
        sharding = array.sharding_of(shard)
        parts: dict[tuple[int, ...], bytes | None] = {} if raw is None else dict(sharding.stored_inner(raw))
        for inner, chunk in by_shard[shard].items():
            parts[inner] = _encode_or_none(array, sharding.inner, chunk)
        return sharding.assemble(parts)

    rebuilt = array.context.map(rebuild, list(zip(shards, existing)))
    to_set = {array.stored_key(s): b for s, b in zip(shards, rebuilt) if b is not None}
    to_erase = [array.stored_key(s) for s, b in zip(shards, rebuilt) if b is None]
    if to_set:
        store.set_values(to_set)
        array.context.stats.add("bytes_stored", sum(len(v) for v in to_set.values()))
    if to_erase:
        store.erase_values(to_erase)
