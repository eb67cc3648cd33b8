"""The locks of the hierarchy's metadata documents, one per node path: a read-modify-write
or store of a node's documents holds its node's; an erasure or move holds its node's whole
subtree. Changes of unrelated nodes never wait for each other (an array's document store
may first store gigabytes of its buffered `data`, or wait a store's deadline)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


def _under(path: str, top: str) -> bool:
    return not top or path == top or path.startswith(top + "/")


def _overlap(a: tuple[str, bool], b: tuple[str, bool]) -> bool:
    """Whether two holds (path, whole subtree) cover a node in common."""
    (p, p_subtree), (q, q_subtree) = a, b
    return p == q or (q_subtree and _under(p, q)) or (p_subtree and _under(q, p))


class DocumentLocks:
    """Thread-safe. A thread takes everything it needs at once (`held`), waiting until none
    of it is held by another, and never takes more while it holds some: no order between
    the locks, no deadlock. Not re-entrant."""

    def __init__(self) -> None:
        self._held: list[tuple[str, bool]] = []  # (node path, whole subtree), one per hold
        self._released = threading.Condition()

    @contextlib.contextmanager
    def held(self, nodes: tuple[str, ...] = (), subtrees: tuple[str, ...] = ()) -> Iterator[None]:
        """The documents of `nodes`, and of every node at and below `subtrees`, for this
        thread alone until the block ends."""
        wanted = [(p, False) for p in nodes] + [(p, True) for p in subtrees]
        with self._released:
            while any(_overlap(w, h) for w in wanted for h in self._held):
                self._released.wait()
            self._held.extend(wanted)
        try:
            yield
        finally:
            with self._released:
                for hold in wanted:
                    self._held.remove(hold)
                self._released.notify_all()
