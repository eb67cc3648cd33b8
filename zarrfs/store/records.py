"""What stores hand back beside values: the attributes kept with a value (FileMeta), one
recursive listing (TreeListing), and versions that name a value by its content."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class TreeListing:
    """What one recursive listing found below a prefix, as names relative to it.

    `files`: each key's (size, mtime) as get_info gives them; `dirs`: directories the
    store holds with no key below them (S3 folder markers, empty directories). When
    `complete` is False the listing stopped early: it holds the first names below the
    prefix in key order, every one up to the greatest name it holds (directories that
    reach past that name may hold more than it shows).
    """

    files: dict[str, tuple[int, float | None]]
    dirs: frozenset[str]
    complete: bool


@dataclass(frozen=True)
class FileMeta:
    """The POSIX attributes a store keeps beside a value or a directory (None: not kept
    there). `mode` holds the permission bits alone (07777); times are POSIX nanoseconds
    (rsync compares them to the nanosecond).
    Local stores keep them on the file itself; object stores as user metadata beside
    the object (object_meta.py)."""

    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    atime_ns: int | None = None
    mtime_ns: int | None = None
    ctime_ns: int | None = None

    def updated(self, other: FileMeta) -> FileMeta:
        """These attributes with those `other` gives (not None) in their place."""
        return FileMeta(*(b if b is not None else a for a, b in zip(self.fields(), other.fields())))

    def fields(self) -> tuple[int | None, ...]:
        return (self.mode, self.uid, self.gid, self.atime_ns, self.mtime_ns, self.ctime_ns)


def content_version(value: bytes | None) -> str | None:
    """A version that names a value by its content (None: no value)."""
    return None if value is None else hashlib.blake2b(value, digest_size=16).hexdigest()
