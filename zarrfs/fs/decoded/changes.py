"""What the decoded core keeps of the changes made through the mount: the files open for
writing, the contents whose store failed at their last close (stored again at unmount
only where nothing changed their node since), the changes counted for those, and the
arrays being emptied by `rm -r` (their metadata document unlinked before the rmdir).

A failed content is let go as soon as it can never be stored: when its node changes
(a later write, erasure or move through the mount, or a write to its array's `data`), or
when a later close of the same file fails too (unmount would store that one over it).
Only its name is kept, to be logged at unmount (at most SUPERSEDED_KEPT): a mount whose
store fails now and then keeps one content per file still waiting, not one per failure."""

from __future__ import annotations

import errno
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from ...store.keys import ancestors
from ..errors import FsError
from .files import BufferFile

if TYPE_CHECKING:
    from ..core import OpenFile
    from .registry import PendingRegistry

EMPTIED_KEPT = 1 << 12
SUPERSEDED_KEPT = 1_000


def _same_file(file: BufferFile) -> tuple[object, ...]:
    """What names the file a content is for: its node, and its chunk or document there."""
    return (type(file), file.node_path, getattr(file, "coords", None), getattr(file, "name", None))


class MountChanges:
    """Thread-safe: every table under one lock."""

    def __init__(self, pending: PendingRegistry) -> None:
        self._pending = pending
        self._lock = threading.Lock()
        self._writers: dict[int, tuple[str, OpenFile]] = {}  # opens for writing, by id
        self._unstored: list[BufferFile] = []  # whose store failed at their last close
        # those let go since (never stored): one per file, logged at unmount
        self._superseded: OrderedDict[tuple[object, ...], BufferFile] = OrderedDict()
        self._changes: dict[str, int] = {}  # node path -> writes, erasures and moves through the mount
        # arrays whose metadata document was unlinked (as `rm -r` does before its rmdir):
        # only those are erased by rmdir, a bare `rmdir ARRAY` is ENOTEMPTY (at most
        # EMPTIED_KEPT remembered, the oldest forgotten first)
        self._emptied: OrderedDict[str, None] = OrderedDict()

    # ------------------------------------------------------------ opens for writing
    def opened(self, path: str, file: OpenFile) -> None:
        with self._lock:
            self._writers[id(file)] = (path, file)

    def closed(self, file: OpenFile) -> None:
        with self._lock:
            self._writers.pop(id(file), None)

    def check_not_open_for_writing(self, node_path: str) -> None:
        """A node cannot be erased or moved while a file in it is open for writing: the
        writes would land under a name that no longer holds the node."""
        prefix = node_path + "/"
        with self._lock:
            busy = [p for p, _ in self._writers.values() if p.startswith(prefix)]
        if busy:
            raise FsError(errno.EBUSY, f"/{busy[0]} is open for writing")

    # ------------------------------------------------------------ changes counted
    def unstored(self, file: BufferFile) -> None:
        with self._lock:
            file.unstored_at = self._changes_of(file.node_path)
            same = _same_file(file)
            self._unstored = [f for f in self._unstored if f is not file]
            self._let_go(
                [f for f in self._unstored if _same_file(f) == same or self._changes_of(f.node_path) != f.unstored_at]
            )
            self._unstored.append(file)

    def touched(self, node_path: str) -> None:
        """The node at `node_path` (and what is below it) was written, erased or moved."""
        with self._lock:
            # counted only where a store that failed waits for unmount (_changes_of): the
            # table grows with the nodes that matter to one, not with every node written
            below = [f for f in self._unstored if node_path == f.node_path or node_path in ancestors(f.node_path)]
            if below:
                self._changes[node_path] = self._changes.get(node_path, 0) + 1
                self._let_go(below)

    def _let_go(self, files: list[BufferFile]) -> None:
        """`files` will never be stored: their contents are dropped, their names kept."""
        for file in files:
            self._unstored.remove(file)
            file.let_go()
            self._superseded.pop(_same_file(file), None)
            self._superseded[_same_file(file)] = file
        while len(self._superseded) > SUPERSEDED_KEPT:
            self._superseded.popitem(last=False)

    def changes_of(self, node_path: str) -> tuple[int, int]:
        with self._lock:
            return self._changes_of(node_path)

    def _changes_of(self, node_path: str) -> tuple[int, int]:
        """What has changed the node at `node_path` so far: changes through the mount to
        it or to a node above it, and its array's writes to `data`, buffered or stored
        (write-behind too)."""
        path, changes = node_path, 0
        while True:
            changes += self._changes.get(path, 0)
            if not path:
                break
            path = path.rpartition("/")[0]
        return changes, sum(p.version + p.stores for p in self._pending.under(node_path))

    def counted(self) -> int:
        """How many nodes have their changes counted (stats: nodes_tracked)."""
        with self._lock:
            return len(self._changes)

    def left_at_unmount(self) -> tuple[list[BufferFile], list[BufferFile]]:
        """The contents to store at unmount (those open for writing, those that failed
        to store at their last close and whose node nothing changed since), and those that
        failed and are not stored again: a content is never stored over a later write."""
        with self._lock:
            self._let_go([f for f in self._unstored if self._changes_of(f.node_path) != f.unstored_at])
            files = [f for _, f in self._writers.values() if isinstance(f, BufferFile)]
            # handed over: the stores that follow touch their nodes, and must not let them go
            files += self._unstored
            self._unstored = []
            superseded = list(self._superseded.values())
        return files, superseded

    # ------------------------------------------------------------ arrays emptied
    def emptying(self, node_path: str) -> None:
        """The array's metadata document was unlinked: the rmdir that follows erases it."""
        with self._lock:
            self._emptied[node_path] = None
            while len(self._emptied) > EMPTIED_KEPT:
                self._emptied.popitem(last=False)

    def emptied(self, node_path: str) -> bool:
        with self._lock:
            return node_path in self._emptied

    def end_emptying(self, node_path: str) -> bool:
        """The node is not on its way out (any more); whether it was."""
        with self._lock:
            return self._emptied.pop(node_path, 0) is None

    def moved(self, src: str, dst: str) -> None:
        """A document removed is the moved node's, not the next one's there."""
        with self._lock:
            for path in [p for p in self._emptied if p in (src, dst) or p.startswith((src + "/", dst + "/"))]:
                del self._emptied[path]
