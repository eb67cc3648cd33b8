"""The layout of a disk cache directory (see DiskCache): entry names from keys and byte
ranges, which entries answer a read, and finding the entries earlier sessions left."""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import time
import zlib
from stat import S_ISREG

from .byte_range import ByteRange

# magic, crc32 of the value, its length, digest of (source, key, range): a torn, edited or
# misplaced entry fails one of them and is never served; then the digest of the store's
# token of the value it was read from (Store.get_token; of "" where none was asked), which
# revalidation compares with the store's token now
HEADER = struct.Struct("<8sIQ16s16s")
MAGIC = b"zarrfsC2"
OLD_MAGICS = (b"zarrfsC1",)  # entries of earlier releases: dropped without a warning
WHOLE = "all"
TEMP_DIR = ".tmp"
_STALE_TEMP_SECONDS = 600  # a temporary file this old was left by a crash
_LONG_SEGMENT = 200  # key segments longer than this are named by their digest


# Names


def digest(*parts: str) -> bytes:
    """16 bytes that name `parts` (a source URL; a source, key and range)."""
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=16).digest()


def is_digest(name: str) -> bool:
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


def key_path(key: str) -> str:
    """The entry directory path of a key: its segments, with `%` and `@` escaped (so that
    `@` ends the key in an entry's name) and long ones replaced by their digest."""
    return "/".join(_segment(s) for s in key.split("/"))


def _segment(segment: str) -> str:
    if len(segment.encode()) > _LONG_SEGMENT:
        return "%h" + digest(segment).hex()
    return segment.replace("%", "%25").replace("@", "%40")


def range_name(byte_range: ByteRange | None) -> str:
    """An entry's name for a range: `all`, `s<N>` (the last N bytes), `<start>-<end>`, `<start>-`."""
    if byte_range is None:
        return WHOLE
    if byte_range.suffix_length is not None:
        return f"s{byte_range.suffix_length}"
    return f"{byte_range.start}-" + ("" if byte_range.end is None else str(byte_range.end))


def parse_range(name: str) -> ByteRange | None:
    """The range an entry name holds; None for the whole value. Raises ValueError for a
    name this cache does not write."""
    if name == WHOLE:
        return None
    if name.startswith("s") and name[1:].isdigit():
        return ByteRange.suffix(int(name[1:]))
    start, sep, end = name.partition("-")
    if not sep or not start.isdigit() or not (end == "" or end.isdigit()):
        raise ValueError(name)
    return ByteRange(int(start), int(end) if end else None)


# Which entries answer a read


def plan(ranges: dict[str, int], want: ByteRange | None) -> list[tuple[str, int, int | None]] | None:
    """(entry, start, end) slices of entry values that make up `want`, in order; None when
    the entries of its key do not hold it all. `ranges` maps entry names to value lengths."""
    if WHOLE in ranges:
        if want is None:
            return [(WHOLE, 0, None)]
        start, end = want.resolve(ranges[WHOLE])
        return [(WHOLE, start, end)]
    if want is None:
        return None
    if want.suffix_length is not None:
        for name, length in ranges.items():
            held = parse_range(name)
            assert held is not None  # only the WHOLE entry parses to None
            if held.suffix_length is not None and held.suffix_length >= want.suffix_length:
                return [(name, max(0, length - want.suffix_length), None)]
        return None
    spans = []
    for name, length in ranges.items():
        held = parse_range(name)
        assert held is not None  # only the WHOLE entry parses to None
        if held.suffix_length is None:
            # an entry shorter than its range (or open-ended) ends where the value ends
            final = held.end is None or length < held.end - held.start
            spans.append((held.start, held.start + length, final, name))
    pieces: list[tuple[str, int, int | None]] = []
    position = want.start
    while True:
        here = [s for s in spans if s[0] <= position and (position < s[1] or s[2])]
        if not here:
            return None
        start, stop, final, name = max(here, key=lambda s: s[1])
        upto = stop if want.end is None else min(want.end, stop)
        if upto > position:
            pieces.append((name, position - start, upto - start))
            position = upto
        if (want.end is not None and position >= want.end) or (final and position >= stop):
            return pieces


def contains(name: str, length: int, other: str, other_length: int) -> bool:
    """Whether the entry `name` (value of `length` bytes) holds every byte of `other`."""
    if name == WHOLE:
        return True
    held, inner = parse_range(name), parse_range(other)
    assert held is not None  # only the WHOLE entry parses to None
    if inner is None:
        return False
    if held.suffix_length is not None or inner.suffix_length is not None:
        return (
            held.suffix_length is not None
            and inner.suffix_length is not None
            and held.suffix_length >= inner.suffix_length
        )
    held_end = held.start + length
    final = held.end is None or length < held.end - held.start
    return held.start <= inner.start and (final or inner.start + other_length <= held_end)


# Files

# why an entry is not served (read_entry)
GONE, OLD, DAMAGED, UNREADABLE = "gone", "old", "damaged", "unreadable"


def read_entry(full: str, ident: bytes) -> tuple[bytes, bytes] | str:
    """The value of the entry file `full`, checked against its header and `ident` (the
    digest of its source, key and range), and the digest of the token it was read with;
    else why not: GONE (no such file), OLD (an earlier release's), DAMAGED. OSError where
    it cannot be read. A read marks the entry used (touch)."""
    try:
        with open(full, "rb", buffering=0) as f:
            header = f.read(HEADER.size)
            value = f.readall()
        touch(full)
    except FileNotFoundError:
        return GONE
    if header[: len(MAGIC)] in OLD_MAGICS:  # kept by an earlier release: read anew
        return OLD
    if len(header) == HEADER.size:
        magic, crc, length, found, token = HEADER.unpack(header)
        if magic == MAGIC and length == len(value) and found == ident and crc == zlib.crc32(value):
            return value, token
    return DAMAGED


def write_temp(directory: str, value: bytes, header: bytes) -> str:
    """A temporary file in `directory` (the cache's TEMP_DIR) holding header and value; its path."""
    try:
        fd, temp = tempfile.mkstemp(dir=directory)
    except FileNotFoundError:  # the directory was emptied under a running mount
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=directory)
    try:
        with open(fd, "wb") as f:
            f.write(header)
            f.write(value)
    except BaseException:
        unlink(temp)
        raise
    return temp


def on_disk(directory: str, remove_temps: bool) -> list[tuple[float, str, int]]:
    """(last use, path relative to `directory`, size) of every entry in the cache
    directory, any source's; with `remove_temps`, what crashed writers left is removed."""
    found = []
    for source in os.scandir(directory):
        if source.name == TEMP_DIR:
            if remove_temps:
                remove_stale_temps(source.path)
        elif source.is_dir(follow_symlinks=False) and is_digest(source.name):
            found.extend(entries_under(directory, source.path))
    return found


def rename(temp: str, full: str) -> None:
    """Put a finished entry in place; its directory may be pruned by another process
    between making it and the rename, so that is tried twice."""
    for attempt in (1, 2):
        os.makedirs(os.path.dirname(full), mode=0o700, exist_ok=True)
        try:
            os.rename(temp, full)
            return
        except FileNotFoundError:
            if attempt == 2:
                raise


def touch(path: str) -> None:
    """Mark an entry used now, for the order of eviction of later sessions: in nanoseconds,
    since the kernel stamps files at a coarser grain than uses follow each other."""
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def unlink(path: str) -> None:
    """Remove a file if it is there (another process may have removed it first)."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def remove_stale_temps(directory: str) -> None:
    """Remove what writers that crashed left in the temporary directory (one still
    writing, in another process sharing the directory, is younger)."""
    now = time.time()
    for entry in os.scandir(directory):
        try:
            stale = now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TEMP_SECONDS
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
        except OSError:
            pass


def entries_of(directory: str, source: str, paths: set[str], starts: tuple[str, ...]) -> list[str]:
    """The entry files on disk (paths relative to `directory`) of the key paths `paths` and
    of every key path beginning with one of `starts`, in the source directory `source`."""
    found: list[str] = []
    by_parent: dict[str, set[str]] = {}
    for path in paths:  # each directory listed once, however many of its keys are written
        parent, _, segment = f"{source}/{path}".rpartition("/")
        by_parent.setdefault(parent, set()).add(segment)
    for parent, segments in by_parent.items():
        try:
            names = os.listdir(os.path.join(directory, parent))
        except OSError:  # nothing kept there
            continue
        found.extend(f"{parent}/{name}" for name in names if name.rpartition("@")[0] in segments)
    for start in starts:
        found.extend(relative for _, relative, _ in entries_under(directory, os.path.join(directory, source, start)))
    return found


def entries_under(directory: str, source: str) -> list[tuple[float, str, int]]:
    """(last use, path relative to `directory`, size) of each entry file below `source`;
    empty directories are pruned. Files this cache would not have written are left alone."""
    found = []
    for base, dirs, files in os.walk(source, topdown=False):
        for name in files:
            key_name, at, held = name.rpartition("@")
            try:
                if not at or not key_name:
                    continue
                parse_range(held)
                stat = os.lstat(os.path.join(base, name))
            except (ValueError, OSError):
                continue
            if S_ISREG(stat.st_mode):
                found.append((stat.st_mtime, os.path.relpath(os.path.join(base, name), directory), stat.st_size))
        if base != source and not dirs and not files:
            with contextlib.suppress(OSError):
                os.rmdir(base)
    return found
