"""One open directory, listed as the kernel asks for it: in constant memory whatever its
size (a chunk grid of 2**42 entries), resumed where the kernel's last request ended."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator

from ..core import Attributes, FilesystemCore, NotAtHand

_READDIR_BATCH = 256  # entries a worker thread lists at a time


class DirListing:
    """One open directory: the core's lazy listing, read on as the kernel asks, so that a
    directory of any size is listed in constant memory. Entries listed but not taken by
    the kernel wait for its next request; a request from elsewhere starts over."""

    def __init__(self, core: FilesystemCore, path: str) -> None:
        self.core = core
        self.path = path
        self._entries: Iterator[tuple[str, Attributes]] | None = None
        self._at_hand = False  # `_entries` never blocks: a list, or run out
        self._next = 0  # the offset of the first entry of `_waiting`
        self._waiting: deque[tuple[str, Attributes]] = deque()

    def batch(self, start: int, *, wait: bool = True) -> list[tuple[int, str, Attributes]]:
        """Up to _READDIR_BATCH entries from offset `start`, with their offsets. `wait=False`:
        only where no core call may block (the core holds the whole listing, or the
        listing has run out), else NotAtHand; for the adapter's event loop."""
        if self._entries is None or start < self._next:
            # (with wait=False, its failures are the adapter's: it asks again, waiting)
            self._entries, self._at_hand = self.core.list_dir(self.path, wait=wait), not wait
            self._next, self._waiting = 0, deque()
        elif not wait and not self._at_hand:
            raise NotAtHand
        return self._take(start)

    def _take(self, start: int) -> list[tuple[int, str, Attributes]]:
        entries = self._entries
        assert entries is not None  # the callers list the directory first
        while self._next < start and self._waiting:  # taken by the kernel
            self._waiting.popleft()
            self._next += 1
        if self._next < start:  # a seek ahead: skip what was never listed
            for _ in itertools.islice(entries, start - self._next):
                pass
            self._next = start
        while len(self._waiting) < _READDIR_BATCH:
            entry = next(entries, None)
            if entry is None:
                self._at_hand = True
                break
            self._waiting.append(entry)
        return [(self._next + i, name, attr) for i, (name, attr) in enumerate(self._waiting)]
