"""The Zarr format layer: metadata, data types, codecs, chunk grids, arrays and
hierarchies, on numpy and numcodecs over the store layer. Knows nothing of FUSE.

`Array` and what it needs (numpy, the codecs) are imported when first asked for, so
that a hierarchy whose root is a group opens without them (a mount is ready sooner)."""

from .chunk_cache import ChunkCache
from .context import IOContext, Stats
from .dialects import open_hierarchy
from .errors import (
    ChecksumError,
    ChunkDecodeError,
    FormatError,
    InvalidWriteError,
    MetadataError,
    NodeNotFoundError,
    ReadOnlyFormatError,
    UnsupportedError,
)
from .hierarchy import AnyHierarchy, Group, Hierarchy, MetadataChangeError, node_replaced, validate_node_name

__all__ = [
    "AnyHierarchy",
    "Array",
    "ChecksumError",
    "ChunkCache",
    "ChunkDecodeError",
    "FormatError",
    "Group",
    "Hierarchy",
    "IOContext",
    "InvalidWriteError",
    "MetadataChangeError",
    "MetadataError",
    "NodeNotFoundError",
    "ReadOnlyFormatError",
    "Stats",
    "UnsupportedError",
    "node_replaced",
    "open_hierarchy",
    "validate_node_name",
]


def __getattr__(name: str):
    if name == "Array":
        from .array import Array

        return Array
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
