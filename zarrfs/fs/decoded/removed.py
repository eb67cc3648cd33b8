"""Names of the decoded tree that an unlink or a rename took away while their node stays in
the store: a metadata document unlinked (as `rm -r`, tar and cpio do before they make it
again) or renamed away (vim's `backupcopy=no`), and the views of a node whose document was
unlinked (`rm -r` on its way to the rmdir that erases the node). Such a name is not found
or listed until a document is written in its node again (or the node is erased or moved):
an unlink never answers 0 and leaves its name there, which has tar loop forever."""

from __future__ import annotations

import threading

from ..directories import parent_of


class RemovedNames:
    """Thread-safe. File paths, each in its node's directory."""

    def __init__(self) -> None:
        self._paths: set[str] = set()
        self._lock = threading.Lock()

    def hide(self, path: str) -> None:
        with self._lock:
            self._paths.add(path)

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
