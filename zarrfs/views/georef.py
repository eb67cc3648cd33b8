"""Where an array's pixels lie on the Earth (docs/semantics.md, "Views carry what the conventions
say"): the CRS and affine transform read from the GeoZarr `proj:`/`spatial:` conventions,
CF `grid_mapping` variables, GDAL's `_CRS`, or regular 1-D coordinate arrays, in that order."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..format import Array, Group
from ..store.keys import join_path
from .base import Neighbours
from .crs import Crs, crs_of_proj, crs_of_projjson, crs_of_wkt, epsg_of_text, geographic, is_wgs84
from .fill import nodata_text

_Y_NAMES = ("y", "lat", "latitude", "northing", "rlat", "nav_lat")
_X_NAMES = ("x", "lon", "longitude", "easting", "rlon", "nav_lon")
_DEGREES_NORTH = {"degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn"}
_DEGREES_EAST = {"degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese"}
# coordinates count as regular when each step is within this fraction of the mean step
# (float32 coordinates of a regular grid are off by about this much)
_REGULAR_TOLERANCE = 1e-4
# the widest "%.17g" of a float64: a sign, 17 digits, the point and a three-digit
# exponent ("-1.2345678901234567e-308"); a value computed from coordinates of a narrower
# type (float32, any integer) keeps within two exponent digits, one character less
_WIDEST_NUMBER = 24


@dataclass
class Georeference:
    """An array's georeferencing: which dimensions are Y and X, the CRS, the transform in
    GDAL's order (x0, dx, rx, y0, ry, dy) from the corner of the first pixel, and where
    each came from. A transform taken from coordinate values is read on first use."""

    y_dim: int
    x_dim: int
    crs: Crs | None
    source: str
    point: bool = False  # pixels are points (GeoTIFF PixelIsPoint), not areas
    nodata: str | None = None
    known_transform: tuple[float, ...] | None = None
    coordinates: tuple[Array, Array] | None = None  # (y, x): the transform follows from their values
    transform_source: str = ""
    _resolved: list[tuple[tuple[float, ...] | None, str | None]] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def transform(self) -> tuple[tuple[float, ...] | None, str | None]:
        """(transform, None), or (None, why there is none): reads the coordinates once."""
        if self.known_transform is not None:
            return self.known_transform, None
        with self._lock:
            if not self._resolved:
                assert self.coordinates is not None  # made with a known_transform or with coordinates
                self._resolved.append(_transform_of_coordinates(*self.coordinates, self.point))
            return self._resolved[0]

    def band_dim(self, ndim: int) -> int | None:
        """The dimension of a 3-D array that is neither Y nor X."""
        return None if ndim == 2 else ({0, 1, 2} - {self.y_dim, self.x_dim}).pop()


@dataclass(frozen=True)
class NotGeoreferenced:
    """Why an array with some georeferencing hints is not shown as a GeoTIFF."""

    reason: str


# what a source of georeferencing finds: it, why there is none despite hints, or no hint
Found = Georeference | NotGeoreferenced | None
Names = tuple[Any, ...] | None  # an array's dimension names (dimension_names)


def dimension_names(array: Array) -> tuple[Any, ...] | None:
    """v3 `dimension_names`, else v2 xarray's `_ARRAY_DIMENSIONS` attribute."""
    names = array.metadata.dimension_names
    if names is None:
        names = array.metadata.attributes.get("_ARRAY_DIMENSIONS")
        if not isinstance(names, list) or len(names) != len(array.shape):
            return None
    return tuple(names)


def georeference(array: Array, neighbours: Neighbours) -> Georeference | NotGeoreferenced | None:
    """The georeferencing of a 2-D or 3-D array from its metadata and its neighbours'
    (no chunk read), or why it has none despite hints; None where nothing hints at any."""
    if len(array.shape) not in (2, 3):
        return None
    attrs = array.metadata.attributes
    names = dimension_names(array)
    nodata = nodata_text(array)
    for source in (_geozarr, _cf_grid_mapping, _gdal_crs, _coordinates):
        found = source(array, attrs, names, neighbours)
        if found is not None:
            if isinstance(found, Georeference):
                found.nodata = nodata
            return found
    return None


# ------------------------------------------------------------------ sources


def _geozarr(array: Array, attrs: dict[str, Any], names: Names, neighbours: Neighbours) -> Found:
    own = {k: v for k, v in attrs.items() if k.startswith(("proj:", "spatial:"))}
    parent = _inherited(neighbours)
    if not own and not parent:
        return None
    # geo-proj: a group's CRS applies to its child arrays unless an array declares its own
    proj = {k: v for k, v in own.items() if k.startswith("proj:")} or {
        k: v for k, v in parent.items() if k.startswith("proj:")
    }
    spatial = {
        **{k: v for k, v in parent.items() if k.startswith("spatial:")},
        **{k: v for k, v in own.items() if k.startswith("spatial:")},
    }
    if not proj and "spatial:transform" not in spatial:
        return None
    where = "GeoZarr " + ", ".join(
        sorted({*proj, *(k for k in spatial if k in ("spatial:transform", "spatial:dimensions"))})
    )
    crs = crs_of_proj(proj)
    dims = spatial.get("spatial:dimensions")
    y_dim, x_dim, why = _spatial_dims(array, names, dims[-2:] if isinstance(dims, list) and len(dims) >= 2 else None)
    if why:
        return NotGeoreferenced(f"{where}: {why}")
    point = spatial.get("spatial:registration") == "node"
    transform = spatial.get("spatial:transform")
    if spatial.get("spatial:transform_type", "affine") != "affine":
        return NotGeoreferenced(f"{where}: transform type {spatial['spatial:transform_type']!r} is not affine")
    if isinstance(transform, list) and len(transform) >= 6 and all(isinstance(v, (int, float)) for v in transform[:6]):
        a, b, c, d, e, f = (float(v) for v in transform[:6])
        return Georeference(
            y_dim, x_dim, crs, where, point, known_transform=(c, a, b, f, d, e), transform_source="spatial:transform"
        )
    return _with_coordinates(array, names, y_dim, x_dim, crs, where, neighbours, point)


def _cf_grid_mapping(array: Array, attrs: dict[str, Any], names: Names, neighbours: Neighbours) -> Found:
    mapping = attrs.get("grid_mapping")
    if not isinstance(mapping, str) or not mapping.strip():
        return None
    name = mapping.split()[0].rstrip(":")
    variable = neighbours.sibling(name)
    where = f"CF grid_mapping {name!r}"
    if variable is None:
        return NotGeoreferenced(f"{where}: no such array beside this one")
    gm = variable.metadata.attributes
    wkt = next((gm[k] for k in ("crs_wkt", "spatial_ref") if isinstance(gm.get(k), str) and gm[k].strip()), None)
    if wkt is not None:
        crs = crs_of_wkt(wkt)
    elif gm.get("grid_mapping_name") == "latitude_longitude" and is_wgs84(gm):
        crs = Crs(4326, None, True)
    else:
        crs = None
        epsg = epsg_of_text(gm.get("epsg_code"))
        if epsg is not None:
            crs = Crs(epsg, None, geographic(epsg, None))
    if crs is None:
        return NotGeoreferenced(
            f"{where}: grid mapping {gm.get('grid_mapping_name')!r} without crs_wkt is not translated"
        )
    y_dim, x_dim, why = _spatial_dims(array, names, None)
    if why:
        return NotGeoreferenced(f"{where}: {why}")
    geotransform = gm.get("GeoTransform")
    if isinstance(geotransform, str):
        try:
            values = tuple(float(v) for v in geotransform.split())
        except ValueError:
            values = ()
        if len(values) == 6:
            return Georeference(
                y_dim, x_dim, crs, where, known_transform=values, transform_source=f"{name}:GeoTransform"
            )
    return _with_coordinates(array, names, y_dim, x_dim, crs, where, neighbours)


def _gdal_crs(array: Array, attrs: dict[str, Any], names: Names, neighbours: Neighbours) -> Found:
    declared = attrs.get("_CRS")
    if not isinstance(declared, dict):
        return None
    crs = None
    url = declared.get("url")
    if isinstance(url, str):
        found = re.search(r"/EPSG/\d+/(\d+)$", url)
        if found:
            wkt = declared.get("wkt") if isinstance(declared.get("wkt"), str) else None
            crs = Crs(int(found.group(1)), wkt, geographic(int(found.group(1)), wkt))
    if crs is None and isinstance(declared.get("wkt"), str):
        crs = crs_of_wkt(declared["wkt"])
    if crs is None and isinstance(declared.get("projjson"), dict):
        crs = crs_of_projjson(declared["projjson"])
    where = "GDAL _CRS"
    if crs is None:
        return NotGeoreferenced(f"{where}: neither an EPSG url nor WKT")
    y_dim, x_dim, why = _spatial_dims(array, names, None)
    if why:
        return NotGeoreferenced(f"{where}: {why}")
    point = str(attrs.get("AREA_OR_POINT", "")).lower() == "point"
    return _with_coordinates(array, names, y_dim, x_dim, crs, where, neighbours, point)


def _coordinates(array: Array, attrs: dict[str, Any], names: Names, neighbours: Neighbours) -> Found:
    if names is None:
        return None
    y_dim, x_dim, why = _spatial_dims(array, names, None)
    lowered = (str(names[y_dim]).lower(), str(names[x_dim]).lower())
    if why or lowered[0] not in _Y_NAMES or lowered[1] not in _X_NAMES:
        return None  # (coordinates are looked for only where the names say Y and X)
    y, x = neighbours.sibling(names[y_dim]), neighbours.sibling(names[x_dim])
    if y is None or x is None:
        return None
    units = (str(y.metadata.attributes.get("units", "")).lower(), str(x.metadata.attributes.get("units", "")).lower())
    geographic = units[0] in _DEGREES_NORTH and units[1] in _DEGREES_EAST
    crs = Crs(4326, None, True) if geographic else None
    where = f"coordinates {names[y_dim]!r}, {names[x_dim]!r}" + (" in degrees (WGS 84)" if geographic else "")
    return _with_coordinates(array, names, y_dim, x_dim, crs, where, neighbours)


def _with_coordinates(
    array: Array,
    names: Names,
    y_dim: int,
    x_dim: int,
    crs: Crs | None,
    where: str,
    neighbours: Neighbours,
    point: bool = False,
) -> Found:
    """The georeference whose transform follows from the 1-D coordinate arrays of the
    spatial dimensions, once their values are read."""
    if names is None:
        return NotGeoreferenced(f"{where}: no transform, and no dimension names to find coordinates by")
    y, x = neighbours.sibling(names[y_dim]), neighbours.sibling(names[x_dim])
    for dim, coordinate in ((y_dim, y), (x_dim, x)):
        if coordinate is None:
            return NotGeoreferenced(f"{where}: no transform, and no coordinate array {names[dim]!r}")
        if coordinate.shape != (array.shape[dim],) or coordinate.dtype.kind != "numeric":
            return NotGeoreferenced(
                f"{where}: coordinate array {names[dim]!r} is not 1-D numbers of the dimension's length"
            )
    return Georeference(
        y_dim,
        x_dim,
        crs,
        where,
        point,
        coordinates=(y, x),
        transform_source=f"regular coordinates {names[y_dim]!r}, {names[x_dim]!r}",
    )


# why coordinates give no transform, after their name
_NO_TRANSFORM = ("has one value: no pixel size", "is irregular: not georeferenced")


def _transform_of_coordinates(y: Array, x: Array, point: bool) -> tuple[tuple[float, ...] | None, str | None]:
    """From the coordinates of pixel centres: the corner of the first pixel, or its centre
    where pixels are points (GeoTIFF ties a point raster to the centres)."""
    steps = []
    for coordinate in (y, x):
        values = np.asarray(coordinate.read(), dtype=np.float64)
        if len(values) < 2:
            return None, f"coordinate {coordinate.path.rpartition('/')[2]!r} {_NO_TRANSFORM[0]}"
        diffs = np.diff(values)
        step = (values[-1] - values[0]) / (len(values) - 1)
        if step == 0 or not np.all(np.abs(diffs - step) <= _REGULAR_TOLERANCE * abs(step)):
            return None, f"coordinate {coordinate.path.rpartition('/')[2]!r} {_NO_TRANSFORM[1]}"
        steps.append((float(values[0]), float(step)))
    (y0, dy), (x0, dx) = steps
    half = 0.0 if point else 0.5
    return (x0 - dx * half, dx, 0.0, y0 - dy * half, 0.0, dy), None


def overview_levels(array: Array, geo: Georeference, neighbours: Neighbours) -> list[Array]:
    """The other levels of a `multiscales` pyramid (zarr-conventions multiscales) the
    array is a level of, that are smaller in Y and X and alike otherwise, largest first.
    The array is a level itself (array layout), or one of a level group (group layout:
    the array of the same name in each other level)."""
    parent, _, name = neighbours.path.rpartition("/")
    places = [(parent, name, "")]
    if parent:
        above, _, level = parent.rpartition("/")
        places.append((above, level, "/" + name))
    for group_path, asset, suffix in places:
        assets = _pyramid_levels(neighbours.node(group_path))
        if asset not in assets:
            continue
        levels = []
        for other in assets:
            if not isinstance(other, str) or other == asset or other.startswith("/") or ".." in other.split("/"):
                continue
            node = neighbours.node(join_path(group_path, other + suffix))
            if isinstance(node, Array) and _reduces(node, array, geo):
                levels.append(node)
        levels.sort(key=lambda a: -a.shape[geo.y_dim] * a.shape[geo.x_dim])
        return [a for i, a in enumerate(levels) if i == 0 or a.shape != levels[i - 1].shape]
    return []


def _reduces(level: Array, array: Array, geo: Georeference) -> bool:
    """Whether `level` can be an overview of `array`: the same data type and bands, and
    fewer pixels in Y and X."""
    if level.dtype.numpy != array.dtype.numpy or len(level.shape) != len(array.shape):
        return False
    spatial = (geo.y_dim, geo.x_dim)
    if any(level.shape[d] != array.shape[d] for d in range(len(array.shape)) if d not in spatial):
        return False
    smaller = [level.shape[d] <= array.shape[d] for d in spatial]
    return all(smaller) and level.shape != array.shape and all(level.shape[d] > 0 for d in spatial)


# ------------------------------------------------------------------ pieces


def _inherited(neighbours: Neighbours) -> dict[str, Any]:
    """The `proj:`/`spatial:` attributes an array takes from its group, or where that
    group is a level of a multiscale pyramid and declares none, from the pyramid's."""

    def geo(attrs: Any) -> dict[str, Any]:
        return (
            {k: v for k, v in attrs.items() if k.startswith(("proj:", "spatial:"))} if isinstance(attrs, dict) else {}
        )

    found = geo(neighbours.parent_attributes())
    parent = neighbours.path.rpartition("/")[0]
    if found or not parent:
        return found
    above, _, level = parent.rpartition("/")
    pyramid = neighbours.node(above)
    return geo(pyramid.attributes) if isinstance(pyramid, Group) and level in _pyramid_levels(pyramid) else {}


def _pyramid_levels(node: Array | Group | None) -> list[Any]:
    """The `asset` of each level of a group's `multiscales` layout (none for others)."""
    layout = node.attributes.get("multiscales") if isinstance(node, Group) else None
    layout = layout.get("layout") if isinstance(layout, dict) else None
    return [item.get("asset") for item in layout if isinstance(item, dict)] if isinstance(layout, list) else []


def _spatial_dims(array: Array, names: Names, declared: list[Any] | None) -> tuple[int, int, str | None]:
    """(y, x, None), or (0, 0, why): Y then X, adjacent, the last two of a 2-D or 3-D
    array or the first two of a 3-D one (then samples of a pixel)."""
    ndim = len(array.shape)
    if declared is not None:
        if names is None or declared[0] not in names or declared[1] not in names:
            return 0, 0, f"spatial dimensions {declared} are not the array's dimension names {names}"
        y_dim, x_dim = names.index(declared[0]), names.index(declared[1])
    elif names is not None:
        lowered = [str(n).lower() for n in names]
        ys = [i for i, n in enumerate(lowered) if n in _Y_NAMES]
        xs = [i for i, n in enumerate(lowered) if n in _X_NAMES]
        if len(ys) != 1 or len(xs) != 1:
            if ndim == 2:
                return 0, 1, None  # a 2-D array's rows and columns are Y and X
            return 0, 0, f"no Y and X among the dimensions {list(names)}"
        y_dim, x_dim = ys[0], xs[0]
    else:
        if ndim != 2:
            return 0, 0, "a 3-D array without dimension names: which are Y and X is not known"
        y_dim, x_dim = 0, 1
    if x_dim != y_dim + 1 or (ndim == 3 and y_dim not in (0, 1)):
        return 0, 0, f"dimensions Y={y_dim}, X={x_dim} are not adjacent rows then columns"
    return y_dim, x_dim, None


def describe(found: Georeference | NotGeoreferenced, resolved: bool) -> list[tuple[str, str]]:
    """`info`'s lines about the georeferencing, as (label, value). Without `resolved`, a
    transform from coordinate values is blanks of the width it can have (not read yet)."""
    if isinstance(found, NotGeoreferenced):
        return [("georeferencing", "none: " + found.reason)]
    crs = found.crs.describe() if found.crs else "none declared"
    if found.crs is not None and found.crs.epsg is not None and found.crs.wkt:
        crs += " (WKT also given)"
    lines = [("georeferencing", found.source), ("crs", crs)]
    if found.known_transform is not None:
        lines.append(("transform", f"{_transform_text(found.known_transform)} (from {found.transform_source})"))
    else:
        width = _coordinates_width(found)
        text = ""
        if resolved:
            transform, why = found.transform()
            if transform:
                text = f"{_transform_text(transform)} (from {found.transform_source})"
            else:
                assert why is not None  # transform() gives a transform or why there is none
                text = "none: " + why
        lines.append(("transform", text.ljust(width)[:width]))
    lines.append(("pixels are", "points" if found.point else "areas"))
    lines.append(("nodata", found.nodata if found.nodata is not None else "none"))
    return lines


def _coordinates_width(found: Georeference) -> int:
    """The widest the transform line read from coordinates can be, from their metadata
    alone (sizes read no chunk): its rotation terms are zero ("0"), each other number at
    most as wide as the coordinates' type can make it; or the longest reason for none."""
    assert found.coordinates is not None  # (a transform not known is read from coordinates)
    widest = max(_number_width(c.dtype.numpy) for c in found.coordinates)
    numbers = 2 + 4 * widest + 2 * len("0") + 5 * len(", ")
    reasons = (
        f"none: coordinate {c.path.rpartition('/')[2]!r} {why}" for c in found.coordinates for why in _NO_TRANSFORM
    )
    return max(numbers + len(f" (from {found.transform_source})"), *map(len, reasons))


def _number_width(dtype: np.dtype) -> int:
    double = (dtype.kind == "f" and dtype.itemsize >= 8) or (dtype.kind == "c" and dtype.itemsize >= 16)
    return _WIDEST_NUMBER if double else _WIDEST_NUMBER - 1


def _transform_text(transform: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{v:.17g}" for v in transform) + ")"
