"""Read-only views for legacy tools (TIFF, NRRD, ENVI, CSV) over the same bytes as `data`.
Each module says which arrays its format can represent and renders its file on the fly;
an array with a zero-length dimension or a variable-length type shows none of them. Each
file is a row of the catalogue (views/catalogue.py), which names it."""

from __future__ import annotations

from typing import Any

from ...format import Array
from ..base import BytesView, Neighbours
from ..georef import Georeference, georeference, overview_levels
from ..ngff import level_of
from . import csv, envi, nrrd, tiff


def _shown(array: Array) -> bool:
    return not array.dtype.variable_length and 0 not in array.shape


def _image(array: Array) -> bool:
    """The image formats know numbers only (int2/int4 are int8 values in `data`)."""
    return _shown(array) and array.dtype.kind in ("numeric", "subbyte_int")


# which arrays show each (metadata only: a listing asks)
def shows_tiff(array: Array) -> bool:
    return _image(array) and tiff.represents(array)


def shows_nhdr(array: Array) -> bool:
    return _image(array) and nrrd.represents(array)


def shows_hdr(array: Array) -> bool:
    return _image(array) and envi.represents(array)


def shows_csv(array: Array) -> bool:
    return _shown(array) and csv.represents(array)


def tiff_view(array: Array, chunks: Any, neighbours: Neighbours | None) -> tiff.TiffView:
    """`data.tif`: where TIFF reads its chunks (as DataView); its neighbours: where it
    finds its georeferencing and the pixel size of an OME-Zarr image the array is a level
    of. A GeoTIFF where the array is georeferenced, with the smaller levels of a pyramid it
    is a level of as overviews."""
    geo = georeference(array, neighbours) if neighbours is not None else None
    if neighbours is None or not isinstance(geo, Georeference):
        level = level_of(array, neighbours) if neighbours is not None else None
        pixel_size = level[0].pixel_size_cm(level[1]) if level is not None else None
        return tiff.TiffView(array, chunks, pixel_sizes=[pixel_size])
    overviews = [(level, neighbours.chunks_of(level)) for level in overview_levels(array, geo, neighbours)]
    return tiff.TiffView(array, chunks, geo=geo, overviews=overviews)


def nhdr_view(array: Array, neighbours: Neighbours | None) -> BytesView:
    """`data.nhdr`, with the spacing and units of an OME-Zarr image the array is a level
    of."""
    level = level_of(array, neighbours) if neighbours is not None else None
    if level is None:
        return nrrd.nhdr_view(array)
    image, k = level
    space = [(image.levels[k].scale[i], image.units[i]) if d in "ZYX" else None for i, d in enumerate(image.dims)]
    return nrrd.nhdr_view(array, space)
