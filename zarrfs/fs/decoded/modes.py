"""Modes, owners and times that chmod, chown and utimensat set on the decoded tree's files
and directories: held by the mount, by path, for its life, never stored in Zarr (as a
`--raw` mount holds them where a store keeps none). A time set is shown until the mount
changes the node again: a file never shows a time from before a change (times.py)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import replace

from ...store import FileMeta

KEPT = 100_000  # paths held at most; the oldest set is forgotten first


class HeldModes:
    """Thread-safe. Each path holds what was set and its node's change time then."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[FileMeta, float | None]] = OrderedDict()
        self._lock = threading.Lock()

    def set(self, path: str, meta: FileMeta, node_time: float | None) -> None:
        with self._lock:
            known, at = self._held.pop(path, (FileMeta(), node_time))
            if at != node_time:  # its times were for an older content
                known = replace(known, atime_ns=None, mtime_ns=None)
            self._held[path] = (known.updated(meta), node_time)
            while len(self._held) > KEPT:
                self._held.popitem(last=False)

    def shown(self, path: str, node_time: float | None) -> FileMeta | None:
        with self._lock:
            held = self._held.get(path)
        if held is None:
            return None
        meta, at = held
        return meta if at == node_time else replace(meta, atime_ns=None, mtime_ns=None)

    def moved(self, src: str, dst: str) -> None:
        """`src` (and what is below it) is at `dst` now."""
        with self._lock:
            for path in [p for p in self._held if p == src or p.startswith(src + "/")]:
                self._held[dst + path[len(src) :]] = self._held.pop(path)

    def restamp(self, path: str, node_time: float | None) -> None:
        """`path`'s node was made of the file it names, now (a `.npy` at its close): what
        was set on the file holds for the node."""
        with self._lock:
            held = self._held.get(path)
            if held is not None:
                self._held[path] = (held[0], node_time)

    def forget(self, path: str) -> None:
        with self._lock:
            for held in [p for p in self._held if p == path or p.startswith(path + "/")]:
                del self._held[held]
