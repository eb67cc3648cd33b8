"""The entries paths resolved to, kept for the tree (tree.py) so that a request for a path
(a `find` makes several per directory) does not walk it from the root again."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ..below import PathsBelow

if TYPE_CHECKING:
    from .entries import Entry

# what a path kept costs with its entry (its name, the entry, the tuple, the dictionary's
# and the index's slots; measured with tracemalloc over a walk of a group of small arrays)
ENTRY_BYTES = 400
# of the metadata share of --memory-target, what the paths kept may hold (16 MiB, some
# 42,000 paths, of the default's 128 MiB)
RESOLVED_SHARE = 1 / 8


class ResolvedPaths:
    """Path -> (valid until, entry). Each entry is kept until the time its resolver gives
    (when the oldest node state it came from expires) or until `drop` of its path or a
    path above it. An entry resolved while a drop happened is not kept (`generation`)."""

    def __init__(self, metadata_limit: int = 128 << 20) -> None:
        # paths kept; past it, the expired ones go, or all
        self.most = max(64, int(metadata_limit * RESOLVED_SHARE) // ENTRY_BYTES)
        self._known: dict[str, tuple[float, Entry]] = {}
        # a drop visits what is below its path, not every path kept
        self._below = PathsBelow(lambda path: path in self._known)
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """What the paths kept are counted for against the metadata share."""
        return len(self._known) * ENTRY_BYTES

    @property
    def generation(self) -> int:
        return self._generation

    def get(self, vpath: str, now: float) -> tuple[float, Entry] | None:
        known = self._known.get(vpath)
        return known if known is not None and now < known[0] else None

    def keep(self, vpath: str, known: tuple[float, Entry], generation: int, now: float) -> None:
        """Keep what was resolved from the state of things at `generation`, unless a drop
        came meanwhile (the entry may then be stale)."""
        with self._lock:
            if generation != self._generation:
                return
            if len(self._known) >= self.most:
                self._known = {p: k for p, k in self._known.items() if k[0] > now}
                if len(self._known) >= self.most // 2:
                    self._known = {}
                self._below.clear()
                for p in self._known:
                    self._below.add(p)
            self._known[vpath] = known
            self._below.add(vpath)

    def drop(self, path: str) -> None:
        """Forget the entries of `path` and of every path below it ("": all)."""
        with self._lock:
            self._generation += 1
            if not path:
                self._known = {}
                self._below.clear()
                return
            found = self._below.at_and_below(path)
            for p in found:
                self._known.pop(p, None)
            self._below.cut(path, found)
