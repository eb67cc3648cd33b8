"""When the consolidated metadata a store carries is rewritten after changes made through
the mount (format/consolidation.py says what is written): at quiet points, in the
background; at `fsync` of a document; before unmount completes. A change first learns
that the consolidated documents above it can be written, so one that cannot be kept
true fails, unmade, with the store's errno."""

from __future__ import annotations

import logging
import threading
import time

from ...format.consolidation import ConsolidatedUpkeep, groups_of
from ..errors import FsError, errno_for, log_failure
from .documents import DocumentLocks

log = logging.getLogger(__name__)

# written once changes have stopped for QUIET seconds, and at least every MOST seconds
# while they go on (a burst of `rm` or a `cp -r` rewrites a large .zmetadata a few times)
QUIET = 0.5
MOST = 5.0
RETRY = 5.0  # after a failed write, in the background
CLOSE_WRITES = 5  # writes at unmount, while each finds nodes changed by other writers


class ConsolidationWriter:
    """Thread-safe. Its thread is started with the first change; `close` stops it and
    writes what is left. Every write holds the documents locks of the groups it reads and
    writes (a concurrent `setfattr` on one is never undone); callers hold none of them."""

    def __init__(self, upkeep: ConsolidatedUpkeep, documents: DocumentLocks) -> None:
        self.upkeep = upkeep
        upkeep.listener = self.changed
        self._documents = documents
        self._wake = threading.Condition()
        self._first: float | None = None  # when the oldest unwritten change came
        self._last = 0.0  # when the newest came
        self._checked: set[str] = set()  # groups whose documents were found writable (or carry none)
        self._failed: BaseException | None = None  # the last write's failure, until one succeeds
        self._thread: threading.Thread | None = None
        self._closed = False

    def before_change(self, path: str) -> None:
        """Call before changing the node at `path` (its documents, or the set of nodes):
        after a failed write, the changes still unwritten are written first; the first
        time, the consolidated documents above `path` are rewritten as they are. Raises
        FsError with the store's errno where that fails: the change is not to be made."""
        groups = groups_of(path) - {path}  # (its own .zmetadata, if any, is written, not probed)
        with self._wake:
            if self._failed is None and groups <= self._checked:
                return
        try:
            self._write(probe=(path,))
        except Exception as exc:
            raise FsError(errno_for(exc), f"the consolidated metadata cannot be updated: {exc}") from None
        with self._wake:
            self._checked |= groups

    def changed(self) -> None:
        """A change was made: write it at the next quiet point."""
        now = time.monotonic()
        with self._wake:
            if self._closed:
                return
            self._first = self._first or now
            self._last = now
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="zarrfs-consolidated", daemon=True)
                self._thread.start()
            self._wake.notify()

    def sync(self) -> None:
        """Write what is pending now (fsync of a document); FsError where that fails."""
        try:
            self._write(now=True)
        except Exception as exc:
            raise FsError(errno_for(exc), f"the consolidated metadata cannot be updated: {exc}") from None

    def close(self) -> None:
        """Stop the thread, then write what is left (failures are logged: at unmount nobody
        is left to tell)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
        # (a write may find nodes other writers changed meanwhile: written again)
        for _ in range(CLOSE_WRITES):
            if not self.upkeep.pending:
                break
            try:
                self._write(now=True)
            except Exception as exc:
                log_failure("flush at unmount", "/ (consolidated metadata)", exc)
                break

    # ------------------------------------------------------------------ internals
    def _write(self, probe: tuple[str, ...] = (), now: bool = False) -> None:
        with self._wake:
            self._first = None  # what comes from now on waits for the next quiet point
        try:
            self.upkeep.flush(probe, locked=lambda groups: self._documents.held(tuple(groups)), now=now)
        except BaseException as exc:
            with self._wake:
                if self._failed is None:
                    log_failure("consolidated metadata", "/", exc)
                self._failed = exc
                self._first = self._first or time.monotonic()
            raise
        with self._wake:
            if self._failed is not None:
                log.warning("consolidated metadata: written again after the failure")
            self._failed = None
            if self.upkeep.pending:  # changed meanwhile
                self._first = self._first or time.monotonic()

    def _run(self) -> None:
        with self._wake:
            while not self._closed:
                if self._first is None:
                    self._wake.wait()
                    continue
                now = time.monotonic()
                delay = RETRY if self._failed is not None else QUIET
                due = min(self._last + delay, self._first + max(MOST, delay))
                if now < due:
                    self._wake.wait(due - now)
                    continue
                self._wake.release()
                try:
                    self._write()
                except Exception:
                    pass  # logged once; tried again after RETRY
                finally:
                    self._wake.acquire()
