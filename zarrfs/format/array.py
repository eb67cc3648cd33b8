"""An array's chunks in a store: region reads and writes that touch only the chunks they
need, with inner chunks of shards fetched by byte range (the read pipeline is reads.py).

Chunk coordinates here are those of the *finest* grid: the inner chunks of a sharded
array, the chunks of any other. That grid is what the `chunks/` view shows. Under a
rectilinear grid chunks differ in shape, and each shape has its own codec chain (the
inner chunks of rectilinear shards are regular: the shards' sizes are multiples of them).

An Array reads and writes what is stored and holds no state of its own beyond its
metadata (and the layout of its bands, bands.py, made from it once): writers of one array serialize their writes themselves (the decoded tree's
pending writes do)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from ..store import Store, StoreUnavailableError
from ..store.keys import join_path
from .bands import BandLayout, band_layout
from .chunk_grid import ChunkGrid, RectilinearChunkGrid, RegularChunkGrid, normalize_selection
from .codecs import ArraySpec, CodecPipeline, V2Pipeline, build_pipeline, v2_pipeline
from .context import IOContext
from .errors import InvalidWriteError, MetadataError
from .fill_values import constant_array, fill_array
from .metadata import ArrayMetadata, is_metadata_key
from .reads import ChunkConsumer, ChunkRead, get_bounded, wait_for_chunks
from .writes import write_chunks

if TYPE_CHECKING:
    from .codecs.array_to_bytes.sharding import ShardingCodec
    from .dtypes import DataType

Pipeline = CodecPipeline | V2Pipeline

# decode at most this much at once when reading a large region
_READ_BATCH_BYTES = 256 << 20
# codec chains kept per chunk shape of a rectilinear grid (made again past this many)
_PIPELINES_KEPT = 1024


class Array:
    def __init__(self, store: Store, path: str, metadata: ArrayMetadata, context: IOContext | None = None) -> None:
        self.store = store
        self.path = path
        self.metadata = metadata
        self.context = context or IOContext()
        self.documents: Mapping[str, bytes] = {}  # metadata documents as stored, by name
        m = metadata
        spec = ArraySpec(m.chunk_shape, m.dtype, m.fill_value)
        self.pipeline: Pipeline
        if m.zarr_format == 2:
            self.pipeline = v2_pipeline(m.filters, m.compressor, spec, m.order)
        else:
            self.pipeline = build_pipeline(list(m.codecs), spec)
        self.sharding = self.pipeline.sharding
        # the grid of stored objects (shards for sharded arrays)
        self.stored_grid: ChunkGrid = (
            RegularChunkGrid(m.shape, m.chunk_shape)
            if m.chunk_runs is None
            else RectilinearChunkGrid.of(m.shape, m.chunk_runs)
        )
        self.chunk_grid: ChunkGrid = (
            RegularChunkGrid(m.shape, self.sharding.inner_shape) if self.sharding else self.stored_grid
        )
        # the chains of a rectilinear grid's chunk shapes, made as chunks of each are met
        # (`pipeline` is that of the largest, which bounds them all)
        self._pipelines: dict[tuple[int, ...], Pipeline] = {m.chunk_shape: self.pipeline}
        self._bands: BandLayout | bool | None = False  # False: not made yet (see `bands`)
        self.renew()
        if self.sharding and not self.stored_grid.regular:
            for d, (edges, n) in enumerate(zip(self.stored_grid.edges, self.sharding.inner_shape)):
                if any(size % n for size in edges.sizes):
                    raise MetadataError(
                        f"shard sizes {edges.json()} of dimension {d} are not all multiples of the inner chunk size {n}"
                    )

    def renew(self) -> None:
        """The array is its node now: what it decodes is cached from here on. (Taken as it
        is opened, after its metadata is read; the caches keep nothing it decodes once its
        node is invalidated, which the node opened in its place may not share.)"""
        cache, indexes = self.context.cache, self.context.shard_indexes
        self.born = cache.node_generation(self.path) if cache is not None else None
        self.index_born = indexes.node_generation(self.path) if indexes is not None else None

    def current(self) -> bool:
        """Whether no node invalidation reached it since it was opened (renewed)."""
        cache, indexes = self.context.cache, self.context.shard_indexes
        return (cache is None or cache.node_generation(self.path) == self.born) and (
            indexes is None or indexes.node_generation(self.path) == self.index_born
        )

    def cache_generation(self) -> int | None:
        """The decoded-chunk cache's generation for what this array decodes (ChunkCache.
        generation: -1 once its node was invalidated); None without a cache."""
        cache = self.context.cache
        return cache.generation(self.path, self.born) if cache is not None else None

    def index_generation(self) -> int | None:
        """As cache_generation, for the shard index cache."""
        indexes = self.context.shard_indexes
        return indexes.generation(self.path, self.index_born) if indexes is not None else None

    # ------------------------------------------------------------------ facts
    @property
    def shape(self) -> tuple[int, ...]:
        return self.metadata.shape

    @property
    def dtype(self) -> DataType:
        return self.metadata.dtype

    @property
    def fill_value(self) -> Any:
        return self.metadata.fill_value

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        return self.chunk_grid.chunk_shape

    def stored_key(self, stored_coords: tuple[int, ...]) -> str:
        return join_path(self.path, self.metadata.chunk_key_encoding.chunk_key(stored_coords))

    def chunk_shape_of(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        """The full shape of one chunk of the finest grid (`chunk_shape` but for chunks of
        a rectilinear grid)."""
        return self.chunk_grid.chunk_shape_of(coords)

    def pipeline_of(self, stored_coords: tuple[int, ...]) -> Pipeline:
        """The codec chain of one stored chunk (or shard)."""
        if self.stored_grid.regular:
            return self.pipeline
        shape = self.stored_grid.chunk_shape_of(stored_coords)
        pipeline = self._pipelines.get(shape)
        if pipeline is None:
            if len(self._pipelines) >= _PIPELINES_KEPT:
                self._pipelines = {self.metadata.chunk_shape: self.pipeline}
            spec = ArraySpec(shape, self.dtype, self.fill_value)
            pipeline = self._pipelines[shape] = build_pipeline(list(self.metadata.codecs), spec)
        return pipeline

    def sharding_of(self, shard: tuple[int, ...]) -> ShardingCodec:
        """The sharding codec of one shard (its index has an entry per inner chunk)."""
        sharding = self.sharding if self.stored_grid.regular else self.pipeline_of(shard).sharding
        assert sharding is not None, "only a sharded array has shards"
        return sharding

    def shard_of(self, coords: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(shard coords, inner coords within it) of inner chunk `coords`."""
        sharding = self.sharding
        assert sharding is not None, "only a sharded array has shards"
        if self.stored_grid.regular:
            return sharding.shard_of(coords)
        shard, inner = [], []
        for c, n, edges in zip(coords, sharding.inner_shape, self.stored_grid.edges):
            s = edges.chunk_at(c * n)
            shard.append(s)
            inner.append(c - edges.span(s)[0] // n)
        return tuple(shard), tuple(inner)

    def fill_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """A new chunk of the fill value, to write into."""
        return fill_array(self.chunk_shape_of(coords), self.dtype, self.fill_value)

    def absent_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """A chunk that is not stored, as read: the fill value, read-only, in the memory of
        one element (fill_values.constant_array)."""
        return constant_array(self.chunk_shape_of(coords), self.dtype, self.fill_value)

    @property
    def bands(self) -> BandLayout | None:
        """Where the array's chunk rows are laid out in bands (bands.py); None where not."""
        if self._bands is False:
            self._bands = band_layout(self)
        assert self._bands is not True
        return self._bands

    def cached_chunk(self, coords: tuple[int, ...]) -> np.ndarray | None:
        """Chunk `coords`, decoded, where it is at hand: in the cache, or in its row's band
        (a view of it, little-endian). None otherwise."""
        cache = self.context.cache
        if cache is None:
            return None
        if cache.node_generation(self.path) != self.born:
            return None  # what is kept is of the node there now
        chunk = cache.get((self.path, coords))
        if chunk is None and self.bands is not None:
            chunk = self.bands.chunk(coords)
        return chunk

    def describe_codecs(self) -> str:
        return self.pipeline.describe()

    # ------------------------------------------------------------------ reads
    def read_chunks(self, coords_list: list[tuple[int, ...]], consume: ChunkConsumer | None = None) -> list[np.ndarray]:
        """Decoded chunks as stored (full chunk shape; the fill value where nothing is
        stored): from the cache (or a band, cached_chunk), else fetched on the I/O stage and decoded on the codec
        pool as each arrives (reads.py). `consume(i, chunk)`, when given, is called with
        each chunk as soon as it is decoded, in the decoding thread."""
        stats = self.context.stats
        out: dict[int, np.ndarray] = {}  # by position in coords_list
        todo = []
        for i, coords in enumerate(coords_list):
            hit = self.cached_chunk(coords)
            if hit is not None:
                stats.add("cache_hits")
                out[i] = hit
                if consume is not None:
                    consume(i, hit)
            else:
                todo.append(i)
        if todo:
            stats.add("cache_misses", len(todo))
            place = None if consume is None else (lambda j, chunk: consume(todo[j], chunk))
            # one chunk alone is fetched and decoded here: no hand-offs on a random read
            read = ChunkRead(self, [coords_list[i] for i in todo], place, inline=len(todo) == 1)
            futures = read.start()
            wait_for_chunks(futures)
            for i, future in zip(todo, futures):
                out[i] = future.result()
        return [out[i] for i in range(len(coords_list))]

    def start_reads(
        self, coords_list: list[tuple[int, ...]], consume: ChunkConsumer | None = None, cached: bool = True
    ) -> list[Future[Any]]:
        """Fetch and decode chunks into the cache (not with `cached` False: `consume`
        places them) in the background (reading ahead): futures that resolve once each
        is decoded and consumed. Returns at once when the context has pools; runs inline
        otherwise."""
        return ChunkRead(self, coords_list, consume, cached=cached).start()

    def get_batch(self, requests: list[Any], max_size: int) -> list[bytes | memoryview | None]:
        """Values for (key, range) requests, for decoding (a store may hand over its own
        buffers, see Store.get_partial_values); one larger than `max_size` (what its chunk
        can need) is refused before it is read. A key the store did not answer within the
        last deadline fails at once (store.deadlines.UnansweredFetches)."""
        keys = [key for key, _ in requests]
        unanswered = self.context.unanswered
        if unanswered is not None:
            unanswered.check(keys)
        stats = self.context.stats
        stats.add("store_requests", len(requests))
        started = time.monotonic()
        try:
            values = get_bounded(self.store, requests, max_size, buffers=True)  # read only by decoding
        except StoreUnavailableError as exc:
            if unanswered is not None:
                unanswered.note(keys, exc, time.monotonic() - started)
            raise
        stats.add("bytes_fetched", sum(len(v) for v in values if v is not None))
        return values

    def read(self, selection: Any = Ellipsis) -> np.ndarray:
        """The values in a region (slices and integers; integer dimensions are dropped)."""
        region = normalize_selection(selection, self.shape)
        # every element comes from exactly one chunk (a fill chunk where none is stored)
        dtype = object if self.dtype.variable_length else self.dtype.numpy
        out = np.empty(tuple(s.stop - s.start for s in region), dtype=dtype)
        pieces = list(self.chunk_grid.chunks_in(region))
        chunk_bytes = max(1, math.prod(self.chunk_shape) * max(1, self.dtype.itemsize))
        batch = max(1, _READ_BATCH_BYTES // chunk_bytes)
        for start in range(0, len(pieces), batch):
            part = pieces[start : start + batch]

            def place(i: int, chunk: np.ndarray, part: list[Any] = part) -> None:
                _, in_chunk, in_region = part[i]
                out[in_region] = chunk[in_chunk]

            self.read_chunks([p[0] for p in part], place)
        drop = _integer_dims(selection, len(self.shape))
        return out.reshape([n for i, n in enumerate(out.shape) if i not in drop]) if drop else out

    # ----------------------------------------------------------------- writes
    def write_chunks(self, chunks: Mapping[tuple[int, ...], np.ndarray | None]) -> None:
        """Store whole chunks (finest grid). A chunk that is all fill value, or None, is
        erased rather than stored (writes.py)."""
        write_chunks(self, chunks)

    def stored_value_changed(self, stored_coords: tuple[int, ...]) -> None:
        """The object at `stored_coords` (a shard of a sharded array) was stored or erased
        as encoded bytes, by no decoded write: forget what the caches hold of it."""
        if self.sharding:
            region = self.stored_grid.chunk_region(stored_coords)
            chunks = [coords for coords, _, _ in self.chunk_grid.chunks_in(region)]
            self.context.invalidate(self.path, chunks, [stored_coords])
        else:
            self.context.invalidate(self.path, [stored_coords])
        if self.context.unanswered is not None:
            self.context.unanswered.forget([self.stored_key(stored_coords)])

    def write(self, selection: Any, values: Any) -> None:
        """Write values into a region: read-modify-write of the chunks it partly covers."""
        region, values = self.region_values(selection, values)
        pieces = list(self.chunk_grid.chunks_in(region))
        partial = [p for p in pieces if not self.covers_whole_chunk(p[0], p[1])]
        old = dict(zip((p[0] for p in partial), self.read_chunks([p[0] for p in partial])))
        new: dict[tuple[int, ...], np.ndarray] = {}
        for coords, in_chunk, in_region in pieces:
            chunk = old[coords].copy() if coords in old else self.fill_chunk(coords)
            chunk[in_chunk] = values[in_region]
            new[coords] = chunk
        self.write_chunks(new)

    def region_values(self, selection: Any, values: Any) -> tuple[tuple[slice, ...], np.ndarray]:
        """The region a selection writes, and the values in the region's shape: broadcast
        as numpy assigns them (to the selection's shape, integer dimensions dropped)."""
        region = normalize_selection(selection, self.shape)
        region_shape = tuple(s.stop - s.start for s in region)
        drop = _integer_dims(selection, len(self.shape))
        selected_shape = tuple(n for i, n in enumerate(region_shape) if i not in drop)
        values = np.asarray(values, dtype=object if self.dtype.variable_length else self.dtype.numpy)
        try:
            return region, np.broadcast_to(values, selected_shape).reshape(region_shape)
        except ValueError:
            raise InvalidWriteError(
                f"values of shape {values.shape} do not fit a selection of shape {selected_shape}"
            ) from None

    def covers_whole_chunk(self, coords: tuple[int, ...], in_chunk: tuple[slice, ...]) -> bool:
        """True when the written part is the whole chunk, or all of it inside the array."""
        region = self.chunk_grid.chunk_region(coords)
        return all(s.start == 0 and s.stop - s.start == r.stop - r.start for s, r in zip(in_chunk, region))

    def erase_chunks(self, coords_list: list[tuple[int, ...]]) -> None:
        self.write_chunks({c: None for c in coords_list})

    # ------------------------------------------------------------------ facts from the store
    def holds_data(self) -> bool:
        """Whether any chunk is stored (one listing, no per-key requests)."""
        prefix = self.path + "/" if self.path else ""
        return any(not is_metadata_key(key[len(prefix) :]) for key in self.store.list_prefix(prefix))

    def stored_chunks(self) -> tuple[int, int]:
        """(number of stored objects, their bytes), by listing the array's prefix."""
        count = size = 0
        prefix = self.path + "/" if self.path else ""
        for key, nbytes in self.store.list_prefix_sizes(prefix).items():
            if is_metadata_key(key[len(prefix) :]):
                continue
            count += 1
            size += nbytes
        return count, size


def _integer_dims(selection: Any, ndim: int) -> set[int]:
    if not isinstance(selection, tuple):
        selection = (selection,)
    if any(s is Ellipsis for s in selection):
        i = next(i for i, s in enumerate(selection) if s is Ellipsis)
        selection = selection[:i] + (slice(None),) * (ndim - len(selection) + 1) + selection[i + 1 :]
    return {i for i, s in enumerate(selection) if not isinstance(s, slice) and s is not None and s is not Ellipsis}
