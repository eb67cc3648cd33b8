"""The one place exceptions become errno values (SPEC §6), each with one log line."""

from __future__ import annotations

import errno
import functools
import inspect
import logging
from typing import Any, Callable

import pyfuse3

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

log = logging.getLogger("zarrfs")


class FsError(Exception):
    """An errno decided by the fs layer itself, with the reason for the log."""

    def __init__(self, errno_: int, message: str) -> None:
        super().__init__(message)
        self.errno = errno_


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
    if isinstance(exc, (FormatError, StoreError)):
        return errno.EIO
    return errno.EIO


def describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def log_failure(op: str, path: str, exc: BaseException) -> int:
    """Log one line for a failed request and return its errno. ENOENT is routine (shells
    probe for files) and is logged at debug level only."""
    code = errno_for(exc)
    level = logging.DEBUG if code == errno.ENOENT else logging.WARNING
    if not isinstance(exc, (FsError, FormatError, StoreError, OSError)):
        level = logging.ERROR
        log.log(level, "%s %s: %s: unexpected %s: %s", op, path, errno.errorcode[code],
                type(exc).__name__, describe(exc), exc_info=exc)
    else:
        log.log(level, "%s %s: %s: %s", op, path, errno.errorcode[code], describe(exc))
    return code


def guarded(handler: Callable[..., Any]) -> Callable[..., Any]:
    """An unexpected exception in a handler becomes EIO and one log line: pyfuse3 would
    otherwise end the session (the daemon never dies of a failing request)."""

    @functools.wraps(handler)
    async def guarded_handler(self: Any, *args: Any) -> Any:
        try:
            return await handler(self, *args)
        except pyfuse3.FUSEError:
            raise
        except Exception as exc:
            raise pyfuse3.FUSEError(log_failure(handler.__name__, "(request)", exc)) from None

    return guarded_handler


def guard_handlers(cls: type) -> type:
    """Apply `guarded` to every pyfuse3 request handler a class defines."""
    for name, value in list(vars(cls).items()):
        if inspect.iscoroutinefunction(value) and hasattr(pyfuse3.Operations, name):
            setattr(cls, name, guarded(value))
    return cls
