"""What fsspec filesystems answer, read the one way FsspecStore needs it: the bounds of a
range, modification times and version tokens from whichever fields a filesystem gives,
whether a filesystem is s3fs, and s3fs's first entries below a prefix."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from .byte_range import ByteRange

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

TOKEN_FIELDS = ("ETag", "etag", "generation", "md5Hash", "crc32c")  # what names one version of a value
MTIME_FIELDS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created", "date_time")


def fsspec_bounds(byte_range: ByteRange | None) -> tuple[int | None, int | None]:
    """(start, end) for fsspec's cat_file: a negative start counts from the end."""
    if byte_range is None:
        return None, None
    if byte_range.suffix_length is not None:
        return -byte_range.suffix_length, None
    return byte_range.start, byte_range.end


def holders(names: list[str]) -> set[str]:
    """Every directory that holds one of `names` (relative paths), at any depth."""
    holders: set[str] = set()
    for name in names:
        directory = name.rpartition("/")[0]
        while directory and directory not in holders:
            holders.add(directory)
            directory = directory.rpartition("/")[0]
    return holders


def is_s3(fs: AbstractFileSystem) -> bool:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return "s3" in protocols and hasattr(fs, "_iterdir")


async def first_entries(fs: AbstractFileSystem, bucket: str, prefix: str, limit: int) -> list[dict[str, Any]]:
    """s3fs's entries of the first `limit` keys under `prefix` (ListObjectsV2 without a
    delimiter, page after page, stopping at the page that holds the limit)."""
    entries: list[dict[str, Any]] = []
    listing = fs._iterdir(bucket, delimiter="", prefix=prefix)
    try:
        async for entry in listing:
            entries.append(entry)
            if len(entries) >= limit:
                break
    finally:
        await listing.aclose()
    return entries


def mtime(info: dict[str, Any]) -> float | None:
    """Modification time in POSIX seconds from whichever field this filesystem reports."""
    for field in MTIME_FIELDS:
        value = info.get(field)
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, tuple) and len(value) >= 6:  # zip: (Y, M, D, h, m, s)
            return datetime.datetime(*value[:6]).timestamp()
        if isinstance(value, str):
            try:
                return datetime.datetime.fromisoformat(value).timestamp()
            except ValueError:
                continue
    return None


def token(info: dict[str, Any]) -> str:
    """What names the version of a file in its info: its ETag (S3's HEAD gives it) or a
    digest, else its size and time."""
    for name in TOKEN_FIELDS:
        if info.get(name):
            return str(info[name])
    return f"{info.get('size')}:{mtime(info)!r}"


def ns(when: datetime.datetime | None) -> int | None:
    if when is None:
        return None
    delta = when - datetime.datetime(1970, 1, 1, tzinfo=when.tzinfo or datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
