"""FUSE requests to core calls: each handler is one call into the core, run in a worker
thread, and one reply. Names and directories are handled here, open files in files.py,
the plumbing they share in requests.py; what is kept of the kernel's side (inode numbers,
counters, telling the kernel what changed) in kernel.py."""

from __future__ import annotations

import errno
import inspect
import logging
import os
import stat
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pyfuse3
import trio

from ...store.keys import join_path
from ..core import Attributes
from ..errors import describe, log_failure
from .files import FileRequests
from .listing import DirListing
from .requests import NAME_MAX

log = logging.getLogger(__name__)

_STATFS_BLOCKS = 1 << 38  # a store has no capacity to report: 1 PiB, all of it free
_STATFS_FILES = 1 << 32


class FuseAdapter(FileRequests):
    """pyfuse3 Operations over one FilesystemCore."""

    async def quiesce(self) -> None:
        """Before the session stops: end page cache pushes while requests are still
        answered (a push can wait on a page that a read in flight holds)."""
        self.notifier.close()
        await self._pushes_ended()

    async def shutdown(self) -> None:
        """The session has ended: the core stores what it still holds."""
        self.notifier.close()
        try:
            await trio.to_thread.run_sync(self.core.shutdown)
        except Exception as exc:
            log_failure("shutdown", "/", exc)

    def init(self) -> None:
        """The kernel's INIT, the first request of the session: the mount answers now."""
        self.on_init()

    # ------------------------------------------------------------------ lookups
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext | None = None
    ) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name)
        attr = await self._lookup("lookup", path)
        if attr is None:  # a negative entry, which the kernel remembers like a positive one
            entry = pyfuse3.EntryAttributes()
            entry.st_ino = 0
            entry.entry_timeout = self.options.metadata_ttl
            return entry
        return self._entry(path, attr)

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        """The kernel forgot these: a number nobody knows any more leaves the table."""
        for inode, nlookup in inode_list:
            self.inodes.forget(inode, nlookup)

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        st = pyfuse3.StatvfsData()
        st.f_bsize = st.f_frsize = 4096
        st.f_blocks = st.f_bfree = st.f_bavail = _STATFS_BLOCKS
        st.f_files = st.f_ffree = st.f_favail = _STATFS_FILES
        st.f_namemax = NAME_MAX
        return st

    # -------------------------------------------------------------- directories
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileHandleT:
        path = self._path(inode)
        attr = await self._lookup("opendir", path)
        if attr is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        if not attr.is_dir:
            raise self._refused("opendir", path, errno.ENOTDIR, "not a directory")
        fh = next(self._fh)
        self.dirs[fh] = DirListing(self.core, path)
        return fh

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        """Offsets 0 and 1 are `.` and `..`; the core's entries follow."""
        listing = self.dirs[fh]
        path = listing.path
        dots = [(0, ".", path), (1, "..", path.rpartition("/")[0])]
        for offset, name, dot_path in dots[start_id:]:
            entry = self._entry(dot_path, Attributes(True), counted=False)  # the kernel counts no dots
            if not pyfuse3.readdir_reply(token, name.encode(), entry, offset + 1):
                return
        batch = await self._at_hand("readdir", path, listing.batch, max(0, start_id - 2))
        # entries of equal attributes (a core hands out one Attributes for many, like every
        # directory or chunk file) differ in their inode alone: one EntryAttributes serves
        # them, since readdir_reply copies it into the reply at once
        made: dict[int, pyfuse3.EntryAttributes] = {}
        for offset, name, attr in batch:
            child = join_path(path, name)
            entry = made.get(id(attr))
            if entry is None:
                entry = made[id(attr)] = self._entry(child, attr)
            else:
                entry.st_ino = self.inodes.lookup(child)
            # readdirplus counts a lookup of each entry that fits in the reply
            if not pyfuse3.readdir_reply(token, os.fsencode(name), entry, offset + 3):
                self.inodes.forget(entry.st_ino, 1)
                return

    async def releasedir(self, fh: int) -> None:
        self.dirs.pop(fh, None)

    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name, "mkdir")
        self._writable("mkdir", path)
        attr = await self._call("mkdir", path, self.core.mkdir, path)
        if self.core.keeps_modes:
            owned = await self._owned(parent_inode, mode, ctx, directory=True)
            attr = await self._call("mkdir", path, self.core.set_attributes, path, owned)
        return self._entry(path, attr)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        path = self._child(parent_inode, name, "rmdir")
        self._writable("rmdir", path)
        await self._remove("rmdir", path, self.core.rmdir)

    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        path = self._child(parent_inode, name, "unlink")
        self._writable("unlink", path)
        await self._remove("unlink", path, self.core.unlink)

    async def _remove(self, op: str, path: str, remove: Callable[[str], None]) -> None:
        """remove(path); the numbers at and below `path` go only where nothing is there any
        more. `rm` of a view (`a/info`) or of a chunk file (which then reads as the fill
        value) and `rmdir` of a chunk directory leave their path, and the kernel's inode of
        it, held by an open file or not, must still answer."""

        def removed() -> bool:
            remove(path)
            try:
                return self.core.lookup(path) is None
            except Exception:  # not known: what is there now gets a number of its own
                return True

        if await self._call(op, path, removed):
            self.inodes.remove_tree(path)

    async def rename(
        self,
        parent_old: int,
        name_old: bytes,
        parent_new: int,
        name_new: bytes,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        src, dst = self._child(parent_old, name_old, "rename"), self._child(parent_new, name_new, "rename")
        self._writable("rename", src)
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise self._refused("rename", src, errno.EINVAL, "exchanging names is not supported")
        replace = not flags & pyfuse3.RENAME_NOREPLACE
        await self._call("rename", src, self.core.rename, src, dst, replace)
        self.inodes.rename_tree(src, dst)

    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        src, dst = self._path(inode), self._child(new_parent_inode, new_name, "link")
        self._writable("link", dst)
        return self._entry(dst, await self._call("link", dst, self.core.link, src, dst))

    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name, "symlink")
        self._writable("symlink", path)
        raise self._refused("symlink", path, errno.EPERM, "a store holds no symbolic links")

    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        # regular files come by create (the kernel asks mknod only for other kinds)
        path = self._child(parent_inode, name, "mknod")
        self._writable("mknod", path)
        kind = {stat.S_IFIFO: "FIFOs", stat.S_IFSOCK: "sockets"}.get(stat.S_IFMT(mode), "device nodes")
        raise self._refused("mknod", path, errno.EPERM, f"a store holds no {kind}")

    # ------------------------------------------------------------------- xattrs
    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[bytes]:
        path = self._path(inode)
        if self.core.xattr_prefix is None:
            return []
        return [os.fsencode(name) for name in await self._call("listxattr", path, self.core.xattrs, path)]

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        path = self._path(inode)
        prefix = self.core.xattr_prefix
        if prefix is None or not os.fsdecode(name).startswith(prefix):
            raise pyfuse3.FUSEError(errno.ENODATA)  # not one the core keeps: no thread hop
        value = (await self._call("getxattr", path, self.core.xattrs, path)).get(os.fsdecode(name))
        if value is None:
            raise pyfuse3.FUSEError(errno.ENODATA)
        return value

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: pyfuse3.RequestContext) -> None:
        path = self._path(inode)
        self._writable("setxattr", path)
        await self._call("setxattr", path, self.core.set_xattr, path, os.fsdecode(name), value)

    async def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        path = self._path(inode)
        self._writable("removexattr", path)
        prefix = self.core.xattr_prefix
        if prefix is None or not os.fsdecode(name).startswith(prefix):
            raise pyfuse3.FUSEError(errno.ENODATA)  # nothing is kept under such a name
        await self._call("removexattr", path, self.core.remove_xattr, path, os.fsdecode(name))


def guard_handlers(cls: type) -> type:
    """An unexpected exception in a handler becomes EIO and one log line: pyfuse3 would
    otherwise end the session (the daemon never dies of a failing request)."""

    def guarded(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def guarded_handler(self: FuseAdapter, *args: Any) -> Any:
            try:
                return await handler(self, *args)
            except pyfuse3.FUSEError:
                raise
            except Exception as exc:
                log.error("%s: unexpected %s: %s", handler.__name__, type(exc).__name__, describe(exc), exc_info=exc)
                raise pyfuse3.FUSEError(errno.EIO) from None

        guarded_handler.__name__ = handler.__name__
        return guarded_handler

    for name, value in list(vars(cls).items()):
        if inspect.iscoroutinefunction(value) and hasattr(pyfuse3.Operations, name):
            setattr(cls, name, guarded(value))
    return cls


guard_handlers(FuseAdapter)
