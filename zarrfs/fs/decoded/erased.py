"""Nodes erased through the mount, remembered as missing for `--metadata-ttl` (as the
kernel remembers a missing name): asked for again at once (the adapter checks each name
it removed, `rm -r` the paths below), they are answered without reading their documents
and listing their prefix again."""

from __future__ import annotations

import itertools
import threading
import time

_MOST = 1 << 16  # remembered at once; past it, the oldest go even within the ttl


class ErasedPaths:
    """Path -> when the mount erased the node there, oldest first: those older than the ttl
    are forgotten at each erasure, so the table holds the erasures of one ttl. Thread-safe."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._when: dict[str, float] = {}
        self._lock = threading.Lock()

    def erased(self, path: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._when.pop(path, None)  # (moves last: the table stays in the order of erasure)
            self._when[path] = now
            for oldest, when in list(itertools.islice(self._when.items(), 64)):
                if now - when < self.ttl and len(self._when) <= _MOST:
                    break
                del self._when[oldest]

    def __len__(self) -> int:
        with self._lock:
            return len(self._when)

    def made(self, path: str) -> None:
        """A node may be at `path` now (made, moved there, or all forgotten: "")."""
        with self._lock:
            if path:
                self._when.pop(path, None)
            else:
                self._when.clear()

    def missing(self, path: str) -> bool:
        """Whether the node at `path` was erased through the mount within the ttl."""
        with self._lock:
            when = self._when.get(path)
        return when is not None and time.monotonic() - when < self.ttl
