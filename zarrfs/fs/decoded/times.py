"""When the mount last changed each node of the decoded tree (a write stored, a chunk
erased, the node made, moved or removed): the mtime its files show, and the files of the
groups above it (their views and consolidated metadata cover it). A node moved changes
every node below it too: they hold other nodes' names now.

A file the mount never changed shows the mount's start time: the store's own times are
not read (the bytes of `data` change with any chunk's, whose times a stat cannot ask for),
so a file never shows a time from before a change it went through, and a remount shows a
later time still. `rsync -a` from the mount then copies a changed file again, never skips
it as unchanged (its size, fixed by the shape, stays the same). The times given never go
back, even where the clock does."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from ...store.keys import ancestors

# the nodes changed last that are kept (and as many subtrees; about 200 bytes each); one
# forgotten, and every node never changed, shows the latest time forgotten (the floor) from
# then on: later than any change it had. Small, so that a mount churning nodes reaches it
# within minutes and stays flat (docs/reliability.md, the soak)
KEPT = 1 << 12


class NodeTimes:
    """Thread-safe."""

    def __init__(self) -> None:
        self._times: OrderedDict[str, float] = OrderedDict()  # node -> its last change
        self._below: OrderedDict[str, float] = OrderedDict()  # node -> last change of all below it
        self._floor: float | None = None
        self._last = 0.0  # the latest time given
        self._lock = threading.Lock()

    def touch(self, node_path: str, below: bool = False) -> None:
        """The node at `node_path` changed now (and so, for their views, the groups above
        it); `below`: every node below it too (it was moved there)."""
        with self._lock:  # (the clock read under it: a touch never gives an earlier time than one before)
            now = self._last = max(time.time(), self._last)
            for path in (node_path, *ancestors(node_path)):
                self._times.pop(path, None)
                self._times[path] = now
            if below:
                self._below.pop(node_path, None)
                self._below[node_path] = now
            for kept in (self._times, self._below):
                while len(kept) > KEPT:
                    forgotten = kept.popitem(last=False)[1]
                    self._floor = forgotten if self._floor is None else max(self._floor, forgotten)

    def get(self, node_path: str) -> float | None:
        """The mtime of the node's files, or None: the mount's start time."""
        with self._lock:
            found = [self._times.get(node_path), self._floor]
            if self._below:
                found += [self._below.get(path) for path in (node_path, *ancestors(node_path))]
        return max((t for t in found if t is not None), default=None)
