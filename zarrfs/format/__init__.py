"""The Zarr format layer: metadata, data types, codecs, chunk grids, arrays and
hierarchies, on numpy and numcodecs over the store layer. Knows nothing of FUSE."""

from .array import Array
from .context import ChunkCache, IOContext, Stats
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
from .hierarchy import Group, Hierarchy, MetadataChangeError, validate_node_name
from .dialects import open_hierarchy

__all__ = [
    "Array", "ChunkCache", "IOContext", "Stats", "Group", "Hierarchy", "MetadataChangeError",
    "validate_node_name", "open_hierarchy", "ChecksumError", "ChunkDecodeError", "FormatError", "InvalidWriteError",
    "MetadataError", "NodeNotFoundError", "ReadOnlyFormatError", "UnsupportedError",
]
