"""Fill values: their JSON forms by the v3 rules ("NaN", "Infinity", hex bits, complex as
[re, im], base64 for raw and structured, NaT) and the v2 rules, the values in memory, and
whether a chunk holds nothing else (then it is erased rather than stored)."""

from __future__ import annotations

import base64
import functools
import math
from typing import Any, Literal, cast

import numpy as np

from .dtypes import NAT, DataType
from .errors import MetadataError, UnsupportedError

ByteOrder = Literal["<", ">"]  # of elements as stored (the v3 `bytes` codec's `endian`)


@functools.cache
def _ml_dtypes() -> Any:
    """ml_dtypes, or None: optional (tensorstore brings it), and imported only by the first
    low-precision fill value given as a number, the one thing that needs it."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes


_FLOAT_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _element(array: np.ndarray) -> np.generic:
    """The element of a 0-d array, a numpy scalar (numpy's stubs type `array[()]` as an
    array)."""
    return cast(np.generic, array[()])


def _parse_float(value: Any, dtype: np.dtype) -> np.generic:
    if isinstance(value, str):
        if value in _FLOAT_SPECIAL:
            return cast("np.generic", dtype.type(_FLOAT_SPECIAL[value]))
        if value.startswith("0x"):
            bits = int(value, 16)
            uint = np.dtype(f"<u{dtype.itemsize}")
            return cast("np.generic", _element(np.array(bits, dtype=uint).view(dtype.newbyteorder("<"))).astype(dtype))
        raise MetadataError(f"invalid floating-point fill_value {value!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MetadataError(f"invalid floating-point fill_value {value!r}")
    return cast("np.generic", dtype.type(value))


def _parse_low_precision_float(value: Any, dtype: DataType) -> np.generic:
    """A bfloat16/float8/float4 fill value to its bits: "0x…" directly, numbers and the
    named constants through ml_dtypes (refused where the type cannot hold them)."""
    limit = 1 << (dtype.bits or 8 * dtype.itemsize)
    if isinstance(value, str) and value.startswith("0x"):
        bits = int(value, 16)
        if bits >= limit:
            raise MetadataError(f"fill_value {value!r} has more bits than {dtype.name}")
        return cast("np.generic", dtype.numpy.type(bits))
    number = float(_parse_float(value, np.dtype("f8")))
    if number == 0 and dtype.name == "float8_e8m0fnu":
        # it has no zero; tensorstore writes 0.0 by default and reads it as 2^-127, the
        # nearest value it holds
        return cast("np.generic", dtype.numpy.type(0))
    ml_dtypes = _ml_dtypes()
    if ml_dtypes is None:
        raise UnsupportedError(
            f'fill_value {value!r} of {dtype.name} needs the ml_dtypes package (or a "0x…" fill value)'
        )
    converted = np.array(number, dtype=getattr(ml_dtypes, dtype.name))
    back = float(converted.astype(np.float64))
    if math.isnan(back) != math.isnan(number) or (math.isinf(back) and not math.isinf(number)):
        raise MetadataError(f"{dtype.name} cannot hold the fill_value {value!r}")
    if math.isinf(number) and back != number:
        raise MetadataError(f"{dtype.name} has no infinity (fill_value {value!r})")
    return _element(converted.view(dtype.numpy))


def _parse_structured(value: Any, dtype: DataType, zarr_format: int, byte_order: ByteOrder) -> np.generic:
    """Base64 of the packed element (in the stored byte order), or an object with one
    fill value per field (the registry's `struct`)."""
    if isinstance(value, dict):
        if set(value) != {n for n, _ in dtype.fields}:
            raise MetadataError(f"struct fill_value must name every field {[n for n, _ in dtype.fields]}")
        out = np.zeros((), dtype=dtype.numpy)
        for name, field_type in dtype.fields:
            out[name] = parse_fill_value(value[name], field_type, zarr_format)
        return _element(out)
    if value == 0:
        return _element(np.zeros((), dtype=dtype.numpy))
    if not isinstance(value, str):
        raise MetadataError(f"structured fill_value must be base64 or an object, got {value!r}")
    raw = base64.standard_b64decode(value)
    if len(raw) != dtype.itemsize:
        raise MetadataError(f"structured fill_value has {len(raw)} bytes, expected {dtype.itemsize}")
    stored = dtype.numpy if zarr_format == 2 else dtype.numpy.newbyteorder(byte_order)
    return cast("np.generic", np.frombuffer(raw, dtype=stored).astype(dtype.numpy)[0])


def _parse_datetime(value: Any, dtype: DataType) -> np.generic:
    if value == "NaT":
        value = NAT
    if isinstance(value, bool) or not isinstance(value, int) or not NAT <= value < 2**63:
        raise MetadataError(f'{dtype.name} fill_value must be a 64-bit integer or "NaT", got {value!r}')
    return _element(np.array(value, dtype="<i8").view(dtype.little_endian).astype(dtype.numpy))


def parse_fill_value(value: Any, dtype: DataType, zarr_format: int, byte_order: ByteOrder = "<") -> Any:
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
        if dtype.kind == "datetime":  # as zarr-python 3.1 reads a v2 null fill of these types
            return _parse_datetime("NaT", dtype)
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
            low, high = (
                (-(1 << dtype.bits - 1), (1 << dtype.bits - 1) - 1)
                if dtype.bits
                else (np.iinfo(np_dtype).min, np.iinfo(np_dtype).max)
            )
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


def fill_array(shape: tuple[int, ...], dtype: DataType, fill_value: Any, order: Literal["C", "F"] = "C") -> np.ndarray:
    """A new array of `shape` holding the fill value everywhere."""
    if dtype.variable_length:
        out = np.empty(shape, dtype=object, order=order)
        out.fill(fill_value)
        return out
    return np.full(shape, fill_value, dtype=dtype.numpy, order=order)


def constant_array(shape: tuple[int, ...], dtype: DataType, fill_value: Any) -> np.ndarray:
    """The fill value everywhere in `shape`, as a read-only broadcast of one element: what
    a chunk that is not stored reads as costs one element, whatever size the metadata
    claims for the chunk (docs/errors.md)."""
    return np.broadcast_to(fill_array((), dtype, fill_value), shape)


def is_constant(values: np.ndarray) -> bool:
    """Whether `values` is a broadcast of one element (constant_array's): no stride moves."""
    return values.ndim > 0 and not any(values.strides)


def is_fill(chunk: np.ndarray, fill_value: Any, dtype: DataType) -> bool:
    """True when every element equals the fill value, bit for bit for all but booleans and
    integers (so NaN and NaT chunks with a NaN or NaT fill value count, and -0.0 is not 0.0)."""
    if dtype.variable_length:
        return bool(np.all(chunk == fill_value))
    fill = np.array(fill_value, dtype=dtype.numpy)
    if dtype.kind == "numeric" and chunk.dtype.kind in "biu":
        return _all_equal(chunk.reshape(-1), fill)
    chunk = np.ascontiguousarray(chunk, dtype=dtype.numpy)
    return _all_equal(_bits(chunk.reshape(-1)), _bits(fill.reshape(1))[0])


_BLOCK = 1 << 16  # elements compared at a time: a chunk of data is told from fill at once


def _bits(values: np.ndarray) -> np.ndarray:
    """Contiguous 1-d `values` as unsigned integers holding their bits (one row of words per
    element when an element is wider than 8 bytes), which compare far faster than voids."""
    size = values.dtype.itemsize
    if size in (1, 2, 4, 8):
        return values.view(f"u{size}")
    if size % 8 == 0:
        return values.view("u8").reshape(-1, size // 8)
    return values.view(f"V{size}")


def _all_equal(values: np.ndarray, target: np.ndarray) -> bool:
    """Whether every element (row) of `values` equals `target`; the first element first,
    then blocks, so that a chunk holding data is rejected without a pass over all of it."""
    if not len(values):
        return True
    if not np.all(values[0] == target):
        return False
    return all(np.all(values[start : start + _BLOCK] == target) for start in range(0, len(values), _BLOCK))
