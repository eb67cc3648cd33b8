"""`/.zarrfs/commit`, the control file of a branch mount: `zarrfs commit` opens it,
writes the message, fsyncs (the commit happens there) and reads back one line:
`committed ID`, `unchanged ID`, or `conflict: REASON`. `echo MESSAGE > MNT/.zarrfs/commit`
commits too (at its close)."""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable

from ...store import CommitConflictError
from ..core import NotAtHand, OpenFile
from ..errors import FsError

DEFAULT_MESSAGE = "zarrfs commit"


class CommitFile(OpenFile):
    """`/.zarrfs/commit`, one open of it: what is written is the message; a flush (an
    fsync, a close) commits and what is read after is its outcome."""

    direct_io = True
    keep_cache = False
    writes = True

    def __init__(self, commit: Callable[[str], str]) -> None:
        self._commit = commit
        self._message = bytearray()
        self._written = False
        self._outcome = b""
        self._lock = threading.Lock()

    def write(self, offset: int, data: bytes, *, wait: bool = True) -> int:
        if not wait:
            raise NotAtHand
        with self._lock:
            if offset > len(self._message):
                self._message.extend(bytes(offset - len(self._message)))
            self._message[offset : offset + len(data)] = data
            self._written = True
        return len(data)

    def truncate(self, size: int) -> None:
        with self._lock:
            del self._message[size:]

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes:
        if not wait:
            raise NotAtHand
        with self._lock:
            return self._outcome[offset : offset + size]

    def flush(self) -> None:
        with self._lock:
            if not self._written:
                return
            message = self._message.decode(errors="replace").strip() or DEFAULT_MESSAGE
            self._message.clear()
            self._written = False
            try:
                self._outcome = f"{self._commit(message)}\n".encode()
            except CommitConflictError as exc:
                self._outcome = f"conflict: {exc.message}\n".encode()
                raise FsError(errno.EBUSY, f"not committed, the changes stay staged: {exc.message}") from None
            except Exception as exc:
                self._outcome = f"failed: {exc}\n".encode()
                raise
