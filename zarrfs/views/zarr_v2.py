"""The documents of `/.zarrfs/v2/`: every node of the hierarchy as plain Zarr v2 says it,
for the readers that know no other form (GDAL before 3.8, zarr-python 2, n5-zarr, ...).
An array's chunks there are those of its finest grid as `chunks/` shows them (C order,
little-endian, full shape), so its `.zarray` says no compressor, no filter, a
little-endian dtype and the finest grid's chunk shape. What v2 cannot say is left out
(`left_out` gives the reason `info` shows)."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..format import Array, Group
from ..format.fill_values import fill_value_to_json

ZGROUP, ZARRAY, ZATTRS, ZMETADATA = ".zgroup", ".zarray", ".zattrs", ".zmetadata"
WHOLE = ZMETADATA  # the document of every node shown (consolidated)
# the v2 default: the only one readers written before `dimension_separator` existed know
SEPARATOR = "."


def left_out(array: Array) -> str | None:
    """Why the array has no v2 form (None where it has one)."""
    dtype = array.dtype
    if dtype.variable_length:
        return f"its data type {dtype.name} is variable-length: v2 says it only through a codec (a filter)"
    if dtype.kind in ("low_precision_float", "subbyte_int"):
        return f"its data type {dtype.name} has no numpy (v2) form"
    if not array.chunk_grid.regular:
        return "its chunk grid is rectilinear: v2 knows regular grids only"
    if dtype.numpy.kind == "O":
        return f"its data type {dtype.name} has no fixed size"
    return None


def dtype_json(array: Array) -> str | list[Any]:
    """The v2 `dtype` of the chunks as the view shows them: little-endian."""
    dtype = array.dtype.little_endian
    return [list(field) for field in dtype.descr] if dtype.fields else dtype.str


def fill_json(array: Array) -> Any:
    """The v2 `fill_value` (zarr-python 2's encoding: NaN and the infinities by name,
    bytes and records base64, complex numbers as [real, imag])."""
    value, dtype = array.fill_value, array.dtype
    if value is None:
        return None
    numpy = dtype.numpy
    if numpy.kind in "SV" or numpy.fields:
        element = np.asarray(value, dtype=dtype.little_endian)
        return base64.standard_b64encode(element.tobytes()).decode()
    if numpy.kind == "f" and math.isnan(float(value)):
        return "NaN"  # (a NaN of another payload: v2 has no word for it)
    if numpy.kind == "c":
        part = np.dtype(f"f{numpy.itemsize // 2}")
        c = numpy.type(value)
        return [_float(part.type(c.real)), _float(part.type(c.imag))]
    return fill_value_to_json(value, dtype)


def _float(x: Any) -> Any:
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def zarray(array: Array) -> dict[str, Any]:
    return {
        "zarr_format": 2,
        "shape": list(array.shape),
        "chunks": list(array.chunk_shape),
        "dtype": dtype_json(array),
        "compressor": None,
        "fill_value": fill_json(array),
        "order": "C",
        "filters": None,
        "dimension_separator": SEPARATOR,
    }


def zattrs(node: Array | Group) -> dict[str, Any]:
    """The node's attributes, with an array's dimension names as xarray's (and GDAL's)
    `_ARRAY_DIMENSIONS` where each dimension has one (a 0-d array: none to name)."""
    attributes = dict(node.metadata.attributes)
    if isinstance(node, Array):
        names = node.metadata.dimension_names or ()
        named = len(names) == len(node.shape) and all(isinstance(n, str) and n for n in names)
        if named and "_ARRAY_DIMENSIONS" not in attributes:
            attributes["_ARRAY_DIMENSIONS"] = list(names)
    return attributes


def document_names(node: Array | Group, root: bool) -> list[str]:
    """The names of the documents of the node's directory in the view, in order (`root`:
    the view's root, which holds the consolidated `.zmetadata` too)."""
    if isinstance(node, Group):
        return [ZGROUP, ZATTRS] + ([ZMETADATA] if root else [])
    return [ZARRAY, ZATTRS]


def documents(node: Array | Group) -> dict[str, dict[str, Any]]:
    """The node's v2 documents by name."""
    if isinstance(node, Group):
        return {ZGROUP: {"zarr_format": 2}, ZATTRS: zattrs(node)}
    return {ZARRAY: zarray(node), ZATTRS: zattrs(node)}


def render(document: dict[str, Any]) -> bytes:
    # allow_nan: an attribute read as NaN or Infinity is written bare, as zarr-python 2
    # writes it in .zattrs (the documents' own fill values are spelled as strings)
    return (json.dumps(document, indent=4, sort_keys=True, ensure_ascii=True, allow_nan=True) + "\n").encode()


def consolidated(nodes: Iterable[tuple[str, Array | Group]]) -> bytes:
    """`.zmetadata`: the documents of every node shown, by key from the view's root."""
    metadata: dict[str, dict[str, Any]] = {}
    for path, node in nodes:
        for name, document in documents(node).items():
            metadata[f"{path}/{name}" if path else name] = document
    return render({"zarr_consolidated_format": 1, "metadata": metadata})


def chunk_name(coords: tuple[int, ...]) -> str:
    return SEPARATOR.join(map(str, coords)) if coords else "0"


def chunk_coords(name: str, grid: tuple[int, ...]) -> tuple[int, ...] | None:
    """The chunk a file name names in a grid (None where it names none)."""
    parts = name.split(SEPARATOR)
    if not grid:
        return () if name == "0" else None
    if len(parts) != len(grid):
        return None
    coords = []
    for part, extent in zip(parts, grid):
        if not part.isdigit() or not part.isascii() or (len(part) > 1 and part[0] == "0") or int(part) >= extent:
            return None
        coords.append(int(part))
    return tuple(coords)


def info_line(array: Array, path: str) -> str:
    """`info`'s line on the array's place in the v2 view, or why it has none."""
    reason = left_out(array)
    return f"left out: {reason}" if reason else f"/.zarrfs/v2/{path}".rstrip("/")
