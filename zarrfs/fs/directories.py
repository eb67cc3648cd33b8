"""What `stat` shows of directories, which a store does not keep (docs/posix.md): their
times, from the mount's own changes of their entries, and their links.

DirectoryTimes: when the mount last changed each directory's entries (its mtime and
ctime, as a local filesystem keeps them). Bounded: the KEPT directories changed last; one
forgotten, or never changed, shows the mount's start time."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

KEPT = 1 << 12
# as ext4 (EXT4_LINK_MAX): a directory of more sub-directories shows 1 link, "not counted"
LINK_MAX = 65_000


class DirectoryTimes:
    """Thread-safe."""

    def __init__(self) -> None:
        self._times: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def touch(self, *directories: str) -> None:
        """Names appeared or went in `directories` (or they were made, or moved) now."""
        now = time.time()
        with self._lock:
            for directory in directories:
                self._times.pop(directory, None)
                self._times[directory] = now
                if len(self._times) > KEPT:
                    self._times.popitem(last=False)

    def get(self, directory: str) -> float | None:
        return self._times.get(directory)

    def settled(self, directory: str) -> None:
        """`directory`'s times were set: its kept ones hold until its entries change again."""
        with self._lock:
            self._times.pop(directory, None)

    def forget(self, directory: str) -> None:
        """`directory` was removed or moved away: one made there later starts afresh."""
        with self._lock:
            for path in [p for p in self._times if p == directory or p.startswith(directory + "/")]:
                del self._times[path]


def links(subdirectories: int) -> int:
    """st_nlink of a directory: itself, its entry in its parent, each sub-directory's `..`."""
    return 2 + subdirectories if 2 + subdirectories < LINK_MAX else 1


def parent_of(path: str) -> str:
    return path.rpartition("/")[0]
