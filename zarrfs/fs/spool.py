"""A spool: an anonymous local file that holds what is written through the mount until it
is stored (a `.npy` being copied in, a raw key being rewritten). It lives in a directory
outside the mountpoint, which the mount checks before it starts."""

from __future__ import annotations

import os
import tempfile
import threading


class Spool:
    def __init__(self, directory: str | None = None) -> None:
        self.file = tempfile.TemporaryFile(dir=directory, prefix="zarrfs-spool-")
        self.lock = threading.Lock()

    def fileno(self) -> int:
        return self.file.fileno()

    def size(self) -> int:
        return os.fstat(self.file.fileno()).st_size

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.file.fileno(), size, offset)

    def read_all(self) -> bytes:
        # one read returns at most 2 GiB less 4 KiB (Linux's MAX_RW_COUNT): read on to the end
        size = self.size()
        value = bytearray(size)
        view, got = memoryview(value), 0
        while got < size:
            n = os.preadv(self.file.fileno(), [view[got:]], got)
            if n == 0:  # truncated meanwhile
                del view
                del value[got:]
                break
            got += n
        return bytes(value)

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
