"""A spool: an anonymous local file that holds what is written through the mount until it
is stored (a `.npy` being copied in, a raw key being rewritten). It lives in a directory
outside the mountpoint, which the mount checks before it starts."""

from __future__ import annotations

import os
import tempfile
import threading


class Spool:
    """Where the filesystem allows, an O_TMPFILE that can be linked into a directory of the
    same filesystem (so a store may take it as a value without copying it: Store.set_file)."""

    def __init__(self, directory: str | None = None) -> None:
        try:
            fd = os.open(directory or tempfile.gettempdir(), os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except (OSError, AttributeError):  # no O_TMPFILE here: a file removed at once
            fd, name = tempfile.mkstemp(dir=directory, prefix="zarrfs-spool-")
            os.unlink(name)
        self.file = os.fdopen(fd, "w+b")
        self.lock = threading.Lock()

    def fileno(self) -> int:
        return self.file.fileno()

    def size(self) -> int:
        return os.fstat(self.file.fileno()).st_size

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.file.fileno(), size, offset)

    def write(self, offset: int, data: bytes) -> int:
        return os.pwrite(self.file.fileno(), data, offset)

    def truncate(self, size: int) -> None:
        os.ftruncate(self.file.fileno(), size)

    def close(self) -> None:
        self.file.close()


def spool_directory(mountpoint: str) -> str:
    """Where spools go: the temporary directory, which must not lie under the mountpoint
    (the daemon would write into itself). Raises ValueError when it does."""
    spool_dir = os.path.realpath(tempfile.gettempdir())
    mountpoint = os.path.realpath(mountpoint)
    if os.path.commonpath([spool_dir, mountpoint]) == mountpoint:
        raise ValueError(f"the spool directory {spool_dir} lies inside the mountpoint; set TMPDIR")
    return spool_dir
