"""The format layer's exceptions: what can be wrong with a node, its metadata or its chunks.

The fs layer alone turns these into errno values (docs/errors.md)."""


class FormatError(Exception):
    """Base of everything the format layer raises about Zarr content."""


class NodeNotFoundError(FormatError):
    """No array or group at this path."""


class MetadataError(FormatError):
    """A metadata document is unreadable or invalid."""


class UnsupportedError(FormatError):
    """Valid Zarr that this implementation cannot open: unknown codec, data type,
    extension with must_understand, storage transformer."""


class ChunkDecodeError(FormatError):
    """A stored chunk could not be decoded: corrupt, truncated, wrong size."""


class ChunkTooLargeError(ChunkDecodeError):
    """A stored object is larger than its chunk can need, or decodes to more than the
    chunk holds: refused before it is read or decoded further (docs/errors.md, Bounded memory)."""


class ChecksumError(ChunkDecodeError):
    """A checksum codec found a mismatch."""


class InvalidWriteError(FormatError):
    """A write that the array cannot take: wrong size, wrong shape, bad values."""


class ReadOnlyFormatError(FormatError):
    """The node is in a format zarrfs reads but does not write."""
