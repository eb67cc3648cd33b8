"""What lies below a path among paths held by name (the kernel's inode numbers, the
entries paths resolved to), found without a pass over them all: a group of N arrays
holds some 12 N paths, and removing one array asks for the few below it."""

from __future__ import annotations

from collections.abc import Callable


class PathsBelow:
    """Path -> the paths one level below it that are held or lead to one that is. Not
    thread-safe: its owner's lock guards it; `held` tells whether the owner holds a path."""

    def __init__(self, held: Callable[[str], bool]) -> None:
        self._below: dict[str, set[str]] = {}
        self._held = held

    def clear(self) -> None:
        self._below = {}

    def add(self, path: str) -> None:
        while path:
            parent = path.rpartition("/")[0]
            below = self._below.setdefault(parent, set())
            if path in below:
                return
            below.add(path)
            path = parent

    def discard(self, path: str) -> None:
        """After the owner let `path` go: its links go, unless they lead to one held."""
        while path and not self._held(path) and not self._below.get(path):
            self._below.pop(path, None)
            parent = path.rpartition("/")[0]
            below = self._below.get(parent)
            if below is None:
                return
            below.discard(path)
            path = parent

    def at_and_below(self, path: str) -> list[str]:
        """`path` and every path linked below it (held or not: the owner tells)."""
        found, at = [], [path]
        while at:
            p = at.pop()
            found.append(p)
            at.extend(self._below.get(p, ()))
        return found

    def cut(self, path: str, found: list[str]) -> None:
        """After the owner let go what `at_and_below(path)` found: their links go."""
        for p in found:
            self._below.pop(p, None)
        self.discard(path)
