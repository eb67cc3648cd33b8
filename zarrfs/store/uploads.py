"""Files stored from open descriptors (Store.set_file): reading them at explicit offsets,
and the parts of uploads held in memory at once (UploadParts)."""

from __future__ import annotations

import os
import threading

_READ_AT_ONCE = 1 << 30
# S3 parts: at least 8 MiB (S3's least is 5 MiB), larger for a file of more than 10,000
# of them (S3's most)
_LEAST_PART = 8 << 20
_MOST_PARTS = 10_000


def read_file(fd: int, start: int = 0, end: int | None = None) -> bytes:
    """Bytes `start:end` (default: to its end) of the open file `fd`, read at explicit
    offsets, fewer where the file ends sooner. One pread returns at most 2 GiB less 4 KiB
    (Linux's MAX_RW_COUNT): it reads on. A read that returns all at once (any part of an
    upload) is its only copy in memory."""
    if end is None:
        end = os.fstat(fd).st_size
    pieces: list[bytes] = []
    offset = start
    while offset < end:
        piece = os.pread(fd, min(end - offset, _READ_AT_ONCE), offset)
        if not piece:  # the file ends sooner
            break
        pieces.append(piece)
        offset += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


class UploadParts:
    """The parts of files being uploaded (set_file to an object store) that are held in
    memory, within `limit` bytes for all uploads together: a part is read from its file
    once its bytes are taken and given back once sent. An upload plans its parts with
    plan(); one part is always allowed, so a single upload never waits forever."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._room = threading.Condition()

    def plan(self, size: int) -> tuple[int, int]:
        """(part size, parts in flight) for a file of `size` bytes."""
        part = max(_LEAST_PART, -(-size // _MOST_PARTS))
        return part, max(1, self.limit // part)

    def take(self, nbytes: int) -> None:
        with self._room:
            self._room.wait_for(lambda: self.held == 0 or self.held + nbytes <= self.limit)
            self.held += nbytes

    def give(self, nbytes: int) -> None:
        with self._room:
            self.held -= nbytes
            self._room.notify_all()
