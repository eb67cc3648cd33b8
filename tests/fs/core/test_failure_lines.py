"""docs/errors.md: every failure is one errno and one log line. An EIO, the errno of
most kinds of failure (a store unreachable or refusing on its own terms, metadata or a
chunk that cannot be read, a descriptor limit reached), names the exception's kind, so
that its line alone tells which it was (zarrfs/fs/errors.py)."""

from __future__ import annotations

import errno
import logging

from zarrfs.format import ChunkDecodeError
from zarrfs.fs.errors import FsError, log_failure
from zarrfs.store import StoreError, StoreUnavailableError


def _line(caplog, op: str, path: str, exc: BaseException) -> tuple[int, str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zarrfs.fs.errors"):
        code = log_failure(op, path, exc)
    (record,) = caplog.records
    return code, record.getMessage()


def test_an_eio_line_names_the_kind_of_failure(caplog):
    cases = [
        (StoreUnavailableError("file:///s: no answer within 30s", ""), "StoreUnavailableError"),
        (ChunkDecodeError("zstd: corrupt chunk (x)"), "ChunkDecodeError"),
        (StoreError("OSError: [Errno 24] Too many open files", "a00000/"), "StoreError"),
    ]
    for i, (exc, kind) in enumerate(cases):
        code, line = _line(caplog, "readdir", f"/g{i}", exc)
        assert code == errno.EIO
        assert line.startswith(f"readdir /g{i}: EIO ({kind}): ")
        assert str(exc) in line


def test_other_errnos_keep_their_line(caplog):
    code, line = _line(caplog, "write", "/a/c/0", FsError(errno.EROFS, "the mount is read-only"))
    assert code == errno.EROFS
    assert line == "write /a/c/0: EROFS: the mount is read-only"
