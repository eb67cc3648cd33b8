"""`data.nhdr`: an NRRD detached header (NRRD0004, raw encoding, little-endian) whose
data file is the array's `data`, so NRRD readers (3D Slicer, ITK, pynrrd) open it.

Geometry comes from array attributes, when present and well-formed (otherwise omitted):
- `spacing`: one positive number per array dimension, in the array's dimension order
  (slowest first, as `shape`) -> `spacings`;
- `space_directions`: one entry per array dimension, in the same order, each a vector of
  D numbers (the same D for all) or null for a non-spatial axis -> `space dimension: D`
  and `space directions`; it replaces `spacing`. `space_origin`, D numbers, ->
  `space origin` (only with `space_directions`).
`dimension_names` become `labels`. NRRD lists axes fastest first, so every per-axis
field is written in reverse of the array's dimension order.

A level of an OME-Zarr image takes its geometry from the image instead (views/ngff.py):
each spatial axis's pixel size as `space directions` (axis-aligned), its unit as
`space units`."""

from __future__ import annotations

import math
from typing import Any

from ...format import Array
from ..base import BytesView

_TYPES = {
    "b1": "uint8",  # bool is stored as bytes 0 and 1
    "i1": "int8",
    "u1": "uint8",
    "i2": "int16",
    "u2": "uint16",
    "i4": "int32",
    "u4": "uint32",
    "i8": "int64",
    "u8": "uint64",
    "f4": "float",
    "f8": "double",
}


def _type_of(array: Array) -> str | None:
    dtype = array.dtype.little_endian
    return _TYPES.get(f"{dtype.kind}{dtype.itemsize}")


def represents(array: Array) -> bool:
    """Any array of ndim >= 1 of bool, integer, float32 or float64 type."""
    return len(array.shape) >= 1 and _type_of(array) is not None


def _number(x: Any) -> str | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return repr(x)


def _numbers(values: Any, length: int) -> list[str] | None:
    if not isinstance(values, list) or len(values) != length:
        return None
    out = [number for v in values if (number := _number(v)) is not None]
    return out if len(out) == length else None


def _vector(numbers: list[str]) -> str:
    return "(" + ",".join(numbers) + ")"


def _space_directions(directions: Any, ndim: int) -> list[list[str] | None] | None:
    """One vector (or None) per array dimension, all of one length D >= 1; else None."""
    if not isinstance(directions, list) or len(directions) != ndim:
        return None
    vectors: list[list[str] | None] = []
    for d in directions:
        if d is None:
            vectors.append(None)
            continue
        vector = _numbers(d, len(d)) if isinstance(d, list) else None
        if not vector:
            return None
        vectors.append(vector)
    return vectors if len({len(v) for v in vectors if v is not None}) == 1 else None


def _geometry(attributes: dict[str, Any], ndim: int) -> list[str]:
    """The geometry fields the attributes give (see the module docstring)."""
    vectors = _space_directions(attributes.get("space_directions"), ndim)
    if vectors is not None:
        space_dim = next(len(v) for v in vectors if v is not None)
        lines = [
            f"space dimension: {space_dim}",
            "space directions: " + " ".join("none" if v is None else _vector(v) for v in reversed(vectors)),
        ]
        origin = _numbers(attributes.get("space_origin"), space_dim)
        if origin is not None:
            lines.append(f"space origin: {_vector(origin)}")
        return lines
    spacing = _numbers(attributes.get("spacing"), ndim)
    if spacing is not None and all(float(s) > 0 for s in spacing):
        return ["spacings: " + " ".join(reversed(spacing))]
    return []


def _label(name: Any) -> str:
    text = "" if name is None else str(name)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _ngff_geometry(space: list[tuple[float, str | None] | None]) -> list[str]:
    """`space directions` and `space units` from (pixel size, unit) of each spatial axis
    (None for the others), in the array's dimension order."""
    sizes = [s for s in space if s is not None]
    vectors = []
    for s in space:
        if s is None:
            vectors.append("none")
            continue
        i = len(vectors) - sum(1 for v in vectors if v == "none")
        vectors.append(_vector([repr(float(s[0])) if j == len(sizes) - 1 - i else "0" for j in range(len(sizes))]))
    lines = [f"space dimension: {len(sizes)}", "space directions: " + " ".join(reversed(vectors))]
    if all(unit is not None for _, unit in sizes):
        lines.append("space units: " + " ".join(_label(unit) for _, unit in reversed(sizes)))
    return lines


def render_nhdr(array: Array, space: list[tuple[float, str | None] | None] | None = None) -> str:
    """`space`: the geometry of an OME-Zarr level (see `_ngff_geometry`)."""
    shape = array.shape
    geometry = _ngff_geometry(space) if space else _geometry(array.metadata.attributes, len(shape))
    lines = [
        "NRRD0004",
        f"# zarrfs: the values are the array's `data` file, {'x'.join(map(str, shape))} in C order",
        f"type: {_type_of(array)}",
        f"dimension: {len(shape)}",
        *geometry,
        "sizes: " + " ".join(str(n) for n in reversed(shape)),
    ]
    names = array.metadata.dimension_names
    if names and any(n is not None for n in names):
        lines.append("labels: " + " ".join(_label(n) for n in reversed(names)))
    lines += ["endian: little", "encoding: raw", "data file: data"]
    return "\n".join(lines) + "\n"


def nhdr_view(array: Array, space: list[tuple[float, str | None] | None] | None = None) -> BytesView:
    return BytesView(lambda: render_nhdr(array, space).encode(), cheap=True)  # from the metadata alone
