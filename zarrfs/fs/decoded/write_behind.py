"""Write-behind of `data`: the chunks of an array wholly written are stored in the
background once WRITE_BEHIND bytes of them are ready, and past the mount's dirty limit
(of every array's buffered writes together) a write stores everything now."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..errors import log_failure

if TYPE_CHECKING:
    from ...format.pending import PendingWrites
    from .registry import PendingRegistry

WRITE_BEHIND = 32 << 20


class WriteBehind:
    """One background thread storing for the whole mount. Thread-safe."""

    def __init__(self, pending: PendingRegistry, dirty_limit: int) -> None:
        self.pending = pending
        self.dirty_limit = dirty_limit
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zarrfs-write-behind")
        self._writing: set[PendingWrites] = set()
        self._lock = threading.Lock()

    def wrote(self, pending: PendingWrites, may_block: bool) -> bool:
        """After a write to the array's `data`: start storing its wholly written chunks in
        the background, and past the dirty limit store everything now. Without `may_block`
        (before a write on the event loop) nothing is stored here: False means the write
        must go to a thread, past the limit."""
        if sum(p.nbytes for p in self.pending.dirty()) > self.dirty_limit:
            if not may_block:
                return False
            try:
                pending.flush()
            except Exception as exc:  # kept pending: the close reports it
                log_failure("write", "/" + pending.array.path + "/data", exc)
            return True
        with self._lock:
            if pending in self._writing or pending.complete_nbytes < WRITE_BEHIND:
                return True
            self._writing.add(pending)
        self._pool.submit(self._store, pending)
        return True

    def _store(self, pending: PendingWrites) -> None:
        """A failure here is logged; the chunks stay pending and the next flush (close,
        fsync) stores them or reports the error to the writer."""
        try:
            pending.store_complete()
        except Exception as exc:
            log_failure("write-behind", "/" + pending.array.path + "/data", exc)
        finally:
            with self._lock:
                self._writing.discard(pending)

    def settled(self) -> None:
        """Wait for what the background thread has been given."""
        self._pool.submit(lambda: None).result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
