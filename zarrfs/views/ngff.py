"""What an OME-Zarr (NGFF 0.4 on Zarr v2, 0.5 and 0.6 on v3) image group declares (docs/semantics.md,
"Views carry what the conventions say"): its axes, resolution levels and their scales,
units and channels, read from the metadata alone. `image.ome.tif` (views/ometiff.py),
`data.tif` and `data.nhdr` of its levels show what is found here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..format import Array, Group
from ..store.keys import join_path
from .base import Neighbours

# NGFF's units (UDUNITS-2 names) as OME writes them, and a length unit in metres
_LENGTH_UNITS = {
    "angstrom": ("Å", 1e-10),
    "attometer": ("am", 1e-18),
    "centimeter": ("cm", 1e-2),
    "decimeter": ("dm", 1e-1),
    "exameter": ("Em", 1e18),
    "femtometer": ("fm", 1e-15),
    "foot": ("ft", 0.3048),
    "gigameter": ("Gm", 1e9),
    "hectometer": ("hm", 1e2),
    "inch": ("in", 0.0254),
    "kilometer": ("km", 1e3),
    "megameter": ("Mm", 1e6),
    "meter": ("m", 1.0),
    "micrometer": ("µm", 1e-6),
    "mile": ("mi", 1609.344),
    "millimeter": ("mm", 1e-3),
    "nanometer": ("nm", 1e-9),
    "parsec": ("pc", 3.0857e16),
    "petameter": ("Pm", 1e15),
    "picometer": ("pm", 1e-12),
    "terameter": ("Tm", 1e12),
    "yard": ("yd", 0.9144),
    "yoctometer": ("ym", 1e-24),
    "yottameter": ("Ym", 1e24),
    "zeptometer": ("zm", 1e-21),
    "zettameter": ("Zm", 1e21),
}
_TIME_UNITS = {
    "attosecond": "as",
    "centisecond": "cs",
    "day": "d",
    "decisecond": "ds",
    "exasecond": "Es",
    "femtosecond": "fs",
    "gigasecond": "Gs",
    "hectosecond": "hs",
    "hour": "h",
    "kilosecond": "ks",
    "megasecond": "Ms",
    "microsecond": "µs",
    "millisecond": "ms",
    "minute": "min",
    "nanosecond": "ns",
    "petasecond": "Ps",
    "picosecond": "ps",
    "second": "s",
    "terasecond": "Ts",
    "yoctosecond": "ys",
    "yottasecond": "Ys",
    "zeptosecond": "zs",
    "zettasecond": "Zs",
}
# OME's pixel types (no 64-bit integers, no half floats)
PIXEL_TYPES = {
    "u1": "uint8",
    "u2": "uint16",
    "u4": "uint32",
    "i1": "int8",
    "i2": "int16",
    "i4": "int32",
    "f4": "float",
    "f8": "double",
}
_AXIS_TYPES = {"time": "T", "channel": "C"}


@dataclass(frozen=True)
class Level:
    """One resolution level: its array and the size of a pixel along each axis."""

    path: str  # as the multiscales names it, from the image group
    array: Array
    scale: tuple[float, ...]


@dataclass(frozen=True)
class Channel:
    name: str | None
    color: int | None  # OME's: RGBA as a signed 32-bit integer


@dataclass(frozen=True)
class Image:
    """An OME-Zarr image: its axes as OME's dimensions (T, C, Z, Y, X, in the array's
    order), the levels that make its pyramid (largest first; those left out, with why),
    the unit of each axis as OME writes it, and its channels."""

    name: str
    version: str
    dims: tuple[str, ...]
    units: tuple[str | None, ...]
    levels: tuple[Level, ...]
    left_out: tuple[tuple[str, str], ...]
    channels: tuple[Channel, ...]
    # the first level's first pixel in the coordinate system (NGFF translations), where set
    origin: tuple[float, ...] | None = None
    not_carried: tuple[str, ...] = ()  # the kinds of transformations the file does not carry

    @property
    def array(self) -> Array:
        return self.levels[0].array

    def size(self, dim: str) -> int:
        return self.array.shape[self.dims.index(dim)] if dim in self.dims else 1

    @property
    def dimension_order(self) -> str:
        """OME's plane order: X, Y, then the others fastest first (the array's C order)."""
        lead = [d for d in reversed(self.dims[:-2])]
        return "XY" + "".join(lead) + "".join(d for d in "ZCT" if d not in lead)

    def physical_size(self, dim: str, level: int = 0) -> tuple[float, str] | None:
        """(size of a pixel, OME unit) along a spatial axis, where the axis has a unit."""
        if dim not in self.dims:
            return None
        i = self.dims.index(dim)
        unit = self.units[i]
        return None if unit is None else (self.levels[level].scale[i], unit)

    def pixel_size_cm(self, level: int = 0) -> tuple[float, float] | None:
        """A pixel's (height, width) in centimetres, where Y and X have length units."""
        y, x = (self.physical_size(d, level) for d in "YX")
        if y is None or x is None:
            return None
        metres = [size * _metres(unit) for size, unit in (y, x)]
        return (metres[0] * 100, metres[1] * 100) if all(m > 0 for m in metres) else None


@dataclass(frozen=True)
class NotAnImage:
    """Why a group with `multiscales` shows no `image.ome.tif`."""

    reason: str


def ngff_attributes(attributes: Any) -> tuple[dict, str | None] | None:
    """The NGFF metadata of a group (0.5 keeps it under `ome`) and its version; None
    where the group has none (a `multiscales` object, not a list, is another convention's:
    views/georef.py's)."""
    if not isinstance(attributes, dict):
        return None
    ome = attributes.get("ome")
    if isinstance(ome, dict) and _declares_ngff(ome):
        return ome, ome.get("version") if isinstance(ome.get("version"), str) else None
    if _declares_ngff(attributes):
        scales = attributes.get("multiscales")
        first = scales[0] if isinstance(scales, list) and scales and isinstance(scales[0], dict) else {}
        version = first.get("version")
        return attributes, version if isinstance(version, str) else None
    return None


def _declares_ngff(meta: dict) -> bool:
    return (
        isinstance(meta.get("multiscales"), list)
        or isinstance(meta.get("plate"), dict)
        or isinstance(meta.get("well"), dict)
        or isinstance(meta.get("labels"), list)
    )


def image_of(group: Group, path: str, neighbours: Neighbours) -> Image | NotAnImage | None:
    """The OME-Zarr image the group at `path` holds (metadata only: its levels' metadata
    too), or why it cannot be shown as one; None where it declares no `multiscales`."""
    found = ngff_attributes(group.attributes)
    if found is None or "multiscales" not in found[0]:
        return None
    meta, version = found
    scales = meta["multiscales"]
    if not isinstance(scales, list) or not scales or not isinstance(scales[0], dict):
        return NotAnImage("multiscales is not a list of objects")
    multiscale = scales[0]  # the default, where there are several
    datasets = multiscale.get("datasets")
    axes = multiscale.get("axes")
    if axes is None and "coordinateSystems" in multiscale:  # 0.6 (RFC-5): the axes of a named system
        axes = _system_axes(multiscale, datasets)
    dims, units = _axes(axes, version)
    if isinstance(dims, str):
        return NotAnImage(dims)
    if not isinstance(datasets, list) or not datasets:
        return NotAnImage("multiscales has no datasets")
    shared = _transform(multiscale.get("coordinateTransformations"), len(dims))
    levels: list[Level] = []
    left_out: list[tuple[str, str]] = []
    origin: tuple[float, ...] | None = None
    not_carried = set(shared.others)
    for dataset in datasets:
        where = dataset.get("path") if isinstance(dataset, dict) else None
        if not isinstance(where, str) or not where or where.startswith("/") or ".." in where.split("/"):
            if not levels:
                return NotAnImage(f"dataset {where!r} is not a relative path")
            continue
        node = neighbours.node(join_path(path, where))
        own = _transform(dataset.get("coordinateTransformations"), len(dims))
        scale = tuple(a * b for a, b in zip(own.scale, shared.scale))
        if not levels:  # the level's translation, then the multiscale's transformations
            not_carried |= set(own.others)
            placed = tuple(t * s + u for t, s, u in zip(own.translation, shared.scale, shared.translation))
            origin = placed if any(placed) else None  # (0.4 and 0.5 writers often give zeros)
        why = _level_problem(node, dims, levels[0].array if levels else None)
        if why is not None:
            if not levels:
                return NotAnImage(f"level {where!r}: {why}")
            left_out.append((where, why))
            continue
        levels.append(Level(where, node, scale))
    name = multiscale.get("name")
    return Image(
        name if isinstance(name, str) and name else path.rpartition("/")[2] or "image",
        version or "0.4",
        dims,
        units,
        tuple(levels),
        tuple(left_out),
        _channels(meta.get("omero"), levels[0].array.shape[dims.index("C")] if "C" in dims else 1),
        origin,
        tuple(sorted(not_carried)),
    )


def level_of(array: Array, neighbours: Neighbours) -> tuple[Image, int] | None:
    """(the image, the level) where the array is a level of its parent group's image."""
    parent, _, _name = neighbours.path.rpartition("/")
    group = neighbours.node(parent)
    if not isinstance(group, Group) or ngff_attributes(group.attributes) is None:
        return None
    image = image_of(group, parent, neighbours)
    if not isinstance(image, Image):
        return None
    return next(((image, i) for i, level in enumerate(image.levels) if level.array.path == array.path), None)


def collection_line(attributes: Any) -> str | None:
    """For a plate, a well or a labels group: where its images (and their
    `image.ome.tif`) are."""
    found = ngff_attributes(attributes)
    if found is None:
        return None
    meta = found[0]
    if isinstance(meta.get("plate"), dict):
        return "a plate: each field of each well (row/column/field) is an image with its own image.ome.tif"
    if isinstance(meta.get("well"), dict):
        images = meta["well"].get("images")
        paths = [i.get("path") for i in images if isinstance(i, dict)] if isinstance(images, list) else []
        return "a well: its fields " + ", ".join(map(str, paths)) + " are images with their own image.ome.tif"
    if isinstance(meta.get("labels"), list):
        return "label images " + ", ".join(map(str, meta["labels"])) + ", each with its own image.ome.tif"
    return None


# ------------------------------------------------------------------ pieces


def _axes(axes: Any, version: str | None) -> tuple[tuple[str, ...] | str, tuple[str | None, ...]]:
    """OME's dimension of each axis and its unit, or (why not, ())."""
    if axes is None and version in ("0.1", "0.2"):
        axes = ["t", "c", "z", "y", "x"]  # implied before axes were declared
    if not isinstance(axes, list) or not 2 <= len(axes) <= 5:
        return "axes must be a list of 2 to 5 axes", ()
    dims: list[str] = []
    units: list[str | None] = []
    spatial = sum(
        1
        for a in axes
        if (a.get("type") if isinstance(a, dict) else None) == "space" or (isinstance(a, str) and a in "zyx")
    )
    for axis in axes:
        name, kind, unit = (
            (axis, None, None)
            if isinstance(axis, str)
            else (
                (axis.get("name"), axis.get("type"), axis.get("unit")) if isinstance(axis, dict) else (None, None, None)
            )
        )
        if kind is None and isinstance(name, str):
            kind = {"t": "time", "c": "channel"}.get(name.lower(), "space" if name.lower() in "zyx" else None)
        if kind == "space" and isinstance(name, str) and name.upper() in ("Z", "Y", "X"):
            dim = name.upper()
        elif kind == "space":  # a name of its own: by its place among the spatial axes
            dim = "ZYX"[3 - spatial + sum(1 for d in dims if d in "ZYX")] if spatial in (2, 3) else None
        else:
            dim = _AXIS_TYPES.get(kind) if isinstance(kind, str) else None
        if dim is None or dim in dims:
            return f"axis {name!r} of type {kind!r} is not one of OME's T, C, Z, Y, X", ()
        dims.append(dim)
        table = _TIME_UNITS if dim == "T" else {k: v[0] for k, v in _LENGTH_UNITS.items()} if dim in "ZYX" else {}
        units.append(table.get(unit) if isinstance(unit, str) else None)
    if tuple(dims[-2:]) != ("Y", "X"):
        return "the last two axes are not the spatial Y and X", ()
    return tuple(dims), tuple(units)


@dataclass
class _Affine:
    """Transformations composed into a scale and a translation per axis (x' = scale * x +
    translation), and the kinds met that are neither."""

    scale: list[float]
    translation: list[float]
    others: list[str] = field(default_factory=list)


def _transform(transforms: Any, ndim: int) -> _Affine:
    """The `scale` and `translation` transformations given as numbers, applied in order
    (0.6's `sequence` unrolled; `identity` is none); the other kinds named in `others`."""
    out = _Affine([1.0] * ndim, [0.0] * ndim)
    _compose(out, transforms if isinstance(transforms, list) else [], ndim)
    return out


def _compose(out: _Affine, transforms: list, ndim: int) -> None:
    for t in transforms:
        kind = t.get("type") if isinstance(t, dict) else None
        if kind == "sequence":
            inner = t.get("transformations")
            _compose(out, inner if isinstance(inner, list) else [], ndim)
        elif kind == "scale" and _numbers(t.get("scale"), ndim, positive=True):
            out.scale = [a * b for a, b in zip(out.scale, t["scale"])]
            out.translation = [a * b for a, b in zip(out.translation, t["scale"])]
        elif kind == "translation" and _numbers(t.get("translation"), ndim, positive=False):
            out.translation = [a + b for a, b in zip(out.translation, t["translation"])]
        elif isinstance(kind, str) and kind not in ("identity", "scale", "translation"):
            out.others.append(kind)


def _numbers(values: Any, ndim: int, positive: bool) -> bool:
    return (
        isinstance(values, list)
        and len(values) == ndim
        and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v > 0 or not positive)
            for v in values
        )
    )


def _system_axes(multiscale: dict, datasets: Any) -> Any:
    """0.6: the axes of the coordinate system the first level's transformations lead to
    (followed through the multiscale's own, intrinsic to physical); else the first system's."""
    systems = {
        c.get("name"): c.get("axes")
        for c in multiscale.get("coordinateSystems") or []
        if isinstance(c, dict) and isinstance(c.get("name"), str)
    }
    first = datasets[0] if isinstance(datasets, list) and datasets and isinstance(datasets[0], dict) else {}
    transforms = first.get("coordinateTransformations")
    target = (
        _end(transforms[-1].get("output"))
        if isinstance(transforms, list) and transforms and isinstance(transforms[-1], dict)
        else None
    )
    for t in multiscale.get("coordinateTransformations") or []:
        if isinstance(t, dict) and _end(t.get("input")) == target and _end(t.get("output")) in systems:
            target = _end(t["output"])
    if target in systems:
        return systems[target]
    listed = multiscale.get("coordinateSystems")
    return listed[0].get("axes") if isinstance(listed, list) and listed and isinstance(listed[0], dict) else None


def _end(end: Any) -> str | None:
    """A transformation's input or output: a name, or an object naming a coordinate
    system (`{"name": …}`) or an array (`{"path": …}`), as ngff-zarr writes 0.6."""
    if isinstance(end, dict):
        end = end.get("name", end.get("path"))
    return end if isinstance(end, str) else None


def _level_problem(node: Any, dims: tuple[str, ...], first: Array | None) -> str | None:
    """Why an array cannot be a level of the OME-TIFF (the first, or a reduced one of it)."""
    if not isinstance(node, Array):
        return "no array there"
    if len(node.shape) != len(dims):
        return f"{len(node.shape)} dimensions for {len(dims)} axes"
    dtype = node.dtype
    if dtype.variable_length or dtype.kind not in ("numeric", "subbyte_int"):
        return f"data type {dtype.name} has no OME pixel type"
    numpy = dtype.little_endian
    if f"{numpy.kind}{numpy.itemsize}" not in PIXEL_TYPES:
        return f"data type {numpy} has no OME pixel type (OME has no 64-bit integers)"
    if 0 in node.shape:
        return "no pixels"
    if first is None:
        return None
    if node.dtype.little_endian != first.dtype.little_endian:
        return "a data type other than the first level's"
    if node.shape[:-2] != first.shape[:-2]:
        return "reduces more than Y and X (OME-TIFF's levels are reductions of each plane)"
    if node.shape[-2] > first.shape[-2] or node.shape[-1] > first.shape[-1] or node.shape == first.shape:
        return "not smaller in Y and X than the first level"
    return None


def _channels(omero: Any, count: int) -> tuple[Channel, ...]:
    """The `omero` channels' labels and colours, where there is one per channel."""
    listed = omero.get("channels") if isinstance(omero, dict) else None
    if not isinstance(listed, list) or len(listed) != count:
        return tuple(Channel(None, None) for _ in range(count))
    channels = []
    for c in listed:
        c = c if isinstance(c, dict) else {}
        label = c.get("label") if isinstance(c.get("label"), str) else None
        channels.append(Channel(label, _color(c.get("color"))))
    return tuple(channels)


def _color(text: Any) -> int | None:
    """RRGGBB as OME's Color: RGBA, opaque, a signed 32-bit integer."""
    if not isinstance(text, str) or len(text) != 6:
        return None
    try:
        rgba = (int(text, 16) << 8) | 0xFF
    except ValueError:
        return None
    return rgba - (1 << 32) if rgba >= 1 << 31 else rgba


def _metres(unit: str) -> float:
    """Metres in one of OME's length units (0 where it is none of NGFF's)."""
    return next((m for symbol, m in _LENGTH_UNITS.values() if symbol == unit), 0.0)
