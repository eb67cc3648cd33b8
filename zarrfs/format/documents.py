"""The metadata documents zarrfs writes for new nodes (`mkdir`, a new array from `.npy`,
the demo): v3 and v2, as zarr-python writes them; parsed back by metadata.py like any
other document."""

from __future__ import annotations

import math
from typing import Any


def group_document_v3(attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"zarr_format": 3, "node_type": "group", "attributes": attributes or {}}


def default_chunk_shape(shape: tuple[int, ...], itemsize: int, target: int = 1 << 20) -> tuple[int, ...]:
    """About `target` bytes per chunk: halve the longest dimension until the chunk fits."""
    chunk = [max(1, n) for n in shape]
    while math.prod(chunk) * itemsize > target and max(chunk) > 1:
        i = chunk.index(max(chunk))
        chunk[i] = -(-chunk[i] // 2)
    return tuple(chunk)


def array_document_v2(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    dtype: str | list[Any],
    fill_value: Any,
    *,
    compressor: dict[str, Any] | None,
    filters: list[Any] | None = None,
    order: str = "C",
    separator: str = ".",
) -> dict[str, Any]:
    """A v2 `.zarray` document."""
    return {
        "zarr_format": 2,
        "shape": list(shape),
        "chunks": list(chunks),
        "dtype": dtype,
        "compressor": compressor,
        "fill_value": fill_value,
        "order": order,
        "filters": filters,
        "dimension_separator": separator,
    }


def array_document_v3(
    shape: tuple[int, ...],
    chunk_shape: tuple[int, ...],
    data_type: Any,
    fill_value: Any,
    codecs: list[Any],
    *,
    dimension_names: list[Any] | None = None,
    attributes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A v3 array `zarr.json` document with a regular grid and default chunk keys;
    `data_type` is a name or a data type object (`DataType.json`)."""
    document = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk_shape)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": codecs,
        "attributes": attributes or {},
    }
    if dimension_names is not None:
        document["dimension_names"] = dimension_names
    return document
