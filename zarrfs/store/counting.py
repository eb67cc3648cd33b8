"""The counters of a store's public calls (`store_get`, `store_get_seconds`, …), which
the mount's stats show."""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar


class Counted(Protocol):
    """A store: calls by kind (ints) and their seconds (floats), under a lock."""

    _counts: defaultdict[str, float]
    _counts_lock: threading.Lock


S = TypeVar("S", bound=Counted)
P = ParamSpec("P")
R = TypeVar("R")


def counted(kind: str) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Count a public store call and the seconds it took, under `kind` (get, head, set,
    erase, move, list), for the mount's stats."""

    def wrap(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def counted(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            start = time.monotonic()
            try:
                return method(self, *args, **kwargs)
            finally:
                with self._counts_lock:
                    self._counts[f"store_{kind}"] += 1
                    self._counts[f"store_{kind}_seconds"] += time.monotonic() - start

        return counted

    return wrap
