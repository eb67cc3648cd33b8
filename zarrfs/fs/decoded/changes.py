"""What the decoded core keeps of the changes made through the mount: the files open for
writing, the contents whose store failed at their last close (stored again at unmount
only where nothing changed their node since), the changes counted for those, and the
arrays being emptied by `rm -r` (their metadata document unlinked before the rmdir)."""

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

EMPTIED_KEPT = 10_000


class MountChanges:
    """Thread-safe: every table under one lock."""

    def __init__(self, pending: PendingRegistry) -> None:
        self._pending = pending
        self._lock = threading.Lock()
        self._writers: dict[int, tuple[str, OpenFile]] = {}  # opens for writing, by id
        self._unstored: list[BufferFile] = []  # whose store failed at their last close
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
            self._unstored.append(file)

    def touched(self, node_path: str) -> None:
        """The node at `node_path` (and what is below it) was written, erased or moved."""
        with self._lock:
            # counted only where a store that failed waits for unmount (_changes_of): the
            # table grows with the nodes that matter to one, not with every node written
            if any(node_path == f.node_path or node_path in ancestors(f.node_path) for f in self._unstored):
                self._changes[node_path] = self._changes.get(node_path, 0) + 1

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
            superseded = [f for f in self._unstored if self._changes_of(f.node_path) != f.unstored_at]
            files = [f for _, f in self._writers.values() if isinstance(f, BufferFile)]
            files += [f for f in self._unstored if f not in superseded]
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
