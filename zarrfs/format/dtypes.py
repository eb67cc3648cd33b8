"""Zarr data types and fill values: names as the specs and the zarr-extensions registry
write them, numpy dtypes in memory, and the JSON forms of fill values (v3 rules, v2 rules).

Types plain numpy lacks (bfloat16, the float8 family, float4_e2m1fn) are held as the
unsigned integer of their width, so every element keeps its exact bits; ml_dtypes, when
installed (tensorstore brings it), is used only to turn their fill values from numbers
into bits. Sub-byte integers (int2, int4) are one byte each, sign-extended."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import MetadataError, UnsupportedError

try:
    import ml_dtypes
except ImportError:  # optional: only fill values given as numbers need it
    ml_dtypes = None

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
    "float8_e3m4": 8, "float8_e4m3fn": 8, "float8_e4m3fnuz": 8, "float8_e4m3b11fnuz": 8,
    "float8_e5m2": 8, "float8_e5m2fnuz": 8, "float8_e8m0fnu": 8,
    "float4_e2m1fn": 4,
}
# signed integers narrower than a byte: the bytes codec stores one per byte, in its low bits
_SUBBYTE_INTEGERS = {"int2": 2, "int4": 4}
# numpy.datetime64 / numpy.timedelta64: the numpy type code and the units it takes
_TIME_TYPES = {"numpy.datetime64": "M8", "numpy.timedelta64": "m8"}
_TIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as", "generic")
_NAT = -(2**63)


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
    fields: tuple = field(default=(), compare=False)

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
        if self.kind == "subbyte_int":
            shift = 8 - self.bits
            return (values.astype(np.int8) << shift) >> shift
        return values & np.uint8((1 << self.bits) - 1)

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
        return DataType(name, np.dtype(f"S{_length_bytes(name, configuration)}"), kind="fixed_string", document=document)
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


def _length_bytes(name: str, configuration: dict) -> int:
    length = configuration.get("length_bytes")
    if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
        raise MetadataError(f"{name}: length_bytes must be a positive integer, got {length!r}")
    return length


def _time_dtype(name: str, configuration: dict) -> np.dtype:
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


def _v3_fields(name: str, configuration: dict) -> tuple:
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


def _packed_record(fields: list, what: Any) -> np.dtype:
    try:
        return np.dtype(fields)  # a list of fields: packed, no alignment padding
    except (TypeError, ValueError) as exc:
        raise MetadataError(f"invalid structured data type {what!r}: {exc}") from None


def v3_data_type_of(dtype: np.dtype) -> Any:
    """The v3 `data_type` value for a numpy dtype, as zarr-python spells it (so that
    zarr-python reads what we create)."""
    if dtype.fields is not None:
        if any(dtype.fields[n][0].subdtype is not None for n in dtype.names):
            raise UnsupportedError(f"no Zarr v3 data type for numpy dtype {dtype} (a field has a shape)")
        fields = [[n, v3_data_type_of(dtype.fields[n][0])] for n in dtype.names]
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
        return v3_data_type_of(dtype)["name"]
    if dtype.kind in ("O", "T"):
        return "string"
    try:
        return _V3_NAME_OF_KIND[dtype.newbyteorder("<")]
    except KeyError:
        raise UnsupportedError(f"no Zarr v3 data type for numpy dtype {dtype}") from None


def parse_v2_dtype(value: Any, filters: list | None = None) -> DataType:
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


def _v2_fields(value: list) -> list:
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


def _parse_low_precision_float(value: Any, dtype: DataType) -> np.generic:
    """A bfloat16/float8/float4 fill value to its bits: "0x…" directly, numbers and the
    named constants through ml_dtypes (refused where the type cannot hold them)."""
    limit = 1 << (dtype.bits or 8 * dtype.itemsize)
    if isinstance(value, str) and value.startswith("0x"):
        bits = int(value, 16)
        if bits >= limit:
            raise MetadataError(f"fill_value {value!r} has more bits than {dtype.name}")
        return dtype.numpy.type(bits)
    number = float(_parse_float(value, np.dtype("f8")))
    if number == 0 and dtype.name == "float8_e8m0fnu":
        # it has no zero; tensorstore writes 0.0 by default and reads it as 2^-127, the
        # nearest value it holds
        return dtype.numpy.type(0)
    if ml_dtypes is None:
        raise UnsupportedError(
            f"fill_value {value!r} of {dtype.name} needs the ml_dtypes package (or a \"0x…\" fill value)")
    converted = np.array(number, dtype=getattr(ml_dtypes, dtype.name))
    back = float(converted.astype(np.float64))
    if math.isnan(back) != math.isnan(number) or (math.isinf(back) and not math.isinf(number)):
        raise MetadataError(f"{dtype.name} cannot hold the fill_value {value!r}")
    if math.isinf(number) and back != number:
        raise MetadataError(f"{dtype.name} has no infinity (fill_value {value!r})")
    return converted.view(dtype.numpy)[()]


def _parse_structured(value: Any, dtype: DataType, zarr_format: int, byte_order: str) -> np.generic:
    """Base64 of the packed element (in the stored byte order), or an object with one
    fill value per field (the registry's `struct`)."""
    if isinstance(value, dict):
        if set(value) != {n for n, _ in dtype.fields}:
            raise MetadataError(f"struct fill_value must name every field {[n for n, _ in dtype.fields]}")
        out = np.zeros((), dtype=dtype.numpy)
        for name, field_type in dtype.fields:
            out[name] = parse_fill_value(value[name], field_type, zarr_format)
        return out[()]
    if value == 0:
        return np.zeros((), dtype=dtype.numpy)[()]
    if not isinstance(value, str):
        raise MetadataError(f"structured fill_value must be base64 or an object, got {value!r}")
    raw = base64.standard_b64decode(value)
    if len(raw) != dtype.itemsize:
        raise MetadataError(f"structured fill_value has {len(raw)} bytes, expected {dtype.itemsize}")
    stored = dtype.numpy if zarr_format == 2 else dtype.numpy.newbyteorder(byte_order)
    return np.frombuffer(raw, dtype=stored).astype(dtype.numpy)[0]


def _parse_datetime(value: Any, dtype: DataType) -> np.generic:
    if value == "NaT":
        value = _NAT
    if isinstance(value, bool) or not isinstance(value, int) or not _NAT <= value < 2**63:
        raise MetadataError(f"{dtype.name} fill_value must be a 64-bit integer or \"NaT\", got {value!r}")
    return np.array(value, dtype="<i8").view(dtype.little_endian).astype(dtype.numpy)[()]


def parse_fill_value(value: Any, dtype: DataType, zarr_format: int, byte_order: str = "<") -> Any:
    """The JSON `fill_value` to a numpy scalar (str/bytes for variable-length types).
    `byte_order` is the v3 `bytes` codec's, which base64 structured fill values follow."""
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
        if dtype.kind == "structured":
            return _parse_structured(value, dtype, zarr_format, byte_order)
        if dtype.kind == "datetime":
            return _parse_datetime(value, dtype)
        if dtype.kind == "low_precision_float":
            return _parse_low_precision_float(value, dtype)
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
            low, high = (-(1 << dtype.bits - 1), (1 << dtype.bits - 1) - 1) if dtype.bits else (
                np.iinfo(np_dtype).min, np.iinfo(np_dtype).max)
            if not low <= value <= high:
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
    except (ValueError, TypeError, OverflowError) as exc:  # base64 errors are ValueErrors
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
    """The v3 JSON form of a fill value (inverse of parse_fill_value), as zarr-python
    writes it: base64 for raw_bytes, null_terminated_bytes and structured elements."""
    kind = dtype.kind
    if kind == "string":
        return str(value)
    if kind == "bytes":
        return base64.standard_b64encode(bytes(value)).decode()
    element = np.asarray(value, dtype=dtype.little_endian)
    if kind == "structured" or dtype.name == "raw_bytes" or dtype.numpy.kind == "S":
        return base64.standard_b64encode(element.tobytes()).decode()
    if kind == "raw":
        return list(element.tobytes())
    if kind == "fixed_string":
        return str(element[()])
    if kind == "datetime":
        return int(element.view("<i8")[()])
    if kind == "low_precision_float":
        return f"0x{int(element[()]):0{dtype.itemsize * 2}x}"
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
    """True when every element equals the fill value, bit for bit for all but booleans and
    integers (so NaN and NaT chunks with a NaN or NaT fill value count, and -0.0 is not 0.0)."""
    if dtype.variable_length:
        return bool(np.all(chunk == fill_value))
    fill = np.array(fill_value, dtype=dtype.numpy)
    if dtype.kind == "numeric" and chunk.dtype.kind in "biu":
        return bool(np.all(chunk == fill))
    view = np.dtype(f"V{dtype.itemsize}")
    chunk = np.ascontiguousarray(chunk, dtype=dtype.numpy)
    return bool(np.all(chunk.view(view) == fill.reshape(1).view(view)[0]))
