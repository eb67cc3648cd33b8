"""The icechunk library as IcechunkStore and IcechunkRepository use it: what differs
between icechunk 1.x and 2.x (decided here, and only here), what its errors mean, and
its coroutines run on a private event loop (EventLoopThread) behind a gate that lets a
commit pass alone (CommitGate)."""

from __future__ import annotations

import atexit
import re
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .errors import StoreError, StoreUnavailableError

T = TypeVar("T")
# Icechunk's refusal of a chunk in a container the opener did not authorize
UNAUTHORIZED = re.compile(r"resolves to the url prefix (\S+?),? to be able to fetch")

# Icechunk answers a key that cannot name anything it holds (a v2 key, a path that is no
# node, a key outside the Zarr layout) with an error where other stores say "missing":
# icechunk 2 names it by the error's `kind`, icechunk 1 only in its message. A chunk
# the manifest names but storage lacks is no such answer: it is a fault.
_MISSING_KINDS = frozenset({"invalid-key", "bad-key-prefix", "node-not-found", "key-not-found"})
_MISSING_MARKS = ("invalid zarr key format", "node not found", "v2 key not found", "bad key prefix")


# ---------------------------------------------------------------- library generations
# icechunk 1.x (the last for Python 3.11) reads repositories of on-disk spec 1; 2.x
# (Python >= 3.12) reads specs 1 and 2, names its errors by `kind` and moves nodes by
# metadata alone in a rearrange session.


def check_spec_readable(spec: int, url: str) -> None:
    """Refuse, in one line, a repository of a newer on-disk spec than the installed
    icechunk reads: icechunk 1 would fail on it with no word of what to install."""
    import icechunk

    if spec > int(icechunk.spec_version()):
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        if sys.version_info < (3, 12):  # no icechunk >= 2 installs here: the remedy is another Python
            remedy = f"icechunk {spec} needs Python >= 3.12: run zarrfs on Python 3.12 or later"
        else:
            remedy = f"icechunk {spec} runs on Python >= 3.12, as this one: pip install --upgrade 'icechunk>={spec}'"
        raise StoreError(
            f"an Icechunk repository of on-disk spec {spec} needs icechunk >= {spec}; installed: "
            f"icechunk {icechunk.__version__} on Python {python}, and {remedy}",
            url,
        )


def rearranger(repo: Any, branch: str) -> Callable[[], Any] | None:
    """A maker of rearrange sessions on `branch` (icechunk 2), or None (icechunk 1)."""
    if not hasattr(repo, "rearrange_session"):
        return None
    return lambda: repo.rearrange_session(branch)


class EventLoopThread:
    """An asyncio loop running in a daemon thread of its own. `run` blocks the calling
    thread until the coroutine is done or `timeout` seconds have passed."""

    def __init__(self, name: str = "zarrfs-icechunk") -> None:
        import asyncio

        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        # a loop thread still running while the interpreter finalizes can crash it
        atexit.register(self.close)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking call made on the store's own event loop")
        import asyncio

        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise StoreUnavailableError(f"no answer within {timeout:g}s") from None

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()
        atexit.unregister(self.close)


class CommitGate:
    """Store calls pass the gate together; a commit passes it alone, so that no call
    lands in a session that has just been committed and replaced."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._calls = 0
        self._committing = False

    @contextmanager
    def call(self) -> Iterator[None]:
        with self._condition:
            while self._committing:
                self._condition.wait()
            self._calls += 1
        try:
            yield
        finally:
            with self._condition:
                self._calls -= 1
                self._condition.notify_all()

    @contextmanager
    def commit(self) -> Iterator[None]:
        with self._condition:
            while self._committing:
                self._condition.wait()
            self._committing = True
            while self._calls:
                self._condition.wait()
        try:
            yield
        finally:
            with self._condition:
                self._committing = False
                self._condition.notify_all()


def means_missing(exc: BaseException) -> bool:
    if any(cls.__name__ == "IcechunkError" for cls in type(exc).__mro__):
        kind = getattr(exc, "kind", None)
        if kind is not None:
            return str(kind) in _MISSING_KINDS
        return any(mark in str(exc).lower() for mark in _MISSING_MARKS)
    return isinstance(exc, (KeyError, FileNotFoundError))


def means_node_exists(exc: BaseException) -> bool:
    """Icechunk's refusal of metadata that would make an existing node another kind."""
    kind = getattr(exc, "kind", None)
    if kind is not None:
        return str(kind) == "node-already-exists"
    return any(cls.__name__ == "IcechunkError" for cls in type(exc).__mro__) and "node already exists" in str(exc)


def conflicts(exc: Any) -> str:
    """The paths (and chunks) a failed rebase names, in one line."""
    described = []
    for conflict in getattr(exc, "conflicts", None) or []:
        chunks = getattr(conflict, "conflicted_chunks", None)
        kind = str(getattr(conflict, "conflict_type", "")).rpartition(".")[2]
        where = f"{conflict.path} chunks {', '.join(map(str, chunks))}" if chunks else conflict.path
        described.append(f"{where} ({kind})" if kind else where)
    return "; ".join(described) or first_line(exc)


def first_line(exc: BaseException) -> str:
    lines = [line.strip(" |x`-") for line in str(exc).splitlines() if line.strip(" |x`-")]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
