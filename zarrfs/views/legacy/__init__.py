"""Read-only views for legacy tools (TIFF, NRRD, ENVI, CSV) over the same bytes as `data`.
Each module says which arrays its format can represent and renders its file on the fly;
an array with a zero-length dimension or a variable-length type shows none of them."""

from __future__ import annotations

from collections.abc import Callable

from ...format import Array
from .. import preview
from ..base import FileView, Neighbours
from ..georef import Georeference, georeference, overview_levels
from ..ngff import level_of
from . import csv, envi, nrrd, tiff


def legacy_views(array: Array, chunks=None, neighbours: Neighbours | None = None) -> dict[str, Callable[[], FileView]]:
    """The legacy-format files this array can be shown as, by name. Metadata only: the
    tree calls this to list an array directory. `chunks`: where TIFF and CSV read their
    chunks (as DataView); `neighbours`: where `data.tif` finds its georeferencing, and
    `data.tif` and `data.nhdr` the pixel size of an OME-Zarr image the array is a level of."""
    if array.dtype.variable_length or 0 in array.shape:
        return {}
    views: dict[str, Callable[[], FileView]] = {}
    # the image formats know numbers only (int2/int4 are int8 values in `data`)
    if array.dtype.kind in ("numeric", "subbyte_int"):
        if tiff.represents(array):
            views["data.tif"] = lambda: _tiff_view(array, chunks, neighbours)
        if nrrd.represents(array):
            views["data.nhdr"] = lambda: _nhdr_view(array, neighbours)
        if envi.represents(array):
            views["data.hdr"] = lambda: envi.hdr_view(array)
    if csv.represents(array):
        views["data.csv"] = lambda: csv.CsvView(array, chunks)
    if preview.picture_axes(array) is not None:  # (no legacy format, but listed as they are)
        views[preview.NAME] = lambda: preview.array_preview(array, chunks, neighbours)
    return views


def _tiff_view(array: Array, chunks, neighbours: Neighbours | None) -> tiff.TiffView:
    """A GeoTIFF where the array is georeferenced, with the smaller levels of a pyramid it
    is a level of as overviews."""
    geo = georeference(array, neighbours) if neighbours is not None else None
    if neighbours is None or not isinstance(geo, Georeference):
        level = level_of(array, neighbours) if neighbours is not None else None
        pixel_size = level[0].pixel_size_cm(level[1]) if level is not None else None
        return tiff.TiffView(array, chunks, pixel_sizes=[pixel_size])
    overviews = [(level, neighbours.chunks_of(level)) for level in overview_levels(array, geo, neighbours)]
    return tiff.TiffView(array, chunks, geo=geo, overviews=overviews)


def _nhdr_view(array: Array, neighbours: Neighbours | None):
    """With the spacing and units of an OME-Zarr image the array is a level of."""
    level = level_of(array, neighbours) if neighbours is not None else None
    if level is None:
        return nrrd.nhdr_view(array)
    image, k = level
    space = [(image.levels[k].scale[i], image.units[i]) if d in "ZYX" else None for i, d in enumerate(image.dims)]
    return nrrd.nhdr_view(array, space)
