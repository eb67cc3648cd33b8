"""Coordinate reference systems as the data declares them (EPSG codes, WKT 1 and 2,
PROJJSON, GeoZarr's `proj:` attributes), read without a projection library: what the
georeferencing (georef.py) and the GeoTIFF keys need of them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# EPSG geographic 2-D CRSs outside the 4000-4999 block, which holds most of them
_GEOGRAPHIC_CODES = {
    6318,
    6319,
    6322,
    6325,
    6668,
    6706,
    7683,
    7844,
    8252,
    8255,
    8351,
    8427,
    8545,
    9000,
    9139,
    9153,
    9248,
    9251,
    9253,
    9299,
    9364,
    9403,
    9453,
    9777,
    9782,
    10176,
    10183,
    10194,
    20033,
    20041,
    20046,
}


@dataclass(frozen=True)
class Crs:
    """A CRS as the data declares it: an EPSG code, WKT, or both."""

    epsg: int | None = None
    wkt: str | None = None
    geographic: bool = False

    def describe(self) -> str:
        if self.epsg is not None:
            return f"EPSG:{self.epsg}"
        name = re.match(r'\s*\w+\s*[\[(]\s*"([^"]*)"', self.wkt or "")
        return f"WKT {name.group(1)!r}" if name else "WKT"


def crs_of_proj(proj: dict[str, Any]) -> Crs | None:
    """The CRS of a GeoZarr `proj:` attribute set: its code, WKT2 or PROJJSON."""
    code = epsg_of_text(proj.get("proj:code"))
    wkt = proj.get("proj:wkt2") if isinstance(proj.get("proj:wkt2"), str) else None
    if code is not None:
        return Crs(code, wkt, geographic(code, wkt))
    if wkt:
        return crs_of_wkt(wkt)
    if isinstance(proj.get("proj:projjson"), dict):
        return crs_of_projjson(proj["proj:projjson"])
    return None


def crs_of_projjson(projjson: dict[str, Any]) -> Crs | None:
    ident = projjson.get("id")
    if isinstance(ident, dict) and str(ident.get("authority")).upper() == "EPSG":
        try:
            code = int(ident["code"])
        except (KeyError, TypeError, ValueError):
            return None
        return Crs(code, None, projjson.get("type") == "GeographicCRS" or _is_geographic_code(code))
    return None


def crs_of_wkt(wkt: str) -> Crs:
    """A WKT (1 or 2) CRS, with its EPSG code where its outermost element names one."""
    text = wkt.strip()
    geographic = bool(re.match(r"(GEOGCS|GEOGCRS|GEODCRS|GEOGRAPHICCRS)\s*\[", text, re.I))
    epsg = None
    # the outermost element's identifier is the last one, just before its closing bracket
    tail = re.search(r'(?:ID|AUTHORITY)\s*\[\s*"EPSG"\s*,\s*"?(\d+)"?\s*(?:,[^\[\]]*)?\]\s*\]\s*$', text, re.I)
    if tail:
        epsg = int(tail.group(1))
    return Crs(epsg, text, geographic)


def epsg_of_text(value: Any) -> int | None:
    """An EPSG code given as "EPSG:n" or as a bare integer."""
    if isinstance(value, str):
        found = re.fullmatch(r"\s*EPSG:(\d+)\s*", value, re.I)
        return int(found.group(1)) if found else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def geographic(code: int, wkt: str | None) -> bool:
    """Whether a CRS of this code (and WKT, where given, which decides) is geographic."""
    return crs_of_wkt(wkt).geographic if wkt else _is_geographic_code(code)


def _is_geographic_code(code: int) -> bool:
    return 4000 <= code <= 4999 or code in _GEOGRAPHIC_CODES


def is_wgs84(gm: dict[str, Any]) -> bool:
    """Whether a CF grid mapping's ellipsoid, where it gives one, is WGS 84's."""
    for key, wgs84, tolerance in (("semi_major_axis", 6378137.0, 1e-3), ("inverse_flattening", 298.257223563, 1e-6)):
        value = gm.get(key)
        if value is not None and not (isinstance(value, (int, float)) and abs(value - wgs84) < tolerance):
            return False
    return True
