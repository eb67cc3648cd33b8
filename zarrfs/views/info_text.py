"""How `info` writes values: fill values (NaN payloads, infinities by name), codec
chains on one line, data types in v3 terms with what their names leave unsaid."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from ..format import Array

if TYPE_CHECKING:
    from ..format.dtypes import DataType


def format_fill_value(value: Any, dtype: np.dtype, kind: str = "numeric") -> str:
    """A fill value as a person reads it: NaN and infinities by name, a NaN with a
    payload in hex, complex numbers as [real, imaginary], strings and bytes as repr."""
    if kind == "string":
        return repr(str(value))
    if kind == "bytes":
        return repr(bytes(value))
    if kind == "raw":
        return "0x" + np.asarray(value, dtype=dtype).tobytes().hex()
    if kind == "fixed_string":
        return repr(value.item() if isinstance(value, np.generic) else value)
    if kind in ("datetime", "structured"):
        return str(value)  # numpy's own: NaT, 2020-01-01T00:00:05, 7 milliseconds, (1, 2.5, b'x')
    if kind == "low_precision_float":
        return f"0x{int(value):0{dtype.itemsize * 2}x} (its bits)"
    if dtype.kind == "b":
        return "true" if value else "false"
    if dtype.kind in "iu":
        return str(int(value))
    if dtype.kind == "f":
        return _float_text(dtype.type(value))
    if dtype.kind == "c":
        value = dtype.type(value)
        part = np.dtype(f"f{dtype.itemsize // 2}")
        return f"[{_float_text(part.type(value.real))}, {_float_text(part.type(value.imag))}]"
    return repr(value)


def _float_text(x: np.floating) -> str:
    if np.isnan(x):
        bits = int(np.asarray(x).view(f"u{x.itemsize}"))
        canonical = int(np.asarray(np.nan, dtype=x.dtype).view(f"u{x.itemsize}"))
        return "NaN" if bits == canonical else f"NaN (0x{bits:0{x.itemsize * 2}x})"
    if np.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return str(x)  # numpy's shortest round-trip form for the type: 0.1, not 0.100000001


def codec_chain(codecs: Any) -> str:
    """v3 codec documents on one line: `bytes(endian=little) -> zstd(level=3)`; codec
    lists inside a configuration (sharding) are shown the same way, in brackets."""
    return " -> ".join(_codec_text(c) for c in codecs) if codecs else "none"


def _codec_text(document: Any) -> str:
    if isinstance(document, str):
        return document
    if not isinstance(document, dict):
        return json_line(document)
    name = str(document.get("name", document.get("id", "?")))
    config = document.get("configuration")
    if config is None:  # a v2 numcodecs configuration: the id beside the parameters
        config = {k: v for k, v in document.items() if k not in ("name", "id")}
    if not isinstance(config, dict):
        return f"{name}({json_line(config)})"
    if not config:
        return name
    return f"{name}({', '.join(f'{k}={_config_value(v)}' for k, v in config.items())})"


def _config_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        return f"[{codec_chain(value)}]"
    return json_line(value)


def v2_codec_chain(filters: tuple[Any, ...], compressor: dict[str, Any] | None) -> str:
    """A v2 array's filters then its compressor, as codec_chain shows v3 codecs."""
    parts = [_codec_text(f) for f in filters]
    if compressor is not None:
        parts.append(_codec_text(compressor))
    return " -> ".join(parts) if parts else "none"


def data_type_text(dtype: DataType) -> str:
    """A data type's name in v3 terms whatever the format (`float64`, not v2's `<f8`)."""
    if dtype.kind == "numeric" and dtype.name[:1] in "<>|=":
        return str(dtype.numpy.name)
    return str(dtype.name)


def array_data_type(array: Array) -> str:
    """An array's data type, with a note where its name does not say all."""
    dtype = array.metadata.dtype
    notes = {  # kinds whose note says all
        "string": "variable-length UTF-8",
        "bytes": "variable-length bytes",
        "raw": f"raw bits, {count_text(dtype.itemsize, 'byte')}",
        "low_precision_float": f"data and data.npy hold its bits as {dtype.numpy.name}, which numpy lacks",
        "subbyte_int": "one byte per element in data and data.npy, as int8",
    }
    if dtype.kind in notes:
        return f"{dtype.name} ({notes[dtype.kind]})"
    if dtype.kind == "fixed_string":
        if dtype.numpy.kind == "S":
            return f"{dtype.name} (fixed-length, {count_text(dtype.itemsize, 'byte')})"
        return f"{dtype.name} (fixed-length, {count_text(dtype.itemsize // 4, 'character')})"
    if dtype.kind == "structured":
        return f"structured ({_record_text(dtype.little_endian)}; {count_text(dtype.itemsize, 'byte')})"
    if dtype.kind == "datetime" and array.metadata.zarr_format == 3:
        return f"{dtype.name} ({dtype.numpy.name})"
    if array.metadata.zarr_format == 2:
        # v2 names are numpy type strings; say what they mean
        order = {">": ", big-endian", "<": ", little-endian"}.get(dtype.numpy.str[0], "")
        return f"{dtype.name} ({dtype.numpy.name}{order})"
    return str(dtype.name)


def _record_text(dtype: np.dtype) -> str:
    """Fields as `name type`, a field's shape after its type, nested records in braces."""
    assert dtype.names is not None and dtype.fields is not None  # a structured dtype's
    parts = []
    for name in dtype.names:
        field = dtype.fields[name][0]
        base, shape = field.subdtype or (field, ())
        text = f"{{{_record_text(base)}}}" if base.names else base.str
        parts.append(f"{name} {text}{list(shape) if shape else ''}")
    return ", ".join(parts)


def count_text(n: int, noun: str) -> str:
    """`1 byte`, `2 bytes`."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def json_line(value: Any) -> str:
    """A JSON value on one line, Unicode as it is."""
    return json.dumps(value, ensure_ascii=False)
