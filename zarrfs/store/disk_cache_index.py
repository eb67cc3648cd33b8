"""What a DiskCache knows of the entries in its directory (EntryIndex): every entry in
order of use with its size on disk, the value lengths of its own source's entries by key
path and range, and when each was last confirmed current against the store; and what the
mounts of one source sharing the directory count together (SharedCount)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator

from .disk_cache_layout import HEADER


class EntryIndex:
    """The entries (paths relative to the cache directory, `<source>/<key path>@<range>`)
    one cache accounts, its own source's and others' (every source shares the bound). Not
    safe to share between threads by itself: DiskCache's lock guards every call."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lru: OrderedDict[str, int] = OrderedDict()  # entry -> bytes on disk, least recently used first
        self.total = 0
        self._ranges: dict[str, dict[str, int]] = {}  # this source's key path -> range -> value length
        self._confirmed: dict[str, float] = {}  # entry -> when its token was last found current (monotonic)

    def ranges(self, path: str) -> dict[str, int]:
        """The ranges kept of a key path, each with its value's length (a copy)."""
        return dict(self._ranges.get(path, ()))

    def paths(self) -> list[str]:
        """The key paths of this source with entries."""
        return list(self._ranges)

    def used(self, relative: str) -> None:
        """Mark an entry the most recently used."""
        if relative in self.lru:
            self.lru.move_to_end(relative)

    def confirmed(self, relative: str) -> float | None:
        return self._confirmed.get(relative)

    def confirm(self, relative: str, when: float) -> None:
        """Record that an entry was found current at `when` (if it is still accounted)."""
        if relative in self.lru:
            self._confirmed[relative] = when

    def put(self, relative: str, size: int, length: int, when: float) -> None:
        """Account an entry just kept (`size` bytes on disk, a value of `length`), current at `when`."""
        self.total -= self.lru.pop(relative, 0)
        self.lru[relative] = size
        self.total += size
        path, name = self._own(relative)
        if path is not None:
            self._ranges.setdefault(path, {})[name] = length
        self._confirmed[relative] = when

    def account(self, relative: str, size: int) -> None:
        """Count an entry found on disk, as the most recently used so far."""
        self.lru[relative] = size
        self.total += size
        path, name = self._own(relative)
        if path is not None:
            self._ranges.setdefault(path, {})[name] = max(0, size - HEADER.size)

    def forget(self, relative: str) -> None:
        self.total -= self.lru.pop(relative, 0)
        self._confirmed.pop(relative, None)
        path, name = self._own(relative)
        ranges = None if path is None else self._ranges.get(path)
        if path is not None and ranges is not None:
            ranges.pop(name, None)
            if not ranges:
                del self._ranges[path]

    def oldest_beyond(self, max_bytes: int, max_entries: int) -> str | None:
        """The least recently used entry while the entries pass a bound; None within them."""
        if (self.total > max_bytes or len(self.lru) > max_entries) and self.lru:
            return next(iter(self.lru))
        return None

    def rebuild(self, found: Iterable[tuple[float, str, int]], recent: set[str]) -> None:
        """Account the entries `found` on disk ((last use, entry, size)), oldest use first,
        in place of what was accounted; entries in `recent` (kept while the directory was
        walked) stay accounted."""
        before = self.lru
        self.lru, self._ranges, self.total = OrderedDict(), {}, 0
        for _, relative, size in sorted(found):
            self.account(relative, size)
        for relative in recent:
            if relative in before and relative not in self.lru:
                self.account(relative, before[relative])
        self._confirmed = {r: t for r, t in self._confirmed.items() if r in self.lru}

    def _own(self, relative: str) -> tuple[str | None, str]:
        """(key path, range) of an entry of this source; (None, "") of another's."""
        source, _, rest = relative.partition("/")
        if source != self.source:
            return None, ""
        path, _, name = rest.rpartition("@")
        return path, name


class SharedCount:
    """A count kept in the file at `path`, shared by the processes that open it: the
    writes through to one source by every mount on the directory. Advanced and compared
    while held (an flock of the file): other processes' writes through and keeps of that
    source wait (this process's own threads are held off by DiskCache's lock, taken first)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        weakref.finalize(self, os.close, self._fd)

    def value(self) -> int:
        return int.from_bytes(os.pread(self._fd, 8, 0).ljust(8, b"\0"), "little")

    def advance(self) -> None:
        """Count one more (held)."""
        os.pwrite(self._fd, (self.value() + 1).to_bytes(8, "little"), 0)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
