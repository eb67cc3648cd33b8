"""Zarr data types: names as the specs and the zarr-extensions registry write them, and
numpy dtypes in memory. Their fill values are fill_values.py.

Types plain numpy lacks (bfloat16, the float8 family, float4_e2m1fn) are held as the
unsigned integer of their width, so every element keeps its exact bits (fill_values.py
turns their fill values from numbers into bits). Sub-byte integers (int2, int4) are one
byte each, sign-extended."""

from __future__ import annotations

from dataclasses import dataclass, field
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

# floats numpy lacks, by their width in bits (tensorstore writes all of these)
_LOW_PRECISION_FLOATS = {
    "bfloat16": 16,
    "float8_e3m4": 8,
    "float8_e4m3fn": 8,
    "float8_e4m3fnuz": 8,
    "float8_e4m3b11fnuz": 8,
    "float8_e5m2": 8,
    "float8_e5m2fnuz": 8,
    "float8_e8m0fnu": 8,
    "float4_e2m1fn": 4,
}
# signed integers narrower than a byte: the bytes codec stores one per byte, in its low bits
_SUBBYTE_INTEGERS = {"int2": 2, "int4": 4}
# numpy.datetime64 / numpy.timedelta64: the numpy type code and the units it takes
_TIME_TYPES = {"numpy.datetime64": "M8", "numpy.timedelta64": "m8"}
_TIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as", "generic")
NAT = -(2**63)  # datetime64 / timedelta64: not a time


@dataclass(frozen=True)
class DataType:
    """One array's element type.

    `numpy` is the dtype chunks decode to (for v2 big-endian types it keeps the stored
    byte order); `variable_length` types decode to object arrays of str or bytes."""

    name: str
    numpy: np.dtype
    variable_length: bool = False
    # numeric | raw | string | bytes | fixed_string | datetime | structured
    # | low_precision_float (held as uint) | subbyte_int (held as int8)
    kind: str = "numeric"
    # sub-byte types: how many low bits of each byte hold the value (0: the whole element)
    bits: int = 0
    # the v3 `data_type` value where a name alone does not say it (a configuration)
    document: Any = field(default=None, compare=False)
    # structured types: (field name, DataType) in order
    fields: tuple[Any, ...] = field(default=(), compare=False)

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def little_endian(self) -> np.dtype:
        """The default binary representation of the core spec: little-endian (every field
        of a structured type too)."""
        return self.numpy.newbyteorder("<")

    @property
    def json(self) -> Any:
        """The v3 `data_type` value for this type."""
        return self.name if self.document is None else self.document

    def from_stored(self, values: np.ndarray) -> np.ndarray:
        """Values as decoded from their stored elements: a sub-byte type's upper bits are
        ignored (signed types sign-extend their top stored bit)."""
        if not self.bits:
            return values
        # np.asarray: numpy's operators turn a 0-d array into a scalar, which the
        # decoded-chunk cache cannot make read-only
        if self.kind == "subbyte_int":
            shift = 8 - self.bits
            return np.asarray((values.astype(np.int8) << shift) >> shift)
        return np.asarray(values & np.uint8((1 << self.bits) - 1))

    def to_stored(self, values: np.ndarray) -> np.ndarray:
        """Elements as stored: a sub-byte type keeps its low bits only, as tensorstore writes."""
        if not self.bits:
            return values
        return (np.asarray(values).view(np.uint8) & np.uint8((1 << self.bits) - 1)).view(self.numpy)


def parse_v3_data_type(value: Any) -> DataType:
    """A v3 `data_type` field (a name, or an object with a name) to a DataType."""
    name = value.get("name") if isinstance(value, dict) else value
    if not isinstance(name, str):
        raise MetadataError(f"data_type must be a name, got {value!r}")
    configuration = value.get("configuration", {}) if isinstance(value, dict) else {}
    if not isinstance(configuration, dict):
        raise MetadataError(f"data_type {name!r}: configuration must be an object")
    document = value if isinstance(value, dict) and configuration else None
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
    if name in _TIME_TYPES:
        return DataType(name, _time_dtype(name, configuration), kind="datetime", document=document)
    if name == "fixed_length_utf32":
        length = _length_bytes(name, configuration)
        if length % 4:
            raise MetadataError(f"{name}: length_bytes must be a multiple of 4, got {length}")
        return DataType(name, np.dtype(f"<U{length // 4}"), kind="fixed_string", document=document)
    if name == "null_terminated_bytes":
        return DataType(
            name, np.dtype(f"S{_length_bytes(name, configuration)}"), kind="fixed_string", document=document
        )
    if name == "raw_bytes":
        return DataType(name, np.dtype(f"V{_length_bytes(name, configuration)}"), kind="raw", document=document)
    if name in ("struct", "structured"):
        fields = _v3_fields(name, configuration)
        numpy = _packed_record([(n, t.numpy) for n, t in fields], name)
        return DataType(name, numpy, kind="structured", document=document, fields=fields)
    if name in _LOW_PRECISION_FLOATS:
        bits = _LOW_PRECISION_FLOATS[name]
        return DataType(name, np.dtype(f"<u{max(1, bits // 8)}"), kind="low_precision_float", bits=bits % 8)
    if name in _SUBBYTE_INTEGERS:
        return DataType(name, np.dtype("i1"), kind="subbyte_int", bits=_SUBBYTE_INTEGERS[name])
    raise UnsupportedError(f"unsupported data type {name!r}")


def _length_bytes(name: str, configuration: dict[str, Any]) -> int:
    length = configuration.get("length_bytes")
    if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
        raise MetadataError(f"{name}: length_bytes must be a positive integer, got {length!r}")
    return length


def _time_dtype(name: str, configuration: dict[str, Any]) -> np.dtype:
    unit = configuration.get("unit")
    scale = configuration.get("scale_factor", 1)
    if unit not in _TIME_UNITS:
        raise MetadataError(f"{name}: unit must be one of {', '.join(_TIME_UNITS)}, got {unit!r}")
    if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale < 2**31:
        raise MetadataError(f"{name}: scale_factor must be an integer in [1, 2^31 - 1], got {scale!r}")
    code = _TIME_TYPES[name]
    if unit == "generic":
        if scale != 1:
            raise MetadataError(f"{name}: the generic unit takes no scale_factor")
        return np.dtype(f"<{code}")
    return np.dtype(f"<{code}[{scale}{'us' if unit == 'μs' else unit}]")


def _v3_fields(name: str, configuration: dict[str, Any]) -> tuple[Any, ...]:
    """`fields`: [name, data_type] pairs (zarr-python's `structured`) or {"name",
    "data_type"} objects (the registry's `struct`)."""
    entries = configuration.get("fields")
    if not isinstance(entries, list) or not entries:
        raise MetadataError(f"{name}: fields must be a non-empty list")
    fields = []
    for entry in entries:
        if isinstance(entry, list) and len(entry) == 2:
            field_name, field_type = entry
        elif isinstance(entry, dict):
            field_name, field_type = entry.get("name"), entry.get("data_type")
        else:
            raise MetadataError(f"{name}: invalid field {entry!r}")
        if not isinstance(field_name, str) or not field_name:
            raise MetadataError(f"{name}: field names must be non-empty strings, got {field_name!r}")
        dtype = parse_v3_data_type(field_type)
        if dtype.variable_length:
            raise MetadataError(f"{name}: field {field_name!r} has variable-length type {dtype.name}")
        if dtype.bits:
            raise UnsupportedError(f"{name}: field {field_name!r} of sub-byte type {dtype.name} is not supported")
        fields.append((field_name, dtype))
    return tuple(fields)


def _packed_record(fields: list[Any], what: Any) -> np.dtype:
    try:
        return np.dtype(fields)  # a list of fields: packed, no alignment padding
    except (TypeError, ValueError) as exc:
        raise MetadataError(f"invalid structured data type {what!r}: {exc}") from None


def v3_data_type_of(dtype: np.dtype) -> Any:
    """The v3 `data_type` value for a numpy dtype, as zarr-python spells it (so that
    zarr-python reads what we create)."""
    if dtype.fields is not None:
        names = dtype.names
        assert names is not None  # a dtype with fields names them
        if any(dtype.fields[n][0].subdtype is not None for n in names):
            raise UnsupportedError(f"no Zarr v3 data type for numpy dtype {dtype} (a field has a shape)")
        fields = [[n, v3_data_type_of(dtype.fields[n][0])] for n in names]
        return {"name": "structured", "configuration": {"fields": fields}}
    if dtype.kind in "Mm":
        unit, scale = np.datetime_data(dtype)
        name = "numpy.datetime64" if dtype.kind == "M" else "numpy.timedelta64"
        return {"name": name, "configuration": {"unit": unit, "scale_factor": scale}}
    if dtype.kind == "U":
        return {"name": "fixed_length_utf32", "configuration": {"length_bytes": dtype.itemsize}}
    if dtype.kind == "S":
        return {"name": "null_terminated_bytes", "configuration": {"length_bytes": dtype.itemsize}}
    if dtype.kind == "V":
        return {"name": "raw_bytes", "configuration": {"length_bytes": dtype.itemsize}}
    return v3_name_of(dtype)


def v3_name_of(dtype: np.dtype) -> str:
    """The v3 data type name for a numpy dtype (used when creating arrays); types with a
    configuration need `v3_data_type_of`."""
    if dtype.fields is not None:
        return "structured"
    if dtype.kind in ("M", "m", "U", "S", "V"):
        return str(v3_data_type_of(dtype)["name"])
    if dtype.kind in ("O", "T"):
        return "string"
    try:
        return _V3_NAME_OF_KIND[dtype.newbyteorder("<")]
    except KeyError:
        raise UnsupportedError(f"no Zarr v3 data type for numpy dtype {dtype}") from None


def parse_v2_dtype(value: Any, filters: list[Any] | None = None) -> DataType:
    """A v2 `dtype` (`<f4`, `>i2`, `|S7`, `<U13`, `|O`, `|b1`, `<M8[ns]`, a list of
    fields; tensorstore's `bfloat16`, `float8_…`, `int4`) to a DataType."""
    if isinstance(value, list):
        return DataType(str(value), _packed_record(_v2_fields(value), value), kind="structured")
    if not isinstance(value, str):
        raise MetadataError(f"invalid v2 dtype {value!r}")
    if value in _LOW_PRECISION_FLOATS or value in _SUBBYTE_INTEGERS:
        return parse_v3_data_type(value)
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
    if dtype.kind in "Mm":
        return DataType(value, dtype, kind="datetime")
    if dtype.kind in "biufc":
        return DataType(value, dtype)
    raise UnsupportedError(f"unsupported v2 dtype {value!r}")


def _v2_fields(value: list[Any]) -> list[Any]:
    """v2 fields, [name, dtype] or [name, dtype, shape], dtypes nested as lists."""
    fields = []
    for entry in value:
        if not isinstance(entry, list) or len(entry) not in (2, 3) or not isinstance(entry[0], str):
            raise MetadataError(f"invalid v2 structured dtype field {entry!r}")
        dtype = _v2_fields(entry[1]) if isinstance(entry[1], list) else entry[1]
        if not isinstance(dtype, (str, list)) or dtype in ("|O", "O"):
            raise MetadataError(f"unsupported v2 structured dtype field {entry!r}")
        fields.append((entry[0], dtype, tuple(entry[2])) if len(entry) == 3 else (entry[0], dtype))
    return fields


# ---------------------------------------------------------------- fill values
