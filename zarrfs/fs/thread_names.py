"""The daemon's threads carry their Python names in the kernel too (/proc/PID/task/*/comm,
`top -H`, `ps -L`, py-spy), so that the CPU each kind of thread uses can be told apart:
`zarrfs-codec_N` decoding, `zarrfs-s3_N` and the I/O stage fetching, `zarrfs-kernel`
telling the kernel about pages, `Trio thread N` running the FUSE adapter's core calls.
The process's first thread runs the FUSE loop and keeps the process's own name.

Python (before 3.14) names no thread for the kernel. Each thread started by `threading`
after `name_os_threads()` names itself as it starts (a profile hook that runs once and
removes itself), so thread pools made anywhere in the daemon are named without each
being told to."""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

_PR_SET_NAME = 15  # prctl(2): the calling thread's name, at most 15 bytes
_libc: ctypes.CDLL | None = None


def _prctl() -> Callable[..., int]:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols, libc's among them (no search)
    prctl: Callable[..., int] = _libc.prctl
    return prctl


def name_this_thread(name: str) -> None:
    """Give the calling thread `name` (its first 15 bytes) in the kernel."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: names are a convenience
        _prctl()(_PR_SET_NAME, name.encode("ascii", "replace")[:15], 0, 0, 0)


def _named_at_start(frame: FrameType, event: str, arg: Any) -> None:
    sys.setprofile(None)  # once: the thread runs unprofiled from here on
    name_this_thread(threading.current_thread().name)


def name_os_threads() -> None:
    """Every thread started from now on names itself (in the kernel) by its Python name."""
    with contextlib.suppress(OSError, AttributeError):
        _prctl()
        threading.setprofile(_named_at_start)
