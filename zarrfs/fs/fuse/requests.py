"""What every FUSE handler shares: a core call run in a worker thread, its failure turned
into its errno and one log line, inode numbers to paths, the checks made before a
change, and the attributes the kernel is told of a path."""

from __future__ import annotations

import errno
import itertools
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pyfuse3
import trio

from ...defaults import METADATA_TTL
from ...store import FileMeta
from ...store.keys import join_path
from ..core import Attributes, FilesystemCore, OpenFile
from ..errors import FsError, log_failure
from .kernel import KernelState
from .listing import DirListing

T = TypeVar("T")

_BLOCK_SIZE = 1 << 20  # st_blksize: cp and stdio size their buffers by it
NO_META = FileMeta()
# the longest name of one directory entry, in bytes (statfs's f_namemax): a longer one
# fails ENAMETOOLONG at its lookup, before anything is made, as on ext4
NAME_MAX = 255


@dataclass
class AdapterOptions:
    uid: int = os.getuid()
    gid: int = os.getgid()
    owner_given: bool = False  # -o uid=/gid=: every file's owner, whatever the store keeps
    metadata_ttl: float = METADATA_TTL
    threads: int = 16


@dataclass
class Handle:
    file: OpenFile
    inode: int
    path: str


def _nothing() -> None:
    """No one waits for the kernel's first request."""


class Requests(pyfuse3.Operations):
    """The state and plumbing of the adapter's handlers. Handlers run on the trio thread
    and alone touch the handle tables; the inode table is shared with the notifier thread."""

    supports_dot_lookup = False
    enable_writeback_cache = False
    enable_acl = False

    def __init__(
        self,
        core: FilesystemCore,
        options: AdapterOptions,
        kernel: KernelState | None = None,
        on_init: Callable[[], None] = _nothing,
    ) -> None:
        """`kernel`: the state the core's hooks reach (none: a new one, for a core that
        tells the kernel nothing); `on_init`: called at the kernel's first request."""
        super().__init__()
        self.core = core
        self.options = options
        self.kernel = kernel or KernelState()
        self.inodes = self.kernel.inodes
        self.notifier = self.kernel.notifier
        self.counters = self.kernel.counters
        self.on_init = on_init
        self.handles: dict[int, Handle] = {}
        self.dirs: dict[int, DirListing] = {}
        self.limiter = trio.CapacityLimiter(options.threads)
        self._fh = itertools.count(1)
        self._mount_time = time.time()

    async def _call(self, op: str, path: str, fn: Callable[..., T], *args: Any) -> T:
        """Run a core call in a worker thread; a failure becomes its errno and one log line."""
        self.counters[f"fuse_{op}"] += 1
        try:
            return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)
        except pyfuse3.FUSEError:
            raise
        except Exception as exc:
            raise pyfuse3.FUSEError(self._failed(op, path, exc)) from None

    def _failed(self, op: str, path: str, exc: BaseException) -> int:
        code = log_failure(op, "/" + path, exc)
        if code != errno.ENOENT:
            self.counters["errors"] += 1
            self.counters[f"errors_{errno.errorcode.get(code, code)}"] += 1
        return code

    def _refused(self, op: str, path: str, code: int, why: str) -> pyfuse3.FUSEError:
        """The error a request is refused with before any core call, logged as one."""
        return pyfuse3.FUSEError(self._failed(op, path, FsError(code, why)))

    def _path(self, inode: int) -> str:
        try:
            return self.inodes.path(inode)
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    def _child(self, parent_inode: int, name: bytes, op: str = "lookup") -> str:
        path = join_path(self._path(parent_inode), os.fsdecode(name))
        if len(name) > NAME_MAX:
            raise self._refused(op, path, errno.ENAMETOOLONG, f"a name of {len(name)} bytes, more than {NAME_MAX}")
        return path

    def _writable(self, op: str, path: str) -> None:
        if self.core.read_only:
            raise self._refused(op, path, errno.EROFS, "the mount is read-only")

    async def _at_hand(self, op: str, path: str, call: Callable[..., T], *args: Any) -> T:
        """call(*args, wait=False) on this thread, where the core can answer from what it
        holds (so that a stalled store delays no such request); where it raises NotAtHand,
        or fails, call(*args) (waiting) in a worker, which reports the failure."""
        try:
            answer = call(*args, wait=False)
        except Exception:
            return await self._call(op, path, call, *args)
        self.counters[f"fuse_{op}"] += 1
        return answer

    async def _lookup(self, op: str, path: str) -> Attributes | None:
        return await self._at_hand(op, path, self.core.lookup, path)

    def _entry(
        self, path: str, attr: Attributes, counted: bool = True, inode: int | None = None
    ) -> pyfuse3.EntryAttributes:
        """What the kernel is told of `path` (or of `inode`, an open file whose name was
        removed); `counted`: the reply hands the kernel a lookup of it (lookup, create,
        mkdir, link: forget takes it back)."""
        entry = pyfuse3.EntryAttributes()
        if inode is not None:
            entry.st_ino = pyfuse3.InodeT(inode)
        else:
            entry.st_ino = pyfuse3.InodeT(self.inodes.lookup(path) if counted else self.inodes.inode(path))
        writable = 0o200 if attr.writable and not self.core.read_only else 0
        meta = attr.meta or NO_META
        if attr.is_dir:
            entry.st_mode = pyfuse3.ModeT(stat.S_IFDIR | (0o555 | writable if meta.mode is None else meta.mode))
            entry.st_nlink = 2 if attr.nlink is None else attr.nlink
        else:
            entry.st_mode = pyfuse3.ModeT(stat.S_IFREG | (0o444 | writable if meta.mode is None else meta.mode))
            entry.st_nlink = 1 if attr.nlink is None else attr.nlink
            entry.st_size = attr.size
        given = self.options.owner_given
        entry.st_uid = self.options.uid if meta.uid is None or given else meta.uid
        entry.st_gid = self.options.gid if meta.gid is None or given else meta.gid
        entry.st_blksize = _BLOCK_SIZE
        entry.st_blocks = 0 if attr.derived else -(-entry.st_size // 512)
        mtime_ns = meta.mtime_ns
        if mtime_ns is None:
            mtime_ns = int((attr.mtime if attr.mtime is not None else self._mount_time) * 1e9)
        entry.st_mtime_ns = mtime_ns
        entry.st_atime_ns = mtime_ns if meta.atime_ns is None else meta.atime_ns
        ctime_ns = mtime_ns if attr.ctime is None else int(attr.ctime * 1e9)
        entry.st_ctime_ns = ctime_ns if meta.ctime_ns is None else meta.ctime_ns
        entry.entry_timeout = entry.attr_timeout = self.options.metadata_ttl
        return entry

    async def _owned(self, parent_inode: int, mode: int, ctx: pyfuse3.RequestContext, directory: bool) -> FileMeta:
        """The mode and owner of a new file or directory: its creator's, the group of a
        set-group-ID parent (which a directory inherits, as on ext4)."""
        mode = stat.S_IMODE(mode)
        gid = ctx.gid
        attr = await self._lookup("lookup", self._path(parent_inode))
        if attr is not None and attr.meta is not None and attr.meta.mode is not None and attr.meta.mode & stat.S_ISGID:
            gid = attr.meta.gid if attr.meta.gid is not None else gid
            if directory:
                mode |= stat.S_ISGID
        return FileMeta(mode=mode, uid=ctx.uid, gid=gid)

    async def _pushes_ended(self) -> None:
        while self.notifier.busy():  # pushes take a millisecond or so
            await trio.sleep(0.002)
