"""An array's fill value as other programs declare it: xarray's and CF's `_FillValue`
(which the NetCDF view writes) and GDAL's nodata text (which the GeoTIFF views write)."""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from typing import Any

import numpy as np

from ..format import Array


def nodata_text(array: Array) -> str | None:
    """GDAL's nodata text: the CF fill value, else (Zarr v3) the array's fill value."""
    value = cf_fill_value(array)
    if value is None and array.metadata.zarr_format == 3:
        value = array.fill_value
    if value is None or isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return str(int(value))  # exactly: a 64-bit integer's text through float loses digits
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if math.isnan(number):
        return "nan"
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    if number == int(number) and abs(number) < 2**63:
        return str(int(number))
    return repr(number)


def cf_fill_value(array: Array) -> Any:
    """The `_FillValue` xarray reads from the store, or None: Zarr v2's fill value unless
    null; in v3 the `_FillValue` attribute (a float's written as the base64 of its bytes)."""
    if array.metadata.zarr_format == 2:
        try:
            declared = json.loads(array.documents.get(".zarray", b"{}")).get("fill_value", 0)
        except (ValueError, AttributeError):
            declared = 0
        return None if declared is None else array.fill_value
    value = array.metadata.attributes.get("_FillValue")
    if isinstance(value, str) and array.dtype.numpy.kind == "f":
        value = _base64_float(value)
        if isinstance(value, str):
            try:
                value = float(value)  # NaN, Infinity
            except ValueError:
                return None
    if isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
        return None
    return value


def _base64_float(text: str) -> Any:
    """xarray writes a float `_FillValue` of Zarr v3 as the base64 of its 8 bytes;
    the names Zarr's JSON gives NaN and infinities come as they are."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        return text
    return struct.unpack("<d", raw)[0] if len(raw) == 8 else text
