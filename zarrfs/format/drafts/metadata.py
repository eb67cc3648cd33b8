"""Draft array and group documents to the format layer's metadata. The draft's data type,
memory layout and compressor (2019–2021) or codecs (2022) become the equivalent chain of
final v3 codecs: `chunk_memory_layout: F` a transpose, the byte order a `bytes` codec,
compressors `gzip`, `zstd`, `blosc` or the numcodecs codec of the same id."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..chunk_grid import ChunkKeyEncoding
from ..codecs import build_codec
from ..dtypes import DataType, parse_v3_data_type, v3_name_of
from ..errors import MetadataError, UnsupportedError
from ..fill_values import parse_fill_value
from ..metadata import ArrayMetadata, GroupMetadata, check_unknown_fields, int_tuple, parse_dimension_names
from .layout import DRAFT_2019, check_extensions

# the 2022 draft forbids names it does not define; dimension_names came just after it
_ARRAY_FIELDS_2022 = {
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_memory_layout",
    "fill_value",
    "extensions",
    "attributes",
    "codecs",
    "storage_transformers",
    "dimension_names",
}
_GROUP_FIELDS_2022 = {"attributes", "extensions"}

# `<f8`, `>i2`, `u1`, `|b1`: the 2019–2021 identifiers, numpy's type strings
_NUMPY_STYLE = re.compile(r"^([<>|]?)([biufc])(\d+)$")
_CORE_SIZES = {"b": {1}, "i": {1, 2, 4, 8}, "u": {1, 2, 4, 8}, "f": {2, 4, 8}, "c": {8, 16}}
# a codec URI of either draft's codec registry: .../codec/gzip/1.0, .../codecs/gzip/1.0
_CODEC_URI = re.compile(r"^https?://purl\.org/zarr/spec/codecs?/([A-Za-z0-9_.-]+?)(?:/\d+(?:\.\d+)*)?/?$")
_BLOSC_SHUFFLE = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}


@dataclass(frozen=True)
class DraftChunkKeyEncoding(ChunkKeyEncoding):
    """Both drafts' chunk identifiers: `c` then the indices joined by the separator
    (`c1/23/45`, `c1.23.45`; a 0-d array's only chunk is `c`). The array's data prefix
    goes in front."""

    name: str = "v3 draft"

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        return "c" + self.separator.join(str(c) for c in coords)


def parse_draft_group(doc: Any, dialect: str, what: str) -> GroupMetadata:
    if not isinstance(doc, dict):
        raise MetadataError(f"{what} must be a JSON object")
    if dialect != DRAFT_2019:
        check_unknown_fields(doc, _GROUP_FIELDS_2022, what)
    check_extensions(doc.get("extensions"), what)
    return GroupMetadata(3, _attributes(doc, what), dialect=dialect)


def parse_draft_array(doc: Any, dialect: str, what: str) -> ArrayMetadata:
    """A draft array document to array metadata; UnsupportedError for what zarrfs cannot
    read (extensions, storage transformers, unknown codecs or data types)."""
    if not isinstance(doc, dict):
        raise MetadataError(f"{what} must be a JSON object")
    if dialect != DRAFT_2019:
        check_unknown_fields(doc, _ARRAY_FIELDS_2022, what)
    for required in ("shape", "data_type", "chunk_grid"):
        if required not in doc:
            raise MetadataError(f"{what}: required field {required!r} is missing")
    check_extensions(doc.get("extensions"), what)
    transformers = doc.get("storage_transformers") or []
    if transformers:
        kinds = [t.get("type", t.get("extension")) if isinstance(t, dict) else t for t in transformers]
        raise UnsupportedError(f"{what}: storage transformers {kinds} are not supported")
    attributes = _attributes(doc, what)
    if dialect == DRAFT_2019 and _holds_codecs(attributes.get("filters")):
        # zarr-python 2 kept the filters of its experimental v3 arrays among the attributes
        raise UnsupportedError(f"{what}: filters kept in the attributes are not supported")

    shape = int_tuple(doc["shape"], f"{what}: shape")
    dtype, endian = _parse_data_type(doc["data_type"], what)
    grid = doc["chunk_grid"]
    if not isinstance(grid, dict):
        raise MetadataError(f"{what}: chunk_grid must be an object")
    if "extension" in grid or grid.get("type") != "regular":
        raise UnsupportedError(f"{what}: chunk grid {grid.get('type')!r} is not supported (only regular)")
    chunk_shape = int_tuple(grid.get("chunk_shape"), f"{what}: chunk_shape", positive=True)
    if len(chunk_shape) != len(shape):
        raise MetadataError(f"{what}: chunk_shape {chunk_shape} does not match shape {shape}")
    separator = grid.get("separator", "." if dialect == DRAFT_2019 else "/")
    if separator not in ("/", "."):
        raise MetadataError(f"{what}: chunk separator must be '/' or '.', got {separator!r}")

    layout = doc.get("chunk_memory_layout", "C")
    if isinstance(layout, dict):
        raise UnsupportedError(f"{what}: chunk memory layout {layout.get('type')!r} is not supported")
    if layout not in ("C", "F"):
        raise MetadataError(f"{what}: chunk_memory_layout must be 'C' or 'F', got {layout!r}")
    codecs = [_transpose(list(range(len(shape)))[::-1])] if layout == "F" and len(shape) > 1 else []
    if dialect == DRAFT_2019:
        compressor = doc.get("compressor")
        codecs += _codec_chain([] if compressor is None else [compressor], dtype, endian, len(shape), "codec", what)
    else:
        entries = doc.get("codecs", [])
        if not isinstance(entries, list):
            raise MetadataError(f"{what}: codecs must be a list")
        codecs += _codec_chain(entries, dtype, endian, len(shape), "type", what)

    return ArrayMetadata(
        zarr_format=3,
        dialect=dialect,
        shape=shape,
        chunk_shape=chunk_shape,
        dtype=dtype,
        fill_value=_fill_value(doc.get("fill_value"), dtype, what),
        chunk_key_encoding=DraftChunkKeyEncoding(separator=separator),
        codecs=tuple(codecs),
        dimension_names=parse_dimension_names(doc.get("dimension_names"), len(shape), what),
        kept_attributes=attributes,
    )


def _attributes(doc: dict[str, Any], what: str) -> dict[str, Any]:
    attributes = doc.get("attributes")
    if attributes is None:  # early writers stored null for "no attributes"
        return {}
    if not isinstance(attributes, dict):
        raise MetadataError(f"{what}: attributes must be an object")
    return attributes


def _holds_codecs(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "id" in v for v in value)


# ------------------------------------------------------------------ data types


def _parse_data_type(value: Any, what: str) -> tuple[DataType, str]:
    """The data type and the byte order its identifier implies ("little" unless `>`). An
    extension data type (none is known) reads as its first fallback zarrfs knows."""
    if isinstance(value, dict):
        fallbacks = value.get("fallback")
        for fallback in fallbacks if isinstance(fallbacks, list) else [fallbacks] if fallbacks else []:
            try:
                dtype, endian = _core_data_type(fallback)
            except (MetadataError, UnsupportedError):
                continue
            return replace(dtype, name=f"{dtype.name} (fallback for {value.get('type')!r})"), endian
        raise UnsupportedError(
            f"{what}: data type {value.get('type')!r} of extension {value.get('extension')!r} "
            "is not supported and has no fallback zarrfs knows"
        )
    try:
        return _core_data_type(value)
    except (MetadataError, UnsupportedError) as exc:
        raise type(exc)(f"{what}: {exc}") from None


def _core_data_type(name: Any) -> tuple[DataType, str]:
    if not isinstance(name, str):
        raise MetadataError(f"data type must be a name, got {name!r}")
    match = _NUMPY_STYLE.match(name)
    if match is None:  # a 2022 name: bool, int8 … complex128, r<bits>
        dtype = parse_v3_data_type(name)
        if dtype.variable_length:
            raise UnsupportedError(f"unsupported data type {name!r}")
        return dtype, "little"
    order, kind, size = match[1], match[2], int(match[3])
    if size not in _CORE_SIZES[kind]:
        raise UnsupportedError(f"unsupported data type {name!r}")
    numpy = np.dtype(f"<{kind}{size}")
    if size > 1 and order not in "<>":
        raise MetadataError(f"data type {name!r} does not say its byte order")
    return DataType(v3_name_of(numpy), numpy), "big" if order == ">" else "little"


def _fill_value(value: Any, dtype: DataType, what: str) -> Any:
    """The drafts' fill values: null (undefined: zero here), numbers, "NaN", "Infinity"
    and "+Infinity", "-Infinity", and "0x…"/"0b…" strings holding the value's bits."""
    try:
        if value is None:
            return parse_fill_value(None, dtype, 2)
        if value == "+Infinity":
            value = "Infinity"
        if isinstance(value, str) and value[:2] in ("0x", "0b") and dtype.kind in ("numeric", "raw"):
            return _fill_from_bits(value, dtype)
        return parse_fill_value(value, dtype, 3)
    except ValueError as exc:
        raise MetadataError(f"{what}: invalid fill_value {value!r}: {exc}") from None
    except MetadataError as exc:
        raise MetadataError(f"{what}: {exc}") from None


def _fill_from_bits(value: str, dtype: DataType) -> Any:
    """A number's bits as a hexadecimal or binary number; a raw type's bytes in order."""
    size = dtype.itemsize
    bits = int(value[2:], 16 if value[1] == "x" else 2)
    if bits >= 1 << (8 * size):
        raise MetadataError(f"fill_value {value!r} has more bits than {dtype.name}")
    raw = bits.to_bytes(size, "big" if dtype.kind == "raw" else "little")
    return np.frombuffer(raw, dtype=dtype.little_endian)[0]


# ------------------------------------------------------------------ codecs


def _transpose(order: list[int]) -> dict[str, Any]:
    return {"name": "transpose", "configuration": {"order": order}}


def _codec_chain(
    entries: list[Any], dtype: DataType, endian: str, ndim: int, uri_field: str, what: str
) -> list[dict[str, Any]]:
    """The draft's codec entries (a compressor is a list of one) as v3 codec documents:
    array codecs (2022's `transpose`), the `bytes` codec with the byte order (2022's
    `endian` codec overrides the data type's), then compressors."""
    array_codecs: list[dict[str, Any]] = []
    compressors: list[dict[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise MetadataError(f"{what}: a codec must be an object, got {entry!r}")
        uri = entry.get(uri_field)
        match = _CODEC_URI.match(uri) if isinstance(uri, str) else None
        if match is None:
            raise UnsupportedError(f"{what}: unknown codec {uri!r}")
        codec_id = match[1]
        configuration = entry.get("configuration") or {}
        if not isinstance(configuration, dict):
            raise MetadataError(f"{what}: codec configuration must be an object")
        if codec_id in ("endian", "transpose"):
            if compressors:
                raise MetadataError(f"{what}: the {codec_id} codec must come before byte codecs")
            if codec_id == "endian":
                endian = configuration.get("endian")
                if endian not in ("little", "big"):
                    raise MetadataError(f"{what}: endian must be 'little' or 'big', got {endian!r}")
            else:
                array_codecs += _draft_transpose(configuration.get("order"), ndim, what)
            continue
        compressor = _compressor(codec_id, configuration, dtype)
        try:
            build_codec(compressor)
        except UnsupportedError as exc:
            raise UnsupportedError(f"{what}: codec {uri!r} is not supported ({exc})") from None
        compressors.append(compressor)
    return [*array_codecs, {"name": "bytes", "configuration": {"endian": endian}}, *compressors]


def _draft_transpose(order: Any, ndim: int, what: str) -> list[dict[str, Any]]:
    """2022's transpose codec: "C" (no change), "F" (reverse) or a permutation."""
    if order == "C" or (order == "F" and ndim < 2):
        return []
    if order == "F":
        return [_transpose(list(range(ndim))[::-1])]
    if isinstance(order, list):
        return [_transpose(order)]
    raise MetadataError(f"{what}: transpose order must be 'C', 'F' or a permutation, got {order!r}")


def _compressor(codec_id: str, configuration: dict[str, Any], dtype: DataType) -> dict[str, Any]:
    if codec_id == "gzip" and set(configuration) <= {"level"}:
        return {"name": "gzip", "configuration": configuration}
    if codec_id == "zstd" and set(configuration) <= {"level", "checksum"}:
        return {"name": "zstd", "configuration": configuration}
    if codec_id == "blosc":
        shuffle = configuration.get("shuffle", 1)
        if shuffle == -1:  # numcodecs' AUTOSHUFFLE
            shuffle = 2 if dtype.itemsize == 1 else 1
        return {
            "name": "blosc",
            "configuration": {
                **configuration,
                "shuffle": _BLOSC_SHUFFLE.get(shuffle, shuffle),
                "typesize": dtype.itemsize,
            },
        }
    return {"name": f"numcodecs.{codec_id}", "configuration": configuration}
