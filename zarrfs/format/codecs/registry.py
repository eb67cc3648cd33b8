"""Codec names to codec classes: adding a codec is one small class and one line here.
A codec's module, and the library it wraps, is imported by the first array that uses it
(a mount starts before any is opened)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import MetadataError, UnsupportedError

if TYPE_CHECKING:
    from .base import Codec

# name -> (module below this package, class)
CODECS: dict[str, tuple[str, str]] = {
    "transpose": ("array_to_array.transpose", "TransposeCodec"),
    "scale_offset": ("array_to_array.scale_offset", "ScaleOffsetCodec"),
    "cast_value": ("array_to_array.cast_value", "CastValueCodec"),
    "bytes": ("array_to_bytes.bytes", "BytesCodec"),
    "sharding_indexed": ("array_to_bytes.sharding", "ShardingCodec"),
    "n5_default": ("array_to_bytes.n5_default", "N5DefaultCodec"),
    "vlen-utf8": ("array_to_bytes.vlen", "VLenUTF8Codec"),
    "vlen-bytes": ("array_to_bytes.vlen", "VLenBytesCodec"),
    "numcodecs.pcodec": ("array_to_bytes.pcodec", "PcodecCodec"),
    "numcodecs.zfpy": ("array_to_bytes.zfpy", "ZfpyCodec"),
    "gzip": ("bytes_to_bytes.compressors", "GzipCodec"),
    "zstd": ("bytes_to_bytes.compressors", "ZstdCodec"),
    "blosc": ("bytes_to_bytes.compressors", "BloscCodec"),
    "crc32c": ("bytes_to_bytes.crc32c", "Crc32cCodec"),
}

# the classes of CODECS, by name, as imported
_classes: dict[str, type[Codec]] = {}


def build_codec(document: object) -> Codec:
    """A codec from its metadata entry: a name or {"name", "configuration"}."""
    configuration: object
    if isinstance(document, str):
        name, configuration = document, {}
    elif isinstance(document, dict) and isinstance(document.get("name"), str):
        name, configuration = document["name"], document.get("configuration") or {}
    else:
        raise MetadataError(f"invalid codec entry {document!r}")
    if not isinstance(configuration, dict):
        raise MetadataError(f"codec {name!r}: configuration must be an object, got {configuration!r}")
    made = _classes.get(name)
    if made is None and name in CODECS:
        module, cls = CODECS[name]
        made = _classes[name] = getattr(importlib.import_module(f".{module}", __package__), cls)
    if made is not None:
        return made(configuration)
    if name.startswith("numcodecs."):
        from .numcodecs_adapter import numcodecs_v3_codec

        return numcodecs_v3_codec(name, configuration)
    raise UnsupportedError(f"unknown codec {name!r}")
