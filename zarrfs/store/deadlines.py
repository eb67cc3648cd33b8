"""Deadlines for store calls that block in the kernel (a local directory). A file on a
hung NFS or FUSE mount below the root holds its thread in uninterruptible sleep, and no
thread can be cancelled: so the thread is left behind. Each call runs on a thread of a
DeadlinePool; a watchdog fails the pool task whose call is still running at its deadline
(its waiter gets StoreUnavailableError at once) and the pool starts another thread in
place of the stuck one. A pool thread makes the call itself, with no hand-over: the
format layer's I/O stage is such a pool, so chunk fetches pay only the bookkeeping
(about a microsecond). Any other thread hands its call to the store's own pool and waits
on it. Threads left behind are bounded: past `max_stuck` of them a call fails at once.

UnansweredFetches is the same idea for a remote store, per key: what it did not answer
within a deadline fails at once for one deadline more, without asking again."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future, InvalidStateError
from typing import Any, TypeVar

from .errors import StoreUnavailableError

log = logging.getLogger(__name__)

T = TypeVar("T")

# a pool thread with nothing to do for this long ends (the store's own pool is one per
# store, and most stores are idle); so does a watchdog with no call to watch
IDLE_SECONDS = 10.0
# calls left running past their deadline, per store, before its calls fail at once
MAX_STUCK = 64
# the store's own pool: threads at once (about as many as there are threads that call a
# store in the daemon: FUSE workers, readahead, write-behind, so calls never queue)
HAND_OVER_THREADS = 64

_local = threading.local()


class _Worker:
    """A DeadlinePool thread: the task it runs, and whether it was left behind."""

    __slots__ = ("abandoned", "future", "pool")

    def __init__(self, pool: DeadlinePool) -> None:
        self.pool = pool
        self.future: Future[Any] | None = None
        self.abandoned = False


def _settle(future: Future[Any], result: Any = None, error: BaseException | None = None) -> None:
    """Resolve `future` unless it is done already (failed by the watchdog, or cancelled)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass


class DeadlinePool(Executor):
    """Up to `workers` daemon threads that run submitted calls (submit; map). A thread
    starts when a task finds none idle, and ends after IDLE_SECONDS without work. A
    thread left behind by Deadlines no longer counts: another may start in its place,
    and shutdown does not wait for it (nor does the interpreter at exit)."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        # (future, function, args, kwargs) of each call not yet begun
        self._tasks: collections.deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = (
            collections.deque()
        )
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)  # a task queued, or shutting down
        self._threads = 0  # running and not left behind
        self._idle = 0
        self._closed = False
        self._serial = 0

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to a pool that is shut down")
            self._tasks.append((future, fn, args, kwargs))
            if self._idle < len(self._tasks) and self._threads < self._workers:
                self._start()
            else:
                self._ready.notify()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            if cancel_futures:
                while self._tasks:
                    self._tasks.popleft()[0].cancel()
            self._ready.notify_all()
            while wait and self._threads:
                self._ready.wait()

    def _start(self) -> None:
        self._threads += 1
        self._serial += 1
        threading.Thread(target=self._work, name=f"{self._name}_{self._serial}", daemon=True).start()

    def _work(self) -> None:
        worker = _local.worker = _Worker(self)
        while True:
            with self._lock:
                idle_since = time.monotonic()
                while not self._tasks and not self._closed and time.monotonic() - idle_since < IDLE_SECONDS:
                    self._idle += 1
                    self._ready.wait(IDLE_SECONDS)
                    self._idle -= 1
                if not self._tasks:
                    self._threads -= 1
                    self._ready.notify_all()  # a shutdown waiting for the last thread
                    return
                future, fn, args, kwargs = self._tasks.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            worker.future = future
            try:
                _settle(future, fn(*args, **kwargs))
            except BaseException as exc:
                _settle(future, error=exc)
            del future, fn, args, kwargs  # nothing held while idle
            worker.future = None
            if worker.abandoned:
                return  # counted out when it was left behind

    def _left_behind(self) -> None:
        """One of the threads was left behind (Deadlines): it no longer counts."""
        with self._lock:
            self._threads -= 1
            if self._idle < len(self._tasks) and not self._closed:
                self._start()
            self._ready.notify_all()


class _Call:
    __slots__ = ("at", "deadline", "deadlines", "key", "stuck_at", "worker")

    def __init__(self, deadlines: Deadlines, key: str, worker: _Worker) -> None:
        self.deadlines = deadlines
        self.key = key
        self.deadline = time.monotonic() + deadlines.timeout
        self.worker = worker
        self.at = ""  # the farthest directory or file it reached (reached()); "" the root
        self.stuck_at = ""  # where it was at its deadline

    def renew(self) -> None:
        """Start the deadline again (progressed())."""
        self.deadlines._renew(self)


def reached(path: str) -> None:
    """The call running on this thread has reached `path` (a directory or file, as a key
    or a prefix without its slash): if it hangs, it hangs there or farther, and calls
    through there fail at once while it does (Deadlines). For local_files' walks."""
    call = getattr(_local, "call", None)
    if call is not None:
        call.at = path


def progressed() -> None:
    """The call running on this thread made progress (a piece of a long copy): its
    deadline starts again. A deadline bounds a wait with no progress (a hung filesystem),
    not a long transfer; each piece is bounded by the deadline on its own."""
    call = getattr(_local, "call", None)
    if call is not None:
        call.renew()


class Deadlines:
    """The calls in flight of one store (`url`), each failed once `timeout` seconds have
    passed without an answer (run). A call left running is stuck at the farthest place
    it reached (reached()): the directory or file on a hung filesystem. While it is,
    calls through that place fail at once (they would hang there too); once `max_stuck`
    calls are left running, every call does, until one returns. Thread-safe."""

    def __init__(self, url: str, timeout: float, max_stuck: int = MAX_STUCK) -> None:
        self.url = url
        self.timeout = timeout
        self.max_stuck = max_stuck
        self._calls: dict[_Call, None] = {}  # in flight, oldest (earliest deadline) first
        self._stuck: collections.Counter[str] = collections.Counter()  # place -> calls left running there
        self._lock = threading.Lock()
        self._watching = False
        self._pool: DeadlinePool | None = None

    def stuck(self) -> int:
        """How many calls are left running past their deadline."""
        with self._lock:
            return sum(self._stuck.values())

    def run(self, key: str, operation: Callable[..., T], *args: Any) -> T:
        """operation(*args), a call about `key` (or a prefix); StoreUnavailableError once
        the deadline passes without an answer (the call may still complete later: a
        write may land)."""
        worker = getattr(_local, "worker", None)
        if worker is None:
            answer: T = self._hand_over().submit(self.run, key, operation, *args).result()
            return answer
        if worker.abandoned:
            raise self._error(key, "the thread was left behind")
        if self._stuck:
            self._refuse(key)
        call = _local.call = _Call(self, key, worker)
        with self._lock:
            self._calls[call] = None
            if not self._watching:
                self._watching = True
                threading.Thread(target=self._watch, name="zarrfs-deadlines", daemon=True).start()
        try:
            return operation(*args)
        finally:
            _local.call = None
            with self._lock:
                answered = self._calls.pop(call, True) is None
                if not answered:
                    self._stuck[call.stuck_at] -= 1
                    if not self._stuck[call.stuck_at]:
                        del self._stuck[call.stuck_at]
            if not answered:
                late = time.monotonic() - (call.deadline - self.timeout)
                log.info("%s: %r answered after %.1fs, past its deadline", self.url, key, late)
                raise self._error(key, f"answered after {late:.1f}s, past the deadline")

    def _renew(self, call: _Call) -> None:
        with self._lock:
            if call in self._calls:  # still in time: it goes to the end, latest deadline last
                del self._calls[call]
                call.deadline = time.monotonic() + self.timeout
                self._calls[call] = None

    def _refuse(self, key: str) -> None:
        path = key.rstrip("/")
        with self._lock:
            for place in self._stuck:
                if not place or path == place or path.startswith(place + "/"):
                    raise self._error(key, f"a call stuck at {place or 'the root'!r} has not returned")
            stuck = sum(self._stuck.values())
            if stuck >= self.max_stuck:
                raise self._error(key, f"{stuck} calls have not returned; none is made until one does")

    def _hand_over(self) -> DeadlinePool:
        with self._lock:
            if self._pool is None:
                self._pool = DeadlinePool(HAND_OVER_THREADS, "zarrfs-store")
            return self._pool

    def _watch(self) -> None:
        """Fail each call still running at its deadline; end once idle for IDLE_SECONDS."""
        idle_since = time.monotonic()
        while True:
            overdue: list[tuple[_Call, Future[Any] | None]] = []
            with self._lock:
                now = time.monotonic()
                for call in self._calls:  # oldest first: every deadline is `timeout` after its start
                    if call.deadline > now:
                        break
                    # the worker is inside the call (it leaves only under this lock): the
                    # task it runs is the one that made it
                    call.worker.abandoned = True
                    overdue.append((call, call.worker.future))
                for call, _ in overdue:
                    del self._calls[call]
                    call.stuck_at = call.at
                    self._stuck[call.stuck_at] += 1
                if self._calls or overdue:
                    idle_since = now
                elif now - idle_since >= IDLE_SECONDS:
                    self._watching = False
                    return
                wake = next(iter(self._calls)).deadline if self._calls else now + min(self.timeout, IDLE_SECONDS)
            for call, task in overdue:
                log.debug(
                    "%s: %r: no answer within %gs, stuck at %r; its thread is left behind",
                    self.url,
                    call.key,
                    self.timeout,
                    call.stuck_at,
                )
                call.worker.pool._left_behind()
                if task is not None:
                    _settle(task, error=self._error(call.key, f"no answer within {self.timeout:g}s"))
            time.sleep(max(0.0, wake - time.monotonic()))

    def _error(self, key: str, why: str) -> StoreUnavailableError:
        return StoreUnavailableError(f"{self.url}: {why} (a hung filesystem below the root?)", key)


# the most keys UnansweredFetches keeps (the oldest go first): a few hundred KiB
MAX_UNANSWERED = 4096


class UnansweredFetches:
    """Keys of chunks and shards whose fetch the store did not answer: the fetch failed as
    unavailable (StoreUnavailableError) after at least half its deadline, a stall rather
    than a refusal. Each is kept for one deadline, and a fetch of it meanwhile fails at
    once with the same error. The kernel asks again at once for the pages of a read that
    failed (its readahead, then the page the reader waits on), and a reader, its Ctrl-C
    included, would wait a whole deadline on each ask. Refusals (503, a reset) come at
    once and are not kept: asking again costs little, and a read right after the store
    recovers is served. Thread-safe."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self._keys: OrderedDict[str, tuple[float, StoreUnavailableError]] = OrderedDict()  # oldest first
        self._lock = threading.Lock()

    def check(self, keys: Iterable[str]) -> None:
        """Raise the error of the first of `keys` kept, if any."""
        now = time.monotonic()
        with self._lock:
            self._drop_old(now)
            for key in keys:
                kept = self._keys.get(key)
                if kept is not None:
                    when, error = kept
                    raise StoreUnavailableError(
                        f"no answer {now - when:.1f}s ago ({error.message}); asked again "
                        f"once {self.deadline:g}s have passed",
                        key,
                    )

    def note(self, keys: Iterable[str], error: StoreUnavailableError, took: float) -> None:
        """The fetch of `keys` failed with `error` after `took` seconds."""
        if took < self.deadline / 2:
            return
        now = time.monotonic()
        with self._lock:
            for key in keys:
                self._keys.pop(key, None)
                self._keys[key] = (now, error)
            self._drop_old(now)

    def forget(self, keys: Iterable[str]) -> None:
        """The store answered for `keys` (a write or an erase of them went through)."""
        with self._lock:
            for key in keys:
                self._keys.pop(key, None)

    def _drop_old(self, now: float) -> None:
        keys = self._keys
        while keys and (len(keys) > MAX_UNANSWERED or now - next(iter(keys.values()))[0] >= self.deadline):
            keys.popitem(last=False)
