"""POSIX attributes (FileMeta) as object user metadata, in the names and forms that
rclone and s3fs-fuse use, so that each reads what the others wrote:

| field | S3 header | written as | read from |
|---|---|---|---|
| mtime | `x-amz-meta-mtime` | seconds, up to 9 decimals (rclone, s3fs-fuse) | that, or RFC 3339 |
| atime | `x-amz-meta-atime` | the same | the same |
| ctime | `x-amz-meta-ctime` | the same (s3fs-fuse) | the same |
| mode | `x-amz-meta-mode` | decimal st_mode with the file type (s3fs-fuse: 33188) | decimal; octal with a leading 0 (rclone --metadata: 0100644) |
| uid, gid | `x-amz-meta-uid`, `x-amz-meta-gid` | decimal | decimal |

A value that does not parse is ignored (the default shows), never an error. Other user
metadata on the object (rclone's `md5chksum`, a Content-Type) is kept by every change."""

from __future__ import annotations

import datetime
import re
import stat
from collections.abc import Mapping

from .records import FileMeta

MTIME, ATIME, CTIME, MODE, UID, GID = "mtime", "atime", "ctime", "mode", "uid", "gid"
NAMES = (MTIME, ATIME, CTIME, MODE, UID, GID)
_SECONDS = re.compile(r"(-?\d+)(?:\.(\d{0,9})\d*)?")


def encode(meta: FileMeta, directory: bool = False) -> dict[str, str]:
    """The user-metadata fields (names without `x-amz-meta-`) that hold `meta`."""
    fields: dict[str, str] = {}
    for name, value in ((MTIME, meta.mtime_ns), (ATIME, meta.atime_ns), (CTIME, meta.ctime_ns)):
        if value is not None:
            fields[name] = format_ns(value)
    if meta.mode is not None:
        fields[MODE] = str((stat.S_IFDIR if directory else stat.S_IFREG) | meta.mode)
    if meta.uid is not None:
        fields[UID] = str(meta.uid)
    if meta.gid is not None:
        fields[GID] = str(meta.gid)
    return fields


def decode(metadata: Mapping[str, str], last_modified_ns: int | None = None) -> FileMeta:
    """FileMeta from user metadata (names any case, with or without `x-amz-meta-`);
    the mtime is the object's LastModified where none is kept."""
    fields = {_bare(name): value for name, value in metadata.items()}
    mtime = parse_time(fields.get(MTIME))
    return FileMeta(
        mode=_mode(fields.get(MODE)),
        uid=_number(fields.get(UID)),
        gid=_number(fields.get(GID)),
        atime_ns=parse_time(fields.get(ATIME)),
        mtime_ns=last_modified_ns if mtime is None else mtime,
        ctime_ns=parse_time(fields.get(CTIME)),
    )


def merged(metadata: Mapping[str, str], meta: FileMeta) -> dict[str, str]:
    """`metadata` (an object's, as HEAD gives it) with the fields `meta` sets replaced."""
    kept = {_bare(name): value for name, value in metadata.items()}
    kept.update(encode(meta))
    return kept


def format_ns(value: int) -> str:
    seconds, nanos = divmod(value, 1_000_000_000)
    return str(seconds) if not nanos else f"{seconds}.{nanos:09d}".rstrip("0")


def parse_time(text: str | None) -> int | None:
    """Nanoseconds from float seconds ("1700000000.5") or RFC 3339; None if neither."""
    if not text:
        return None
    text = text.strip()
    found = _SECONDS.fullmatch(text)
    if found:
        whole, fraction = found.groups()
        nanos = int((fraction or "").ljust(9, "0"))
        return int(whole) * 1_000_000_000 + (-nanos if whole.startswith("-") else nanos)
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    delta = when - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _bare(name: str) -> str:
    name = name.lower()
    return name[len("x-amz-meta-") :] if name.startswith("x-amz-meta-") else name


def _number(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    return int(text)


def _mode(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    try:
        value = int(text, 8) if len(text) > 1 and text.startswith("0") else int(text)
    except ValueError:
        return None
    return stat.S_IMODE(value)
