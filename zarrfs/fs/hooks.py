"""What a core tells the side that serves it (CoreHooks), handed to the core's
constructor. Imports nothing: the daemon makes them before it opens the source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _unchanged(path: str, names: bool = False) -> None:
    """No kernel to tell (a core driven without one)."""


def _no_counters() -> dict[str, int]:
    return {}


def _not_storing(left: int) -> None:
    """Nobody waits for the shutdown's stores."""


@dataclass(frozen=True)
class CoreHooks:
    """What a core tells the side that serves it, handed to its constructor.
    `changed(path)`: files at and below `path` changed in content or attributes, so that
    the kernel forgets its copies (`names=True`: a name appeared at `path` that the kernel
    did not see made); `session_stats()`: the adapter's own counters, for the stats a core
    shows; `storing(left)`: at shutdown, the bytes still to be stored (for `zarrfs umount`
    to show)."""

    changed: Callable[..., None] = _unchanged
    session_stats: Callable[[], dict[str, Any]] = _no_counters
    storing: Callable[[int], None] = _not_storing


NO_HOOKS = CoreHooks()
