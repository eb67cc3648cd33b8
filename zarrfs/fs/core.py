"""What the FUSE adapter asks of a filesystem core, and what a core answers with. A core
names files by their path below the mount root ("" is the root, no leading slash),
blocks, and is safe to call from several threads at once; it knows nothing of inodes,
handles or the kernel. The cores (the decoded tree, the passthrough tree, the versions
tree over the decoded one) implement `FilesystemCore`; tests drive them directly,
without a kernel.

The calls the adapter makes on its event loop first (`FilesystemCore.lookup`, `list_dir`,
`open`; `OpenFile.read`, `write`) take `wait`: with `wait=False` a call answers at once
from what is at hand, with no store call and nothing that may block, or raises
`NotAtHand`; the adapter then makes the same call with `wait=True` in a worker thread.
The fast path is part of the one call, not a second one."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..store import FileMeta
from .errors import FsError
from .hooks import NO_HOOKS, CoreHooks


class NotAtHand(Exception):
    """A call made with `wait=False` cannot answer without a store call or a wait: make it
    again with `wait=True` (on a worker thread)."""


@dataclass(frozen=True)
class Attributes:
    """What `stat` shows of one path. `mtime` None: the mount's start time; `ctime` None:
    its mtime. `meta`: the mode, owner and times kept for it (fields None: the mount's
    defaults, and `mtime`). `nlink` None: 1 for a file, 2 for a directory; 0 for an open
    file whose name was removed, 2 plus its sub-directories for a directory. `derived`: a
    view of bytes another file shows already, given no blocks (as /proc's files have none),
    so that `du` counts each array's data once."""

    is_dir: bool
    size: int = 0
    writable: bool = True
    mtime: float | None = None
    meta: FileMeta | None = None
    nlink: int | None = None
    ctime: float | None = None
    derived: bool = False


class OpenFile:
    """One open of a file (one FUSE handle), shared by every descriptor duplicated from
    it: `flush` is called at each of their closes, `release` after the last one.

    `direct_io` bypasses the kernel's page cache (content that is replaced whole, or
    whose size is not known ahead); `keep_cache` lets the kernel keep pages it cached
    before this open. `writes` says whether this open changes the store; while one is
    open, nothing is pushed into the page cache."""

    direct_io = False
    keep_cache = True
    writes = False

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes | memoryview:
        """Up to `size` bytes from `offset`. `wait=False`: only bytes at hand, without
        blocking or any store call (cheap enough for the adapter's event loop), else
        NotAtHand. `track=False`: the read is not one of a reader's (the notifier's
        pushes into the page cache) and leaves the file's read pattern (decode-ahead, hot
        windows) as it was; files that follow none ignore it."""
        raise NotImplementedError

    def write(self, offset: int, data: bytes, *, wait: bool = True) -> int:
        """The bytes written. `wait=False`: only where the write can be applied without
        blocking or any store call (cheap enough for the adapter's event loop), else
        NotAtHand (then it runs on a worker thread)."""
        raise FsError(errno.EBADF, "not open for writing")

    def truncate(self, size: int) -> None:
        raise FsError(errno.EBADF, "not open for writing")

    def flush(self) -> None:
        """A close of one descriptor: store what is complete, raise what is refused."""

    def fsync(self) -> None:
        """fsync(2): what flush stores, durably (flush does so already, but for documents)."""
        self.flush()

    def release(self) -> None:
        """The last close: what is still refused is dropped here."""

    def pushed(self, offset: int, size: int) -> None:
        """Bytes [offset, offset + size) are being handed to the kernel's page cache ahead
        of a sequential reader, who will read them without a request: what reads ahead of
        the reader reads ahead of them too. Files that read nothing ahead ignore it."""

    def hot_windows(self) -> list[tuple[int, int]]:
        """(offset, size) ranges that reads keep coming back to, to hand to the kernel's
        page cache whole; their bytes come from `read(wait=False, track=False)`."""
        return []

    def generation(self) -> int:
        """Moves whenever this file's content may have changed."""
        return 0

    def attributes(self) -> Attributes | None:
        """What `fstat` shows of this open once its name no longer leads to it (unlinked,
        or replaced by a rename, while open: nlink 0); None where the core cannot tell."""
        return None


class FilesystemCore:
    """The filesystem operations, by path. Every method may block; errors are raised as
    FsError or the lower layers' own exceptions, which the adapter maps to errno.
    Its hooks (CoreHooks) come with its constructor."""

    read_only: bool = False
    # whether set_attributes keeps modes and owners (the adapter then gives a new file or
    # directory its creator's)
    keeps_modes: bool = False
    # the extended attributes a core keeps start with this (None: none); others are
    # answered at once, with no core call (`ls -l` asks for security.* on every file)
    xattr_prefix: str | None = None

    def __init__(self, hooks: CoreHooks = NO_HOOKS) -> None:
        self.changed = hooks.changed
        self.session_stats = hooks.session_stats
        self.storing = hooks.storing

    def lookup(self, path: str, *, wait: bool = True) -> Attributes | None:
        """None when nothing is at `path` (the kernel may remember that for a while).
        `wait=False`: from what the core already knows, never blocking, else NotAtHand:
        the adapter asks on its event loop first, so that requests which need no store
        call are answered while others wait on a stalled store."""
        raise NotImplementedError

    def list_dir(self, path: str, *, wait: bool = True) -> Iterator[tuple[str, Attributes]]:
        """The entries of a directory, lazily, in a stable order. `wait=False`: from what
        the core already knows, never blocking (its iterator neither), else NotAtHand
        (also where the directory is too large to list on the event loop)."""
        raise NotImplementedError

    def open(self, path: str, flags: int, *, wait: bool = True) -> OpenFile:
        """`wait=False`: an open for reading from what the core already knows, never
        blocking, else NotAtHand."""
        raise NotImplementedError

    def create(self, path: str) -> tuple[OpenFile, Attributes]:
        raise FsError(errno.EPERM, "files cannot be created here")

    def truncate(self, path: str, size: int) -> None:
        """truncate(2) by path, outside any open."""
        raise FsError(errno.EPERM, "cannot be truncated")

    def mkdir(self, path: str) -> Attributes:
        raise FsError(errno.EPERM, "directories cannot be made here")

    def unlink(self, path: str) -> None:
        raise FsError(errno.EPERM, "cannot be removed")

    def rmdir(self, path: str) -> None:
        raise FsError(errno.EPERM, "cannot be removed")

    def rename(self, src: str, dst: str, replace: bool = True) -> None:
        raise FsError(errno.EPERM, "cannot be moved")

    def link(self, src: str, dst: str) -> Attributes:
        raise FsError(errno.EPERM, "links are not supported")

    def set_attributes(self, path: str, meta: FileMeta) -> Attributes:
        """chmod, chown, utimensat: keep the fields of `meta` that are not None; the
        attributes `path` has then."""
        raise FsError(errno.EPERM, "modes, owners and times are not kept here")

    def xattrs(self, path: str) -> dict[str, bytes]:
        return {}

    def set_xattr(self, path: str, name: str, value: bytes) -> None:
        raise FsError(errno.ENOTSUP, "extended attributes are not supported here")

    def remove_xattr(self, path: str, name: str) -> None:
        raise FsError(errno.ENOTSUP, "extended attributes are not supported here")

    def stats(self) -> dict[str, Any]:
        return {}

    def warm_up(self) -> None:
        """Once the mount is ready, on a thread of its own: import what the first requests
        of a kind will need, so that they do not wait for it. May block; never fails."""

    def shutdown(self) -> None:
        """The session has ended: store everything acknowledged and still buffered."""

    def close(self) -> None:
        """Release threads and files, once the daemon is done."""


def check_writable(core: FilesystemCore) -> None:
    if core.read_only:
        raise FsError(errno.EROFS, "the mount is read-only")
