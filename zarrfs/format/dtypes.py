"""Zarr data types and fill values: names as the specs write them, numpy dtypes in memory,
and the JSON forms of fill values (v3 rules, v2 rules)."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import MetadataError, UnsupportedError

_V3_NUMERIC = {
    "bool": "|b1",
    "int8": "|i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "|u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
    "complex64": "<c8",
    "complex128": "<c16",
}
_V3_NAME_OF_KIND = {np.dtype(v).newbyteorder("<"): k for k, v in _V3_NUMERIC.items()}

# zarr-python's names for its variable-length types, old and new.
_V3_STRING = ("string", "variable_length_utf8")
_V3_BYTES = ("bytes", "variable_length_bytes")


@dataclass(frozen=True)
class DataType:
    """One array's element type.

    `numpy` is the dtype chunks decode to (for v2 big-endian types it keeps the stored
    byte order); `variable_length` types decode to object arrays of str or bytes."""

    name: str
    numpy: np.dtype
    variable_length: bool = False
    kind: str = "numeric"  # numeric | raw | string | bytes | fixed_string

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def little_endian(self) -> np.dtype:
        """The default binary representation of the core spec: little-endian."""
        if self.numpy.byteorder in ("|", "="):
            return self.numpy.newbyteorder("<") if self.numpy.byteorder == "=" else self.numpy
        return self.numpy.newbyteorder("<")


def parse_v3_data_type(value: Any) -> DataType:
    """A v3 `data_type` field (a name, or an object with a name) to a DataType."""
    name = value.get("name") if isinstance(value, dict) else value
    if not isinstance(name, str):
        raise MetadataError(f"data_type must be a name, got {value!r}")
    if name in _V3_NUMERIC:
        return DataType(name, np.dtype(_V3_NUMERIC[name]))
    if name.startswith("r") and name[1:].isdigit():
        bits = int(name[1:])
        if bits <= 0 or bits % 8:
            raise MetadataError(f"raw data type {name!r} must be a positive multiple of 8 bits")
        return DataType(name, np.dtype(f"V{bits // 8}"), kind="raw")
    if name in _V3_STRING:
        return DataType(name, np.dtype(object), variable_length=True, kind="string")
    if name in _V3_BYTES:
        return DataType(name, np.dtype(object), variable_length=True, kind="bytes")
    raise UnsupportedError(f"unsupported data type {name!r}")


def v3_name_of(dtype: np.dtype) -> str:
    """The v3 data type name for a numpy dtype (used when creating arrays)."""
    if dtype.kind == "V":
        return f"r{dtype.itemsize * 8}"
    if dtype.kind in ("U", "O", "T"):
        return "string"
    try:
        return _V3_NAME_OF_KIND[dtype.newbyteorder("<")]
    except KeyError:
        raise UnsupportedError(f"no Zarr v3 data type for numpy dtype {dtype}") from None


def parse_v2_dtype(value: Any, filters: list | None = None) -> DataType:
    """A v2 `dtype` string (`<f4`, `>i2`, `|S7`, `<U13`, `|O`, `|b1`) to a DataType."""
    if not isinstance(value, str):
        raise UnsupportedError(f"structured v2 dtype {value!r} is not supported")
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise MetadataError(f"invalid v2 dtype {value!r}") from None
    if dtype.kind == "O":
        ids = [f.get("id") for f in filters or [] if isinstance(f, dict)]
        if "vlen-utf8" in ids:
            return DataType(value, dtype, variable_length=True, kind="string")
        if "vlen-bytes" in ids:
            return DataType(value, dtype, variable_length=True, kind="bytes")
        raise UnsupportedError(f"unsupported data type: object dtype with filters {ids}")
    if dtype.kind in "SU":
        return DataType(value, dtype, kind="fixed_string")
    if dtype.kind == "V":
        return DataType(value, dtype, kind="raw")
    if dtype.kind in "biufc":
        return DataType(value, dtype)
    raise UnsupportedError(f"unsupported v2 dtype {value!r}")


# ---------------------------------------------------------------- fill values

_FLOAT_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _parse_float(value: Any, dtype: np.dtype) -> np.generic:
    if isinstance(value, str):
        if value in _FLOAT_SPECIAL:
            return dtype.type(_FLOAT_SPECIAL[value])
        if value.startswith("0x"):
            bits = int(value, 16)
            uint = np.dtype(f"<u{dtype.itemsize}")
            return np.array(bits, dtype=uint).view(dtype.newbyteorder("<"))[()].astype(dtype)
        raise MetadataError(f"invalid floating-point fill_value {value!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetadataError(f"invalid floating-point fill_value {value!r}")
    return dtype.type(value)


def parse_fill_value(value: Any, dtype: DataType, zarr_format: int) -> Any:
    """The JSON `fill_value` to a numpy scalar (str/bytes for variable-length types)."""
    np_dtype = dtype.numpy
    if dtype.kind == "string":
        if value is None or value == 0:
            return ""
        if not isinstance(value, str):
            raise MetadataError(f"string fill_value must be a string, got {value!r}")
        return value
    if dtype.kind == "bytes":
        if value is None or value == 0:
            return b""
        if isinstance(value, list):
            return bytes(value)
        if isinstance(value, str):
            return base64.standard_b64decode(value)
        raise MetadataError(f"invalid bytes fill_value {value!r}")
    if value is None:
        if zarr_format == 3:
            raise MetadataError("fill_value is required in Zarr v3")
        return np.zeros((), dtype=np_dtype)[()]
    try:
        if dtype.kind == "fixed_string":
            if np_dtype.kind == "S":
                raw = base64.standard_b64decode(value) if value else b""
                return np.array(raw, dtype=np_dtype)[()]
            return np.array(value, dtype=np_dtype)[()]
        if dtype.kind == "raw":
            if isinstance(value, str):
                raw = base64.standard_b64decode(value)
            elif isinstance(value, list):
                raw = bytes(value)
            elif value == 0:
                raw = bytes(np_dtype.itemsize)
            else:
                raise MetadataError(f"invalid raw fill_value {value!r}")
            if len(raw) != np_dtype.itemsize:
                raise MetadataError(f"raw fill_value has {len(raw)} bytes, expected {np_dtype.itemsize}")
            return np.frombuffer(raw, dtype=np_dtype)[0]
        kind = np_dtype.kind
        if kind == "b":
            if not isinstance(value, bool) and value not in (0, 1):
                raise MetadataError(f"bool fill_value must be true or false, got {value!r}")
            return np.bool_(value)
        if kind in "iu":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise MetadataError(f"integer fill_value must be an integer, got {value!r}")
            info = np.iinfo(np_dtype)
            if not info.min <= value <= info.max:
                raise MetadataError(f"fill_value {value} out of range for {dtype.name}")
            return np_dtype.type(value)
        if kind == "f":
            return _parse_float(value, np_dtype)
        if kind == "c":
            if not (isinstance(value, list) and len(value) == 2):
                raise MetadataError(f"complex fill_value must be [re, im], got {value!r}")
            part = np.dtype(f"<f{np_dtype.itemsize // 2}")
            re, im = (_parse_float(v, part) for v in value)
            out = np.zeros((), dtype=np_dtype)
            out.real, out.imag = re, im
            return out[()]
    except (ValueError, TypeError, OverflowError) as exc:
        raise MetadataError(f"invalid fill_value {value!r} for {dtype.name}: {exc}") from None
    raise UnsupportedError(f"no fill_value rule for {dtype.name}")


def _float_json(x: float, dtype: np.dtype) -> Any:
    if math.isnan(x):
        canonical = np.array(np.nan, dtype=dtype).view(f"u{dtype.itemsize}")[()]
        actual = np.array(x, dtype=dtype).view(f"u{dtype.itemsize}")[()]
        if actual != canonical:
            return f"0x{int(actual):0{dtype.itemsize * 2}x}"
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return float(x)


def fill_value_to_json(value: Any, dtype: DataType) -> Any:
    """The v3 JSON form of a fill value (inverse of parse_fill_value)."""
    kind = dtype.kind
    if kind == "string":
        return str(value)
    if kind == "bytes":
        return base64.standard_b64encode(bytes(value)).decode()
    if kind == "raw":
        return list(bytes(np.asarray(value, dtype=dtype.numpy).tobytes()))
    np_dtype = dtype.numpy
    if np_dtype.kind == "b":
        return bool(value)
    if np_dtype.kind in "iu":
        return int(value)
    if np_dtype.kind == "f":
        return _float_json(np_dtype.type(value), np_dtype)
    if np_dtype.kind == "c":
        part = np.dtype(f"f{np_dtype.itemsize // 2}")
        c = np_dtype.type(value)
        return [_float_json(part.type(c.real), part), _float_json(part.type(c.imag), part)]
    return value


def fill_array(shape: tuple[int, ...], dtype: DataType, fill_value: Any, order: str = "C") -> np.ndarray:
    """A new array of `shape` holding the fill value everywhere."""
    if dtype.variable_length:
        out = np.empty(shape, dtype=object, order=order)
        out.fill(fill_value)
        return out
    return np.full(shape, fill_value, dtype=dtype.numpy, order=order)


def is_fill(chunk: np.ndarray, fill_value: Any, dtype: DataType) -> bool:
    """True when every element equals the fill value, bit for bit for floats (so NaN
    chunks with a NaN fill value count, and -0.0 is not 0.0)."""
    if dtype.variable_length:
        return bool(np.all(chunk == fill_value))
    fill = np.array(fill_value, dtype=dtype.numpy)
    if chunk.dtype.kind in "fc" or dtype.kind == "raw":
        view = np.dtype(f"V{dtype.itemsize}")
        return bool(np.all(np.ascontiguousarray(chunk).view(view) == fill.reshape(1).view(view)[0]))
    return bool(np.all(chunk == fill))

