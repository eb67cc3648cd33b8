"""`preview.png` of an array of two or more dimensions, or of an OME-Zarr image group: a
picture at most `MAX_SIDE` pixels on its long side, read from the coarsest multiscale
level at least that large, else from whole chunks taken at a stride, `MAX_CHUNK_READS` of
them at most whatever the array's size. Its size follows from the metadata (png.py)."""

from __future__ import annotations

import itertools
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..format import Array, FormatError
from ..store import StoreError
from . import preview_colours as colours
from .base import FileView, Neighbours, StoredChunks
from .legacy.tiff import is_rgb
from .png import PALETTE, RGBA, encode, png_size

NAME = "preview.png"
MAX_SIDE = 512
MAX_CHUNK_READS = 64
MAX_CHANNELS = 8  # of an OME-Zarr image's composite
_BATCH = 16  # chunks decoded at once (memory)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Axes:
    """The picture's rows and columns, and the axis of its colours (RGB(A) samples, an
    image's channels) where it has one; every other axis is read at its middle."""

    y: int
    x: int
    channel: int | None = None


def picture_axes(array: Array) -> Axes | None:
    """The last two axes longer than 1 of an array of numbers or booleans, or the first
    two of a (Y, X, 3|4) uint8/uint16 one, RGB(A) as `data.tif` shows it; None where the
    array shows no picture."""
    dtype = array.dtype
    if dtype.variable_length or dtype.kind not in ("numeric", "subbyte_int") or 0 in array.shape:
        return None
    numpy = dtype.little_endian
    if numpy.kind not in "biuf":
        return None
    if is_rgb(array.shape, numpy):
        return Axes(0, 1, 2)
    long = [i for i, n in enumerate(array.shape) if n > 1]
    return Axes(long[-2], long[-1]) if len(long) >= 2 else None


def picture_shape(height: int, width: int) -> tuple[int, int]:
    """(height, width) of the picture of a plane: at most MAX_SIDE on its long side."""
    scale = max(height, width) / MAX_SIDE
    if scale <= 1:
        return height, width
    return max(1, round(height / scale)), max(1, round(width / scale))


def preview_size(array: Array) -> int | None:
    """The size of an array's preview.png, from its metadata (shown where picture_axes
    is); None for a group's (its view knows)."""
    if not isinstance(array, Array):
        return None
    axes = picture_axes(array)
    assert axes is not None
    height, width = picture_shape(array.shape[axes.y], array.shape[axes.x])
    return png_size(width, height, PALETTE if axes.channel is None else RGBA)


class Plan:
    """What a picture reads, from the metadata alone: the level, each output row's and
    column's chunk and place in it (chunks taken every `strides` along Y and X, so that
    at most MAX_CHUNK_READS are read), the chunks."""

    def __init__(self, level: Array, axes: Axes, shape: tuple[int, int], channels: tuple[int, ...] = ()) -> None:
        self.level, self.axes, self.shape, self.channels = level, axes, shape, channels
        grid, dims = level.chunk_grid, level.shape
        fixed = {i: n // 2 for i, n in enumerate(dims) if i not in (axes.y, axes.x, axes.channel)}
        self._at = fixed
        # (chunk, place in it) along each axis read at one place
        self._fixed = {i: _place(grid, i, at) for i, at in fixed.items()}
        self._channel = [_place(grid, axes.channel, c) for c in channels] if axes.channel is not None else []
        budget = max(1, MAX_CHUNK_READS // max(1, len({k for k, _ in self._channel})))
        ys, xs = _positions(dims[axes.y], shape[0]), _positions(dims[axes.x], shape[1])
        strides = [1, 1]
        while True:
            self._y = _strided(grid, axes.y, dims[axes.y], ys, strides[0])
            self._x = _strided(grid, axes.x, dims[axes.x], xs, strides[1])
            rows, columns = len(set(self._y[0])), len(set(self._x[0]))
            if rows * columns <= budget:
                break
            if strides == [1, 1]:  # first the strides that share the budget as the chunks lie
                down = max(1, min(rows, budget, math.isqrt(budget * rows // columns)))
                across = max(1, min(columns, budget // down))
                strides = [-(-grid.grid_shape[axes.y] // down), -(-grid.grid_shape[axes.x] // across)]
            else:  # then, rarely, one more step where that is not enough (edges, rectilinear)
                i = 0 if rows >= columns else 1
                strides[i] = max(strides[i] + 1, strides[i] * 17 // 16)
        self.strides = (strides[0], strides[1])
        per_axis: list[list[int]] = []
        for i in range(len(dims)):
            if i in self._fixed:
                per_axis.append([self._fixed[i][0]])
            elif i == axes.y:
                per_axis.append(sorted(set(self._y[0])))
            elif i == axes.x:
                per_axis.append(sorted(set(self._x[0])))
            else:
                per_axis.append(sorted({k for k, _ in self._channel}))
        self.chunks = list(itertools.product(*per_axis))

    def read(self, source: Any) -> np.ndarray:
        """The picture's values, (height, width) or (height, width, channels), from the
        chunks as `source` reads them (StoredChunks, or pending writes)."""
        axes, ndim = self.axes, len(self.level.shape)
        roles = [axes.y, axes.x] + ([axes.channel] if axes.channel is not None else [])
        order = sorted(roles)
        out: np.ndarray | None = None
        ky, oy = np.asarray(self._y[0]), np.asarray(self._y[1])
        kx, ox = np.asarray(self._x[0]), np.asarray(self._x[1])
        kc = np.asarray([k for k, _ in self._channel], dtype=np.int64)
        oc = np.asarray([o for _, o in self._channel], dtype=np.int64)
        for at in range(0, len(self.chunks), _BATCH):
            batch = self.chunks[at : at + _BATCH]
            for coords, chunk in zip(batch, source.read_chunks(batch)):
                if out is None:
                    out = np.empty(self.shape + ((len(self._channel),) if self._channel else ()), chunk.dtype)
                targets, places = {}, {}
                for axis, k, o in ((axes.y, ky, oy), (axes.x, kx, ox), (axes.channel, kc, oc)):
                    if axis is not None:
                        hit = np.nonzero(k == coords[axis])[0]
                        targets[axis], places[axis] = hit, o[hit]
                grid_index = np.ix_(*(places[i] for i in order))
                index = tuple(grid_index[order.index(i)] if i in places else self._fixed[i][1] for i in range(ndim))
                piece = chunk[index].transpose([order.index(r) for r in roles])
                out[np.ix_(*(targets[r] for r in roles))] = piece
        assert out is not None
        return out

    def describe(self) -> str:
        """Which level and chunks the picture is read from."""
        a, axes = self.level, self.axes
        grid = a.chunk_grid.grid_shape
        plane = f"{a.shape[axes.x]}x{a.shape[axes.y]}"
        if any(a.shape[i] > 1 for i in self._at):  # which plane: [4, :, :]
            plane += ", at [" + ", ".join(str(self._at[i]) if i in self._at else ":" for i in range(len(a.shape))) + "]"
        how = f"{len(self.chunks)} chunks"
        if self.strides != (1, 1):
            sy, sx = self.strides
            how += f" (1 in {sx} of the {grid[axes.x]} across, 1 in {sy} of the {grid[axes.y]} down)"
        return f"{self.shape[1]}x{self.shape[0]} px from /{a.path} ({plane}), {how}"


def _place(grid: Any, axis: int, at: int) -> tuple[int, int]:
    """(the chunk along `axis` holding element `at`, its place in that chunk)."""
    chunk = _chunk_at(grid, axis, at)
    return chunk, at - _start(grid, axis, chunk)


def _chunk_at(grid: Any, axis: int, at: int) -> int:
    return int(at // grid.chunk_shape[axis] if grid.regular else grid.edges[axis].chunk_at(at))


def _start(grid: Any, axis: int, chunk: int) -> int:
    return int(chunk * grid.chunk_shape[axis] if grid.regular else grid.edges[axis].span(chunk)[0])


def _positions(extent: int, count: int) -> list[int]:
    """The element at the middle of each of `count` equal parts of `extent`."""
    return [(2 * i + 1) * extent // (2 * count) for i in range(count)]


def _strided(grid: Any, axis: int, extent: int, positions: list[int], stride: int) -> tuple[list[int], list[int]]:
    """For each position, the chunk read in its place (the first of its run of `stride`
    chunks) and the element of that chunk at the same fraction of the run. (A regular
    grid's at once, in numpy: `info`'s size, which a listing asks, makes a plan.)"""
    count = grid.grid_shape[axis]
    if grid.regular and max(extent, grid.chunk_shape[axis]) < _EXACT_IN_INT64:
        return _strided_regular(grid.chunk_shape[axis], count, extent, positions, stride)
    return _strided_each(grid, axis, extent, positions, stride)


def _strided_each(grid: Any, axis: int, extent: int, positions: list[int], stride: int) -> tuple[list[int], list[int]]:
    """_strided, position by position (a rectilinear grid's)."""
    count = grid.grid_shape[axis]
    chunks, places = [], []
    for at in positions:
        first = _chunk_at(grid, axis, at)
        first -= first % stride
        start = _start(grid, axis, first)
        run_end = _start(grid, axis, first + stride) if first + stride < count else extent
        own_end = min(_start(grid, axis, first + 1), extent) if first + 1 < count else extent
        chunks.append(first)
        places.append((at - start) * (own_end - start) // (run_end - start))
    return chunks, places


_EXACT_IN_INT64 = 1 << 31  # (products of two lengths below it fit in an int64)


def _strided_regular(
    size: int, count: int, extent: int, positions: list[int], stride: int
) -> tuple[list[int], list[int]]:
    """_strided of a regular grid of chunks `size` long, `count` of them."""
    at = np.asarray(positions, dtype=np.int64)
    first = at // size
    first -= first % stride
    start = first * size
    run_end = np.where(first + stride < count, (first + stride) * size, extent)
    own_end = np.where(first + 1 < count, np.minimum((first + 1) * size, extent), extent)
    places = (at - start) * (own_end - start) // (run_end - start)
    return first.tolist(), places.tolist()


class PreviewView(FileView):
    """A picture rendered on its first read and again once its level's chunks change;
    its size fixed by its dimensions."""

    def __init__(
        self, plan: Plan, source: Any, colour: Callable[[np.ndarray], tuple[np.ndarray, Any, str]], rgba: bool
    ) -> None:
        self.plan, self._colour = plan, colour
        self._source = StoredChunks(plan.level) if source is None else source  # (None: as stored)
        self._size = png_size(plan.shape[1], plan.shape[0], RGBA if rgba else PALETTE)
        self._lock = threading.Lock()
        self._rendered: tuple[tuple[int, int], bytes, str] | None = None  # (_version, file, range)

    def size(self) -> int:
        return self._size

    def generation(self) -> int:
        cache = self.plan.level.context.cache
        return cache.generation(self.plan.level.path) if cache is not None else 0

    def _version(self) -> tuple[int, int]:
        """What the picture was rendered from: the stored chunks' generation, and the
        writes not yet stored (pending writes count their changes; the store, none)."""
        return self.generation(), getattr(self._source, "version", 0)

    def _kept(self) -> bool:
        """Every chunk the picture was read from is still in the decoded-chunk cache: one
        that left it may have been changed in the store by another writer since, and is
        read again, as `data` reads it then. (Writes not yet stored: their version says.)"""
        cache, path = self.plan.level.context.cache, self.plan.level.path
        return cache is None or bool(self._source) or all(cache.get((path, c)) is not None for c in self.plan.chunks)

    def rendered(self, fresh: bool = True) -> tuple[bytes, str]:
        """(the file, the value range it maps, described). `fresh`: rendered again where a
        chunk it was read from has left the cache since (only where a reader starts at the
        beginning: a cache too small for its chunks then costs one rendering per read of
        the file, not one per FUSE read)."""
        generation = self._version()
        with self._lock:
            rendered = self._rendered
            if rendered is None or rendered[0] != generation or (fresh and not self._kept()):
                pixels, palette, mapped = self._colour(self.plan.read(self._source))
                self._rendered = rendered = (generation, encode(pixels, palette), mapped)
            return rendered[1], rendered[2]

    def read(self, offset: int, size: int) -> bytes:
        return self.rendered(fresh=offset == 0)[0][offset : offset + size]

    def read_cached(self, offset: int, size: int) -> bytes | None:
        rendered = self._rendered
        if rendered is None or rendered[0] != self._version() or (offset == 0 and not self._kept()):
            return None
        return rendered[1][offset : offset + size]

    def describe(self, resolved: bool) -> str:
        """`info`'s line: where the picture is read from and, once `resolved` (read),
        the range it maps; as long before as after."""
        mapped = " " * _RANGE_WIDTH
        if resolved:
            try:
                mapped = self.rendered()[1]
            except (FormatError, StoreError, OSError) as exc:
                # a chunk the picture cannot read costs `info` this range, not the whole file
                log.warning("info of /%s: cannot read the preview's chunks: %s", self.plan.level.path, exc)
                mapped = "unknown: a chunk could not be read".ljust(_RANGE_WIDTH)
        return f"{self.plan.describe()}; {mapped}"


_RANGE_WIDTH = 60


def _range_text(window: tuple[float, float] | None, how: str) -> str:
    """Always _RANGE_WIDTH characters, so `info` knows its size before reading."""
    text = "no value read" if window is None else f"{how} {window[0]:.5g} to {window[1]:.5g}"
    return text[:_RANGE_WIDTH].ljust(_RANGE_WIDTH)


def array_preview(array: Array, chunks: Any, neighbours: Neighbours | None) -> PreviewView:
    """An array's picture, from the coarsest level large enough of a pyramid it is a level
    of (OME-Zarr, or GeoZarr multiscales), else from its own chunks."""
    axes = picture_axes(array)
    assert axes is not None
    shape = picture_shape(array.shape[axes.y], array.shape[axes.x])
    level = _coarsest(array, _levels(array, neighbours) if neighbours is not None else [], axes, shape)
    source = chunks if level is array or neighbours is None else neighbours.chunks_of(level)
    channels = tuple(range(array.shape[axes.channel])) if axes.channel is not None else ()
    fill = array.fill_value

    def colour(values: np.ndarray) -> tuple[np.ndarray, Any, str]:
        if axes.channel is not None:
            pixels, window = colours.rgb(values)
            return pixels, None, _range_text(window, "RGB samples")
        index, palette, window = colours.one_band(values, fill)
        how = "false/true black/white" if values.dtype.kind == "b" else "viridis across"
        return index, palette, _range_text(window, how)

    return PreviewView(Plan(level, axes, shape, channels), source, colour, rgba=axes.channel is not None)


def image_preview(image: Any, attributes: dict[str, Any], chunks_of: Callable[[Array], Any]) -> PreviewView:
    """An OME-Zarr image's picture (views/ngff.py's Image): its active channels, each in
    the colour and window NGFF `omero` declares, added up."""
    from .ngff import ngff_attributes

    dims, first = image.dims, image.array
    channel = dims.index("C") if "C" in dims else None
    axes = Axes(dims.index("Y"), dims.index("X"), channel)
    shape = picture_shape(first.shape[axes.y], first.shape[axes.x])
    level = _coarsest(first, [lv.array for lv in image.levels], axes, shape)
    found = ngff_attributes(attributes)
    omero = found[0].get("omero") if found is not None else None
    count = first.shape[channel] if channel is not None else 1
    shown = colours.active_channels(omero, count, MAX_CHANNELS)
    chosen = colours.channels_of(omero, shown)
    fill = first.fill_value

    def colour(values: np.ndarray) -> tuple[np.ndarray, Any, str]:
        pixels, windows = colours.composite(values if channel is not None else values[..., None], chosen, fill)
        spans = ", ".join("-" if w is None else f"{w[0]:.5g} to {w[1]:.5g}" for w in windows)
        return pixels, None, f"channels {', '.join(map(str, shown))} across {spans}"[:_RANGE_WIDTH].ljust(_RANGE_WIDTH)

    plan = Plan(level, axes, shape, tuple(shown) if channel is not None else ())
    return PreviewView(plan, chunks_of(level), colour, rgba=True)  # (a composite, with or without a C axis)


def _levels(array: Array, neighbours: Neighbours) -> list[Array]:
    """The levels of the pyramid the array is a level of (itself among them), or []."""
    from .georef import Georeference, georeference, overview_levels
    from .ngff import level_of

    found = level_of(array, neighbours)
    if found is not None:
        return [lv.array for lv in found[0].levels]
    geo = georeference(array, neighbours)
    return overview_levels(array, geo, neighbours) if isinstance(geo, Georeference) else []


def _coarsest(array: Array, levels: list[Array], axes: Axes, shape: tuple[int, int]) -> Array:
    """The smallest level at least as large as the picture on both axes (the array where
    none is smaller)."""
    fits = [
        a
        for a in levels
        if len(a.shape) == len(array.shape)
        and a.dtype.little_endian == array.dtype.little_endian
        and a.shape[axes.y] >= shape[0]
        and a.shape[axes.x] >= shape[1]
        and a.shape[axes.y] * a.shape[axes.x] < array.shape[axes.y] * array.shape[axes.x]
        and (axes.channel is None or a.shape[axes.channel] == array.shape[axes.channel])
    ]
    return min(fits, key=lambda a: math.prod(a.shape), default=array)
