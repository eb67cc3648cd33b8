"""The pending writes of every array of a mount, by path (format/pending.py holds one array's).
The mount makes the registry at start; pending.py, and numpy with it, come with the first
array read or written."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .entries import NotCached

if TYPE_CHECKING:
    from ...format import Array
    from ...format.pending import PendingWrites


class PendingRegistry:
    """The pending writes of every array of a mount, by path: one set per path, shared
    by every Array object opened on it, so a node read anew mid-write keeps them. A set
    is held while it has writes pending (from its first write until `dirty` finds it
    empty); else only while something uses it (a view of the array): a walk of N arrays
    leaves no N sets, each with its array's metadata."""

    def __init__(self, may_wait: Callable[[], bool] = lambda: True) -> None:
        self._by_path: weakref.WeakValueDictionary[str, PendingWrites] = weakref.WeakValueDictionary()
        self._held: dict[str, PendingWrites] = {}  # those written to, until found empty
        self._lock = threading.Lock()
        self._may_wait = may_wait  # False on the adapter's event loop, which must never wait

    def of(self, array: Array) -> PendingWrites:
        while True:
            with self._lock:
                pending = self._by_path.get(array.path)
                if pending is None:
                    pending = self._by_path[array.path] = self._made(array)
                    return pending
                if pending.array is array or pending.array.metadata == array.metadata:
                    return pending
            # the metadata changed: writes from now on go under the new, once nothing waits
            # under the old (its lock held meanwhile: no write lands in a set being replaced)
            if not pending.lock.acquire(blocking=self._may_wait()):
                raise NotCached(array.path)  # a store holds it: a worker thread asks again
            with _held(pending.lock), self._lock:
                if self._by_path.get(array.path) is not pending:
                    continue  # replaced by another thread meanwhile
                if pending:
                    return pending  # stored under the metadata they were made for first
                pending.current = False
                self._held.pop(array.path, None)
                pending = self._by_path[array.path] = self._made(array)
                return pending

    def _made(self, array: Array) -> PendingWrites:
        from ...format.pending import PendingWrites

        pending = PendingWrites(array)
        pending.on_write = self._written
        return pending

    def _written(self, pending: PendingWrites) -> None:
        with self._lock:
            if pending.current:
                self._held[pending.array.path] = pending

    def dirty(self) -> list[PendingWrites]:
        with self._lock:
            self._held = {k: p for k, p in self._held.items() if p}  # the empty: held no longer
            return list(self._held.values())

    def writing(self, path: str) -> bool:
        """Whether the array at `path` has writes pending (O(1): no pass over the arrays)."""
        with self._lock:
            return bool(self._by_path.get(path))

    def under(self, path: str) -> list[PendingWrites]:
        """Those of the arrays at and below `path`."""
        with self._lock:
            one = self._by_path.get(path)
            if one is not None:  # an array's: no array below it (a pass over all for one)
                return [one]
            return [p for k, p in list(self._by_path.items()) if not path or k == path or k.startswith(path + "/")]

    def forget(self, path: str) -> None:
        """After the node at `path` was erased or moved: its writes have nowhere to go."""
        with self._lock:
            self._held.pop(path, None)
            gone = self._by_path.pop(path, None)
            if gone is not None:  # an array's (as `under`)
                gone.current = False
                return
            for key in [k for k in list(self._by_path) if not path or k == path or k.startswith(path + "/")]:
                self._held.pop(key, None)
                gone = self._by_path.pop(key, None)
                if gone is not None:
                    gone.current = False


@contextlib.contextmanager
def _held(lock: threading.RLock) -> Iterator[None]:
    """A lock already acquired, released at the end of the block."""
    try:
        yield
    finally:
        lock.release()
