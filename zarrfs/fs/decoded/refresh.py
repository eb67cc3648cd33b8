"""Refreshes of the decoded tree's metadata once `--metadata-ttl` has passed (docs/errors.md,
Deadlines), waited for a moment only: past that a request is answered from what was
known, and the refresh's result replaces it when it comes (stale-while-revalidate)."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any, TypeVar, cast

from ...store import DeadlinePool, StoreUnavailableError

log = logging.getLogger(__name__)

T = TypeVar("T")

# what a refresh is of: ("node", path) or ("children", path)
RefreshKey = tuple[str, str]

# how long a request waits for a refresh before it is answered from what was known: a
# store that answers at all answers a document or a listing within this
PROMPT = 0.25
# refreshes running at once (no more start while one is late: see Refreshes)
_WORKERS = 16


class Stale(Exception):
    """The refresh did not come back promptly: answer from what was known."""


class Refreshes:
    """The refreshes running, by key (one per node or listing). While one has run past
    PROMPT (the store is slow now), requests wait for none and no other starts: what is
    known is served until it comes back, so that a stalled store holds a few threads,
    not one per node. The pool is a DeadlinePool (daemon threads): a local store's calls
    run on its threads with no hand-over, and one stuck past --timeout fails its refresh
    and is left behind."""

    def __init__(self) -> None:
        self._running: dict[RefreshKey, tuple[float, Future[Any]]] = {}
        self._lock = threading.Lock()
        self._pool = DeadlinePool(_WORKERS, "zarrfs-refresh")

    def overdue(self) -> bool:
        """Whether a refresh has been running for longer than PROMPT."""
        now = time.monotonic()
        with self._lock:
            return any(now - started > PROMPT for started, _ in self._running.values())

    def idle(self) -> bool:
        """Whether no refresh is running."""
        with self._lock:
            return not self._running

    def run(self, key: RefreshKey, refresh: Callable[[], T], along: Collection[RefreshKey] = ()) -> T | None:
        """refresh()'s result, from the refresh of `key` running or started now; Stale
        when it does not come back within PROMPT of its start (at once while another is
        overdue: then none is started). A refresh started now refreshes the keys `along`
        too (those not running already): asked for one of them meanwhile, it is waited
        for, and gives None (what it refreshed is known by then)."""
        now = time.monotonic()
        followers: list[tuple[RefreshKey, Future[None]]] = []
        with self._lock:
            slow = any(now - started > PROMPT for started, _ in self._running.values())
            running = self._running.get(key)
            if running is None:
                if slow:
                    raise Stale()
                running = self._running[key] = (now, self._pool.submit(refresh))
                followers = [(k, _done_with(running[1])) for k in along if k not in self._running]
                self._running.update((k, (now, follower)) for k, follower in followers)
                added = True
            else:
                added = False
        started, future = running
        if added:  # (outside the lock: a refresh done already calls back at once)
            future.add_done_callback(lambda done: self._done(key, done))
            for other, follower in followers:
                follower.add_done_callback(functools.partial(self._done, other))
        left = started + PROMPT - now
        if slow or left <= 0:
            raise Stale()
        try:
            return cast(T, future.result(timeout=left))
        except concurrent.futures.TimeoutError:
            raise Stale() from None

    def _done(self, key: RefreshKey, future: Future[Any]) -> None:
        with self._lock:
            if self._running.get(key, (0, None))[1] is future:
                del self._running[key]
        error = None if future.cancelled() else future.exception()
        if isinstance(error, StoreUnavailableError):  # its thread left behind (the refresh logs the others)
            log.warning("refresh of %s %r: %s; serving the metadata read before", *key, error)


def _done_with(future: Future[Any]) -> Future[None]:
    """A future that comes to None once `future` is done (whatever its outcome)."""
    follower: Future[None] = Future()
    future.add_done_callback(lambda _: follower.set_result(None))
    return follower
