"""Codec names to codec classes: adding a codec is one small class and one line here."""

from __future__ import annotations

from ..errors import MetadataError, UnsupportedError
from .array_to_array.transpose import TransposeCodec
from .array_to_bytes.bytes import BytesCodec
from .array_to_bytes.sharding import ShardingCodec
from .array_to_bytes.vlen import VLenBytesCodec, VLenUTF8Codec
from .base import Codec
from .bytes_to_bytes.compressors import BloscCodec, GzipCodec, ZstdCodec
from .bytes_to_bytes.crc32c import Crc32cCodec
from .numcodecs_adapter import numcodecs_v3_codec

CODECS: dict[str, type[Codec]] = {
    c.name: c
    for c in (
        TransposeCodec, BytesCodec, ShardingCodec, VLenUTF8Codec, VLenBytesCodec,
        GzipCodec, ZstdCodec, BloscCodec, Crc32cCodec,
    )
}


def build_codec(document) -> Codec:
    """A codec from its metadata entry: a name or {"name", "configuration"}."""
    if isinstance(document, str):
        name, configuration = document, {}
    elif isinstance(document, dict) and isinstance(document.get("name"), str):
        name, configuration = document["name"], document.get("configuration") or {}
    else:
        raise MetadataError(f"invalid codec entry {document!r}")
    if not isinstance(configuration, dict):
        raise MetadataError(f"codec {name!r}: configuration must be an object, got {configuration!r}")
    if name in CODECS:
        return CODECS[name](configuration)
    if name.startswith("numcodecs."):
        return numcodecs_v3_codec(name, configuration)
    raise UnsupportedError(f"unknown codec {name!r}")
