"""The one place exceptions become errno values (docs/errors.md), each with one log line."""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections import OrderedDict

from ..format import (
    FormatError,
    InvalidWriteError,
    MetadataChangeError,
    NodeNotFoundError,
    ReadOnlyFormatError,
)
from ..store import (
    InvalidKeyError,
    KeyNotFoundError,
    ReadOnlyStoreError,
    StoreError,
    StorePermissionError,
    StoreUnavailableError,
)

log = logging.getLogger(__name__)
# what a local filesystem (a spool's, a local store's) answers that the writer can act on
_LOCAL_LIMITS = (errno.EFBIG, errno.ENOSPC, errno.EDQUOT)
# one failure, one line: the kernel asks again for what failed (a read's readahead, then
# its page; `mv` renames twice), so a line just logged is not logged again (at debug
# level instead) within REPEAT_WINDOW seconds
REPEAT_WINDOW = 2.0
_REPEATS_KEPT = 1024


class FsError(Exception):
    """An errno decided by the fs layer itself, with the reason for the log. `quiet`: a
    refusal that is routine (logged at debug level, as ENOENT is)."""

    def __init__(self, errno_: int, message: str, quiet: bool = False) -> None:
        super().__init__(message)
        self.errno = errno_
        self.quiet = quiet


def errno_for(exc: BaseException) -> int:
    if isinstance(exc, FsError):
        return exc.errno
    if isinstance(exc, (NodeNotFoundError, KeyNotFoundError, FileNotFoundError)):
        return errno.ENOENT
    if isinstance(exc, (ReadOnlyFormatError, ReadOnlyStoreError)):
        return errno.EROFS
    if isinstance(exc, MetadataChangeError):
        return errno.EPERM
    if isinstance(exc, (InvalidWriteError, InvalidKeyError)):
        return errno.EINVAL
    if isinstance(exc, FileExistsError):
        return errno.EEXIST
    if isinstance(exc, StorePermissionError):
        return errno.EACCES
    if isinstance(exc, StoreUnavailableError):
        return errno.EIO
    if isinstance(exc, StoreError) and isinstance(exc.__cause__, OSError) and exc.__cause__.errno in _LOCAL_LIMITS:
        return exc.__cause__.errno  # a local store's filesystem is full
    if isinstance(exc, (FormatError, StoreError)):
        return errno.EIO
    if isinstance(exc, OSError) and exc.errno in _LOCAL_LIMITS:  # the spool's own filesystem
        return exc.errno
    return errno.EIO


def describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class _Repeats:
    """The failure lines logged in the last REPEAT_WINDOW seconds (at most _REPEATS_KEPT)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logged: OrderedDict[tuple[object, ...], float] = OrderedDict()

    def seen(self, line: tuple[object, ...]) -> bool:
        """Whether `line` was logged within the window; noted as logged now if not."""
        now = time.monotonic()
        with self._lock:
            while self._logged and (len(self._logged) > _REPEATS_KEPT or next(iter(self._logged.values())) < now):
                self._logged.popitem(last=False)
            if line in self._logged:
                return True
            self._logged[line] = now + REPEAT_WINDOW
            return False


_repeats = _Repeats()


def log_failure(op: str, path: str, exc: BaseException) -> int:
    """Log one line for a failed request and return its errno. ENOENT is routine (shells
    probe for files) and is logged at debug level only, as is the same failure again
    within REPEAT_WINDOW seconds."""
    code = errno_for(exc)
    quiet = code == errno.ENOENT or getattr(exc, "quiet", False)
    quiet = quiet or _repeats.seen((op, path, code, type(exc), describe(exc)))
    level = logging.DEBUG if quiet else logging.WARNING
    if not isinstance(exc, (FsError, FormatError, StoreError, OSError)):
        level = logging.ERROR
        log.log(
            level,
            "%s %s: %s: unexpected %s: %s",
            op,
            path,
            errno.errorcode[code],
            type(exc).__name__,
            describe(exc),
            exc_info=exc,
        )
    elif code == errno.EIO:  # the least telling errno: the exception's kind with it
        log.log(level, "%s %s: EIO (%s): %s", op, path, type(exc).__name__, describe(exc))
    else:
        log.log(level, "%s %s: %s: %s", op, path, errno.errorcode[code], describe(exc))
    return code
