"""Inode numbers for virtual paths, allocated on first sight and kept while the kernel
knows them: each entry handed to the kernel (lookup, readdirplus, create, mkdir, link)
counts one lookup, `forget` takes them back, and a number the kernel has forgotten is
dropped, so that the table holds what the kernel holds (not every path ever listed)."""

from __future__ import annotations

import itertools
import threading

from .below import PathsBelow

ROOT_INODE = 1  # FUSE's


class InodeTable:
    def __init__(self) -> None:
        self._by_path: dict[str, int] = {"": ROOT_INODE}
        self._by_inode: dict[int, str] = {ROOT_INODE: ""}
        # the kernel's lookups of each number, where not one (most numbers a walk hands out
        # are looked up once: a table of those would be some 40 bytes of 320 a number)
        self._lookups: dict[int, int] = {}
        # what is below a path, found without a pass over every path the kernel knows
        self._below = PathsBelow(lambda path: path in self._by_path)
        self._next = itertools.count(ROOT_INODE + 1)
        self._lock = threading.Lock()

    def inode(self, vpath: str) -> int:
        """The number of `vpath`, without a lookup counted (getattr, `.` and `..`)."""
        ino = self._by_path.get(vpath)
        if ino is None:
            with self._lock:  # the notifier thread reads the table meanwhile
                ino = self._number(vpath)
        return ino

    def lookup(self, vpath: str) -> int:
        """The number of `vpath`, handed to the kernel: one lookup more."""
        with self._lock:
            ino = self._number(vpath)
            count = self._lookups.pop(ino, 1) + 1
            if count != 1:
                self._lookups[ino] = count
            return ino

    def _number(self, vpath: str) -> int:
        """The number of `vpath`, allocated on first sight (the lock held)."""
        ino = self._by_path.get(vpath)
        if ino is None:
            ino = next(self._next)
            self._by_path[vpath] = ino
            self._by_inode[ino] = vpath
            self._lookups[ino] = 0  # (none yet: `lookup` counts one)
            self._below.add(vpath)
        return ino

    def _subtree(self, path: str) -> tuple[list[str], list[str]]:
        """(the numbered paths at and below `path`, every path visited), the lock held."""
        visited = self._below.at_and_below(path)
        return [p for p in visited if p in self._by_path], visited

    def under(self, path: str) -> list[int]:
        """The numbers of `path` and of the paths below it."""
        with self._lock:
            return [self._by_path[p] for p in self._subtree(path)[0]]

    def _cut(self, path: str) -> list[tuple[str, int]]:
        """Take `path` and what is below it out of the table: their (path, number)."""
        numbered, visited = self._subtree(path)
        out = [(p, self._by_path.pop(p)) for p in numbered]
        self._below.cut(path, visited)
        return out

    def forget(self, ino: int, nlookup: int) -> None:
        """The kernel forgot `nlookup` lookups of `ino`; at none left, the number goes."""
        if ino == ROOT_INODE:
            return
        with self._lock:
            left = self._lookups.get(ino, 1) - nlookup
            if left > 0:
                if left == 1:
                    self._lookups.pop(ino, None)
                else:
                    self._lookups[ino] = left
                return
            self._lookups.pop(ino, None)
            path = self._by_inode.pop(ino, None)
            if path is not None and self._by_path.get(path) == ino:
                del self._by_path[path]
                self._below.discard(path)

    def known(self, vpath: str) -> int | None:
        return self._by_path.get(vpath)

    def path(self, inode: int) -> str:
        return self._by_inode[inode]

    def find(self, inode: int) -> str | None:
        """The path of `inode`; None once what it named was removed."""
        return self._by_inode.get(inode)

    def items(self) -> list[tuple[str, int]]:
        with self._lock:
            return list(self._by_path.items())

    def __len__(self) -> int:
        return len(self._by_inode)

    def remove_tree(self, path: str) -> None:
        """After a file or directory was removed: a new one at `path` gets a new number."""
        with self._lock:
            for _, ino in self._cut(path):
                self._by_inode.pop(ino, None)
                self._lookups.pop(ino, None)

    def rename_tree(self, old: str, new: str) -> None:
        """After a node moved: paths below `old` now live below `new` (same inodes)."""
        with self._lock:
            moved = self._cut(old)
            for path, ino in moved:
                target = new + path[len(old) :]
                stale = self._by_path.pop(target, None)
                if stale is not None:
                    self._by_inode.pop(stale, None)
                    self._lookups.pop(stale, None)
                self._by_path[target] = ino
                self._by_inode[ino] = target
                self._below.add(target)
