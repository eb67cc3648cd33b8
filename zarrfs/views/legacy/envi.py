"""`data.hdr`: an ENVI header for the array's `data` file (band sequential, little-endian,
no header offset). GDAL's ENVI driver looks for `<file>.hdr` beside `<file>`, so with it
`gdalinfo data` opens the array as a raster: 2-D is one band of lines x samples, 3-D is
bands x lines x samples."""

from __future__ import annotations

from ...format import Array
from ..base import BytesView

# ENVI "data type" codes; bool is stored as bytes 0 and 1
_DATA_TYPES = {
    "b1": 1,
    "u1": 1,
    "i2": 2,
    "i4": 3,
    "f4": 4,
    "f8": 5,
    "c8": 6,
    "c16": 9,
    "u2": 12,
    "u4": 13,
    "i8": 14,
    "u8": 15,
}


def _data_type(array: Array) -> int | None:
    dtype = array.dtype.little_endian
    return _DATA_TYPES.get(f"{dtype.kind}{dtype.itemsize}")


def represents(array: Array) -> bool:
    """2-D and 3-D arrays of the types ENVI knows (not int8, not float16)."""
    return len(array.shape) in (2, 3) and _data_type(array) is not None


def render_hdr(array: Array) -> str:
    bands, lines, samples = (1, *array.shape) if len(array.shape) == 2 else array.shape
    name = (array.path or "/").replace("{", "(").replace("}", ")")  # braces end the field
    return (
        "ENVI\n"
        f"description = {{zarrfs view of the array {name}}}\n"
        f"samples = {samples}\n"
        f"lines = {lines}\n"
        f"bands = {bands}\n"
        "header offset = 0\n"
        "file type = ENVI Standard\n"
        f"data type = {_data_type(array)}\n"
        "interleave = bsq\n"
        "byte order = 0\n"
    )


def hdr_view(array: Array) -> BytesView:
    return BytesView(lambda: render_hdr(array).encode(), cheap=True)  # from the metadata alone
