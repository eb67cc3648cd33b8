"""Names of the decoded tree that an unlink or a rename took away while their node stays in
the store: a metadata document unlinked (as `rm -r`, tar and cpio do before they make it
again) or renamed away (vim's `backupcopy=no`), and the views of a node whose document was
unlinked (`rm -r` on its way to the rmdir that erases the node), and a chunk file removed
again with nothing written to its array since (the first removal erased the chunk, whose
file stays and reads as the fill value). Such a name is not found or listed until it is
made again (a document written in its node, the chunk file created, its array written)
or the node is erased or moved: an unlink that answered 0 and left its name there had tar
remove and make it again forever."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ...store.keys import join_path
from ..directories import parent_of
from .entries import CHUNK, Entry

CHUNKS = "chunks"  # the directory of an array's chunk files

ERASED_KEPT = 1 << 12  # chunk files whose removal is remembered (the latest)


class RemovedNames:
    """Thread-safe. File paths, each in its node's directory."""

    def __init__(self) -> None:
        self._paths: set[str] = set()
        # chunk files removed, each with its array's changes then: removed again with none
        # since (tar, which removes and makes a file again), the name goes too
        self._erased: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()

    def erased(self, path: str, changes: object) -> None:
        with self._lock:
            self._erased.pop(path, None)
            self._erased[path] = changes
            while len(self._erased) > ERASED_KEPT:
                self._erased.popitem(last=False)

    def erased_since(self, path: str, changes: object) -> bool:
        """Whether the chunk file at `path` was removed and its array has not changed since."""
        with self._lock:
            return self._erased.get(path, None) == changes

    def hide(self, path: str) -> None:
        with self._lock:
            self._paths.add(path)

    def made_again(self, path: str, resolve: Callable[[str], Entry]) -> Entry | None:
        """The chunk file at `path`, where its name was taken away and it is made again."""
        if not self.hides(path):
            return None
        entry = resolve(path)
        return entry if entry.kind == CHUNK else None

    def show(self, path: str) -> None:
        with self._lock:
            self._paths.discard(path)

    def show_chunks(self, node_path: str) -> None:
        """The array at `node_path` was written: its chunk files are back."""
        if not self._paths:
            return
        prefix = join_path(node_path, CHUNKS) + "/"
        with self._lock:
            self._paths = {p for p in self._paths if not p.startswith(prefix)}

    def hides(self, path: str) -> bool:
        if not self._paths:  # (no lock: most mounts never remove a name)
            return False
        with self._lock:
            return path in self._paths

    def show_in(self, directory: str) -> None:
        """A document is written in the node at `directory` again: its names are back."""
        if not self._paths:
            return
        with self._lock:
            self._paths = {p for p in self._paths if parent_of(p) != directory}

    def forget(self, node_path: str) -> None:
        """The node at `node_path` was erased or moved: nothing at or below it is hidden."""
        if not self._paths:
            return
        prefix = node_path + "/" if node_path else ""
        with self._lock:
            self._paths = {p for p in self._paths if not p.startswith(prefix)}
