"""The netCDF-3 file format's pieces (classic, 64-bit offset, CDF-5): its types, how
numpy's map to them, its limits, and the encoding of its header and attributes. Which
arrays a `dataset.nc` holds, and where, is netcdf.py's plan."""

from __future__ import annotations

import re
import struct
from typing import Any

import numpy as np

NC_BYTE, NC_CHAR, NC_SHORT, NC_INT, NC_FLOAT, NC_DOUBLE = 1, 2, 3, 4, 5, 6
NC_UBYTE, NC_USHORT, NC_UINT, NC_INT64, NC_UINT64 = 7, 8, 9, 10, 11
NC_DIMENSION, NC_VARIABLE, NC_ATTRIBUTE = 0x0A, 0x0B, 0x0C
CLASSIC_TYPES = {"i1": NC_BYTE, "b1": NC_BYTE, "i2": NC_SHORT, "i4": NC_INT, "f4": NC_FLOAT, "f8": NC_DOUBLE}
CDF5_TYPES = {"u1": NC_UBYTE, "u2": NC_USHORT, "u4": NC_UINT, "i8": NC_INT64, "u8": NC_UINT64}
NC_DTYPE = {
    NC_BYTE: ">i1",
    NC_CHAR: "S1",
    NC_SHORT: ">i2",
    NC_INT: ">i4",
    NC_FLOAT: ">f4",
    NC_DOUBLE: ">f8",
    NC_UBYTE: ">u1",
    NC_USHORT: ">u2",
    NC_UINT: ">u4",
    NC_INT64: ">i8",
    NC_UINT64: ">u8",
}
# in a 64-bit offset file a variable's size field holds at most this (larger: CDF-5)
CDF2_VSIZE_LIMIT = (1 << 32) - 4
CDF2_DIM_LIMIT = (1 << 31) - 1
# attributes the format spells otherwise (xarray's v2 dimension names), or that a
# variable writes in its own type (netcdf.py)
_DROPPED_ATTRIBUTES = {"_ARRAY_DIMENSIONS", "_FillValue"}
_SURROGATE = re.compile("[\ud800-\udfff]")
CDF5_ONLY = {NC_UBYTE, NC_USHORT, NC_UINT, NC_INT64, NC_UINT64}
TYPE_NAMES = {NC_UBYTE: "uint8", NC_USHORT: "uint16", NC_UINT: "uint32", NC_INT64: "int64", NC_UINT64: "uint64"}


def encode_attributes(attributes: dict[str, Any], boolean: bool) -> list[tuple[str, int, bytes, int]]:
    """The attributes netCDF-3 can hold (text, numbers, lists of numbers), as (name, nc
    type, big-endian values, count). Others (nested objects, lists of text) are left out."""
    out, spelled = [], set()
    for name, value in attributes.items():
        if name in _DROPPED_ATTRIBUTES or not isinstance(name, str) or not name or utf8(name) in spelled:
            continue  # (the first of names that differ only in lone surrogates, U+FFFD in UTF-8)
        encoded = _attribute(value)
        if encoded is not None:
            out.append((name, *encoded))
            spelled.add(utf8(name))
    if boolean:  # xarray's mark of a boolean variable stored as bytes
        out.append(("dtype", NC_CHAR, b"bool", 4))
    return out


def _attribute(value: Any) -> tuple[int, bytes, int] | None:
    if isinstance(value, str):
        raw = utf8(value)
        return NC_CHAR, raw, len(raw)
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        if values and all(isinstance(v, bool) for v in values):
            return NC_BYTE, np.asarray(values, ">i1").tobytes(), len(values)
        return None
    if all(isinstance(v, int) for v in values):
        if all(-(1 << 31) <= v < (1 << 31) for v in values):
            return NC_INT, np.asarray(values, ">i4").tobytes(), len(values)
        if all(-(1 << 63) <= v < (1 << 63) for v in values):
            return NC_INT64, np.asarray(values, ">i8").tobytes(), len(values)
        if all(0 <= v < (1 << 64) for v in values):
            return NC_UINT64, np.asarray(values, ">u8").tobytes(), len(values)
    return NC_DOUBLE, np.asarray(values, ">f8").tobytes(), len(values)


def utf8(text: str) -> bytes:
    """The text in UTF-8, each lone surrogate (JSON can escape one; a file name that is not
    UTF-8 decodes to some) as U+FFFD: no UTF-8 holds them."""
    return _SURROGATE.sub("\ufffd", text).encode("utf-8")


class Header:
    def __init__(self, version: int) -> None:
        # counts, lengths, dimension ids; unsigned: a classic file's vsize passes 2**31
        self.non_neg = ">Q" if version == 5 else ">I"
        self.offset = ">i" if version == 1 else ">q"
        self.parts: list[bytes] = []

    def count(self, n: int) -> None:
        self.parts.append(struct.pack(self.non_neg, n))

    def name(self, text: str) -> None:
        raw = utf8(text)
        self.count(len(raw))
        self.parts.append(raw + b"\0" * (-len(raw) % 4))

    def list_tag(self, tag: int, n: int) -> None:
        self.parts.append(struct.pack(">i", tag if n else 0))
        self.count(n)

    def attributes(self, attributes: list[Any]) -> None:
        self.list_tag(NC_ATTRIBUTE, len(attributes))
        for name, nc_type, raw, count in attributes:
            self.name(name)
            self.parts.append(struct.pack(">i", nc_type))
            self.count(count)
            self.parts.append(raw + b"\0" * (-len(raw) % 4))

    def bytes(self) -> bytes:
        return b"".join(self.parts)
