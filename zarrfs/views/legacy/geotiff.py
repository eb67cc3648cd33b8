"""The GeoTIFF tags of a georeferenced `data.tif`: the model transform (pixel scale and
tie point, or the whole matrix where the grid is rotated or south-up), the GeoKey
directory (an EPSG code, or the WKT as GDAL writes a CRS without one), and GDAL_NODATA."""

from __future__ import annotations

from ..georef import Georeference
from .tiff_ifd import ASCII, DOUBLE, SHORT, Tag

MODEL_PIXEL_SCALE, MODEL_TIEPOINT, MODEL_TRANSFORMATION = 33550, 33922, 34264
GEO_KEY_DIRECTORY, GEO_ASCII_PARAMS, GDAL_NODATA = 34735, 34737, 42113
MODEL_TYPE, RASTER_TYPE, GEOGRAPHIC_TYPE, PROJECTED_TYPE, PCS_CITATION = 1024, 1025, 2048, 3072, 3073
USER_DEFINED = 32767
# GDAL reads a user-defined CRS back from this citation (its GEOTIFF_KEYS_FLAVOR=ESRI_PE)
_WKT_CITATION = "ESRI PE String = "


def reserved_tags(geo: Georeference | None) -> list[Tag]:
    """Tags as large as the georeferencing can need, from the metadata alone: a transform
    read from coordinates later takes at most the room of the whole matrix."""
    if geo is None:
        return []
    transform = geo.known_transform if geo.known_transform is not None else (0.0, 1.0, 1.0, 0.0, 1.0, 1.0)
    return _tags(geo, transform)


def geo_tags(geo: Georeference | None) -> list[Tag]:
    """The georeferencing tags (may read the coordinate arrays; none where they turn out
    irregular)."""
    if geo is None:
        return []
    transform, _ = geo.transform()
    return _tags(geo, transform) if transform is not None else []


def _tags(geo: Georeference, transform: tuple[float, ...]) -> list[Tag]:
    x0, dx, rx, y0, ry, dy = transform
    if rx == 0 and ry == 0 and dy < 0:
        tags: list[Tag] = [
            (MODEL_PIXEL_SCALE, DOUBLE, [dx, -dy, 0.0]),
            (MODEL_TIEPOINT, DOUBLE, [0.0, 0.0, 0.0, x0, y0, 0.0]),
        ]
    else:
        tags = [
            (MODEL_TRANSFORMATION, DOUBLE, [dx, rx, 0.0, x0, ry, dy, 0.0, y0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
        ]
    keys, text = _geo_keys(geo)
    tags.append((GEO_KEY_DIRECTORY, SHORT, keys))
    if text:
        tags.append((GEO_ASCII_PARAMS, ASCII, text))
    if geo.nodata is not None:
        tags.append((GDAL_NODATA, ASCII, geo.nodata.encode() + b"\0"))
    tags.sort(key=lambda tag: tag[0])
    return tags


def _geo_keys(geo: Georeference) -> tuple[list[int], bytes]:
    """The GeoKey directory (version 1.1.0) and the ASCII parameters it points into."""
    keys = {RASTER_TYPE: (0, 1, 2 if geo.point else 1)}
    text = b""
    crs = geo.crs
    if crs is not None and crs.epsg is not None and crs.epsg < USER_DEFINED:
        keys[MODEL_TYPE] = (0, 1, 2 if crs.geographic else 1)
        keys[GEOGRAPHIC_TYPE if crs.geographic else PROJECTED_TYPE] = (0, 1, crs.epsg)
    elif crs is not None and crs.wkt:
        citation = (_WKT_CITATION + crs.wkt.replace("|", " ") + "|").encode("ascii", "replace")
        keys[MODEL_TYPE] = (0, 1, USER_DEFINED)
        keys[PROJECTED_TYPE] = (0, 1, USER_DEFINED)
        keys[PCS_CITATION] = (GEO_ASCII_PARAMS, len(citation), 0)
        text = citation + b"\0"
    directory = [1, 1, 0, len(keys)]
    for key in sorted(keys):
        directory += [key, *keys[key]]
    return directory, text
