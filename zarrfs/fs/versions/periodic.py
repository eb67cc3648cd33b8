"""`--commit-every SECONDS`: an Icechunk branch mount commits what is staged at that
interval, rebased onto other writers' commits, for jobs that run for long and never
unmount. A commit that conflicts leaves the changes staged and is logged; the next
interval tries again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ...store import CommitConflictError
from ..errors import log_failure

log = logging.getLogger(__name__)

MESSAGE = "zarrfs: periodic commit"


class PeriodicCommits:
    """Thread-safe. `start` begins the thread `zarrfs-commits`; `stop` ends it, waiting for
    a commit in progress. `commit(message)` commits what is staged (VersionsCore.commit
    with rebase) and raises CommitConflictError where the branch cannot take it."""

    def __init__(self, commit: Callable[[str], str], every: float) -> None:
        self._commit = commit
        self._every = every
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="zarrfs-commits", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                outcome = self._commit(MESSAGE)
            except CommitConflictError as exc:
                log.error("periodic commit: not committed, the changes stay staged: %s", exc.message)
            except Exception as exc:
                log_failure("periodic commit", "/.zarrfs/commit", exc)
            else:
                if not outcome.startswith("unchanged"):
                    log.info("periodic commit: %s", outcome)
