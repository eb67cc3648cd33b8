"""Which opens of the decoded tree's shared views (`data.npy`, the legacy views, a group's
views) have the kernel drop its pages of them: those opened after their node, or a node
below it, was written through the mount, since an open last had them dropped. A write to
`data` reaches the kernel's pages of `data` alone (and a chunk stored, those of no file at
once: fuse/pages.py tells it a moment later), so a program opening `data.npy` or a legacy
view after a write returned reads it."""

from __future__ import annotations

import threading

from ...store.keys import ancestors

# nodes and views whose last write, or last drop of the kernel's pages, is kept one by one
# (about 150 bytes each): past this the table is forgotten, and each view drops its pages
# once more. Small, so that a mount churning nodes reaches it within minutes and stays flat
PAGES_TABLES_KEPT = 1 << 12


class PageDrops:
    """Every write through the mount counted, the count at each node's last write, and at
    each view's last open that had the kernel drop its pages. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writes = 0
        self._written_at: dict[str, int] = {}
        self._dropped_at: dict[str, int] = {}
        self._written_before = 0  # the count when _written_at was last cleared (PAGES_TABLES_KEPT)

    def kept(self, path: str, node_path: str) -> bool:
        """Whether an open of the shared view at `path`, of the node at `node_path`, may
        keep the kernel's pages of it (else it has them dropped, and counts as having)."""
        with self._lock:
            if not self._written_at and not self._written_before:
                return True
            # (its own writes' or those below it; a node forgotten was written before then)
            latest = self._written_at.get(node_path, self._written_before)
            kept = self._dropped_at.get(path, 0) >= latest
            if not kept:
                if len(self._dropped_at) >= PAGES_TABLES_KEPT:
                    self._dropped_at.clear()  # (each such view drops its pages once more)
                self._dropped_at[path] = self._writes
            return kept

    def written(self, node_path: str) -> None:
        """Something of the node at `node_path` was written through the mount (before the
        write returns): the next open of each of its views, and of the views of the groups
        above it (theirs cover it), drops the kernel's pages."""
        with self._lock:
            self._writes += 1
            if len(self._written_at) >= PAGES_TABLES_KEPT:
                # forgotten nodes count as written now: every view drops its pages once more
                self._written_at.clear()
                self._written_before = self._writes
            for path in (node_path, *ancestors(node_path)):
                self._written_at[path] = self._writes

    def tracked(self) -> tuple[int, int]:
        """(nodes, views) kept one by one."""
        with self._lock:
            return len(self._written_at), len(self._dropped_at)
