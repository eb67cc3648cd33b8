"""Inode numbers for virtual paths: stable for the life of a mount (a path keeps its number
even after the kernel forgets it), allocated on first sight."""

from __future__ import annotations

import itertools
import threading

ROOT_INODE = 1  # FUSE's


class InodeTable:
    def __init__(self) -> None:
        self._by_path: dict[str, int] = {"": ROOT_INODE}
        self._by_inode: dict[int, str] = {ROOT_INODE: ""}
        self._next = itertools.count(ROOT_INODE + 1)
        self._lock = threading.Lock()

    def inode(self, vpath: str) -> int:
        ino = self._by_path.get(vpath)
        if ino is None:
            with self._lock:  # worker threads see paths first too (attributes of listings)
                ino = self._by_path.get(vpath)
                if ino is None:
                    ino = next(self._next)
                    self._by_path[vpath] = ino
                    self._by_inode[ino] = vpath
        return ino

    def path(self, inode: int) -> str:
        return self._by_inode[inode]

    def items(self) -> list[tuple[str, int]]:
        with self._lock:
            return list(self._by_path.items())

    def remove_tree(self, path: str) -> None:
        """After a file or directory was removed: a new one at `path` gets a new number."""
        with self._lock:
            for p in [p for p in self._by_path if p == path or p.startswith(path + "/")]:
                self._by_inode.pop(self._by_path.pop(p), None)

    def rename_tree(self, old: str, new: str) -> None:
        """After a node moved: paths below `old` now live below `new` (same inodes)."""
        with self._lock:
            moved = [(p, i) for p, i in self._by_path.items() if p == old or p.startswith(old + "/")]
            for path, ino in moved:
                del self._by_path[path]
            for path, ino in moved:
                target = new + path[len(old):]
                stale = self._by_path.pop(target, None)
                if stale is not None:
                    self._by_inode.pop(stale, None)
                self._by_path[target] = ino
                self._by_inode[ino] = target

