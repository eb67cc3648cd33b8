"""FUSE requests to core calls: each handler is one call into the core, run in a worker
thread, and one reply. What only the kernel's side needs lives here: inode numbers,
handles, errno and the log line of each failure, attributes, `statfs`, readdir paging,
and telling the kernel what changed."""

from __future__ import annotations

import contextlib
import errno
import inspect
import itertools
import logging
import os
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyfuse3
import trio

from ...defaults import METADATA_TTL
from ...store import FileMeta
from ...store.keys import join_path
from ..core import NOT_CACHED, Attributes, FilesystemCore, OpenFile
from ..errors import FsError, describe, log_failure
from ..inodes import InodeTable
from .listing import DirListing
from .pages import KernelNotifier
from .stream_pages import StreamPushes

log = logging.getLogger(__name__)

_BLOCK_SIZE = 1 << 20  # st_blksize: cp and stdio size their buffers by it
_STATFS_BLOCKS = 1 << 38  # a store has no capacity to report: 1 PiB, all of it free
_STATFS_FILES = 1 << 32
_NO_META = FileMeta()
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


class FuseAdapter(pyfuse3.Operations):
    """pyfuse3 Operations over one FilesystemCore. Handlers run on the trio thread and
    alone touch the handle tables; the inode table is shared with the notifier thread."""

    supports_dot_lookup = False
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, core: FilesystemCore, options: AdapterOptions) -> None:
        super().__init__()
        self.core = core
        self.options = options
        self.inodes = InodeTable()
        self.handles: dict[int, Handle] = {}
        self.dirs: dict[int, DirListing] = {}
        self.limiter = trio.CapacityLimiter(options.threads)
        self.counters: Counter = Counter(errors=0)  # shown before the first
        self.notifier = KernelNotifier(self.inodes)
        self.streams = StreamPushes(self.notifier, self._no_writer)
        self._fh = itertools.count(1)
        self._mount_time = time.time()
        self._writers_opening = 0
        self.on_init: Callable[[], None] = lambda: None  # the kernel's first request came
        core.changed = self.notifier.forget_path
        core.session_stats = self.session_stats

    # ------------------------------------------------------------------ plumbing
    async def _call(self, op: str, path: str, fn: Callable[..., Any], *args: Any) -> Any:
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

    def _path(self, inode: int) -> str:
        try:
            return self.inodes.path(inode)
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    def _child(self, parent_inode: int, name: bytes, op: str = "lookup") -> str:
        path = join_path(self._path(parent_inode), os.fsdecode(name))
        if len(name) > NAME_MAX:
            raise pyfuse3.FUSEError(
                self._failed(
                    op, path, FsError(errno.ENAMETOOLONG, f"a name of {len(name)} bytes, more than {NAME_MAX}")
                )
            )
        return path

    def _writable(self, op: str, path: str) -> None:
        if self.core.read_only:
            raise pyfuse3.FUSEError(self._failed(op, path, FsError(errno.EROFS, "the mount is read-only")))

    def _entry(
        self, path: str, attr: Attributes, counted: bool = True, inode: int | None = None
    ) -> pyfuse3.EntryAttributes:
        """What the kernel is told of `path` (or of `inode`, an open file whose name was
        removed); `counted`: the reply hands the kernel a lookup of it (lookup, create,
        mkdir, link: forget takes it back)."""
        entry = pyfuse3.EntryAttributes()
        if inode is not None:
            entry.st_ino = inode
        else:
            entry.st_ino = self.inodes.lookup(path) if counted else self.inodes.inode(path)
        writable = 0o200 if attr.writable and not self.core.read_only else 0
        meta = attr.meta or _NO_META
        if attr.is_dir:
            entry.st_mode = stat.S_IFDIR | (0o555 | writable if meta.mode is None else meta.mode)
            entry.st_nlink = 2 if attr.nlink is None else attr.nlink
        else:
            entry.st_mode = stat.S_IFREG | (0o444 | writable if meta.mode is None else meta.mode)
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

    def session_stats(self) -> dict:
        return {**self.counters, **self.notifier.pushed, "inodes": len(self.inodes)}

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
    async def _at_hand(
        self, op: str, path: str, cached: Callable[..., Any], call: Callable[..., Any], *args: Any, missing: Any = None
    ) -> Any:
        """cached(*args) on this thread, where the core can answer from what it holds (so
        that a stalled store delays no such request); where it returns `missing`, or
        fails, call(*args) in a worker (which reports the failure)."""
        try:
            answer = cached(*args)
        except Exception:
            answer = missing
        if answer is missing:
            return await self._call(op, path, call, *args)
        self.counters[f"fuse_{op}"] += 1
        return answer

    async def _lookup(self, op: str, path: str) -> Attributes | None:
        return await self._at_hand(op, path, self.core.lookup_cached, self.core.lookup, path, missing=NOT_CACHED)

    async def lookup(self, parent_inode: int, name: bytes, ctx=None) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name)
        attr = await self._lookup("lookup", path)
        if attr is None:  # a negative entry, which the kernel remembers like a positive one
            entry = pyfuse3.EntryAttributes()
            entry.st_ino = 0
            entry.entry_timeout = self.options.metadata_ttl
            return entry
        return self._entry(path, attr)

    async def getattr(self, inode: int, ctx=None) -> pyfuse3.EntryAttributes:
        path = self.inodes.find(inode)
        if path is not None:
            attr = await self._lookup("getattr", path)
            if attr is not None:
                return self._entry(path, attr, counted=False)
        opened = await self._opened(inode)
        if opened is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._entry("", opened, counted=False, inode=inode)

    async def _opened(self, inode: int) -> Attributes | None:
        """What an open of `inode` shows of it, when its name is gone (an unlinked file
        stays readable and writable through its descriptors until the last close)."""
        for handle in [h for h in self.handles.values() if h.inode == inode]:
            attr = await self._call("getattr", handle.path, handle.file.attributes)
            if attr is not None:
                return attr
        return None

    async def forget(self, inode_list) -> None:
        """The kernel forgot these: a number nobody knows any more leaves the table."""
        for inode, nlookup in inode_list:
            self.inodes.forget(inode, nlookup)

    async def statfs(self, ctx) -> pyfuse3.StatvfsData:
        st = pyfuse3.StatvfsData()
        st.f_bsize = st.f_frsize = 4096
        st.f_blocks = st.f_bfree = st.f_bavail = _STATFS_BLOCKS
        st.f_files = st.f_ffree = st.f_favail = _STATFS_FILES
        st.f_namemax = NAME_MAX
        return st

    # -------------------------------------------------------------- directories
    async def opendir(self, inode: int, ctx) -> int:
        path = self._path(inode)
        attr = await self._lookup("opendir", path)
        if attr is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        if not attr.is_dir:
            raise pyfuse3.FUSEError(self._failed("opendir", path, FsError(errno.ENOTDIR, "not a directory")))
        fh = next(self._fh)
        self.dirs[fh] = DirListing(self.core, path)
        return fh

    async def readdir(self, fh: int, start_id: int, token) -> None:
        """Offsets 0 and 1 are `.` and `..`; the core's entries follow."""
        listing = self.dirs[fh]
        path = listing.path
        dots = [(0, ".", path), (1, "..", path.rpartition("/")[0])]
        for offset, name, dot_path in dots[start_id:]:
            entry = self._entry(dot_path, Attributes(True), counted=False)  # the kernel counts no dots
            if not pyfuse3.readdir_reply(token, name.encode(), entry, offset + 1):
                return
        batch = await self._at_hand("readdir", path, listing.batch_cached, listing.batch, max(0, start_id - 2))
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

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name, "mkdir")
        self._writable("mkdir", path)
        attr = await self._call("mkdir", path, self.core.mkdir, path)
        if self.core.keeps_modes:
            owned = await self._owned(parent_inode, mode, ctx, directory=True)
            attr = await self._call("mkdir", path, self.core.set_attributes, path, owned)
        return self._entry(path, attr)

    async def _owned(self, parent_inode: int, mode: int, ctx, directory: bool) -> FileMeta:
        """The mode and owner of a new file or directory: its creator's, the group of a
        set-group-ID parent (which a directory inherits, as on ext4)."""
        mode = stat.S_IMODE(mode)
        gid = ctx.gid
        parent = self._path(parent_inode)
        attr = await self._lookup("lookup", parent)
        if attr is not None and attr.meta is not None and attr.meta.mode is not None and attr.meta.mode & stat.S_ISGID:
            gid = attr.meta.gid if attr.meta.gid is not None else gid
            if directory:
                mode |= stat.S_ISGID
        return FileMeta(mode=mode, uid=ctx.uid, gid=gid)

    async def rmdir(self, parent_inode: int, name: bytes, ctx) -> None:
        path = self._child(parent_inode, name, "rmdir")
        self._writable("rmdir", path)
        await self._remove("rmdir", path, self.core.rmdir)

    async def unlink(self, parent_inode: int, name: bytes, ctx) -> None:
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

    async def rename(self, parent_old: int, name_old: bytes, parent_new: int, name_new: bytes, flags: int, ctx) -> None:
        src, dst = self._child(parent_old, name_old, "rename"), self._child(parent_new, name_new, "rename")
        self._writable("rename", src)
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise pyfuse3.FUSEError(
                self._failed("rename", src, FsError(errno.EINVAL, "exchanging names is not supported"))
            )
        replace = not flags & pyfuse3.RENAME_NOREPLACE
        await self._call("rename", src, self.core.rename, src, dst, replace)
        self.inodes.rename_tree(src, dst)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx) -> pyfuse3.EntryAttributes:
        src, dst = self._path(inode), self._child(new_parent_inode, new_name, "link")
        self._writable("link", dst)
        return self._entry(dst, await self._call("link", dst, self.core.link, src, dst))

    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name, "symlink")
        self._writable("symlink", path)
        raise pyfuse3.FUSEError(self._failed("symlink", path, FsError(errno.EPERM, "a store holds no symbolic links")))

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx) -> pyfuse3.EntryAttributes:
        # regular files come by create (the kernel asks mknod only for other kinds)
        path = self._child(parent_inode, name, "mknod")
        self._writable("mknod", path)
        kind = {stat.S_IFIFO: "FIFOs", stat.S_IFSOCK: "sockets"}.get(stat.S_IFMT(mode), "device nodes")
        raise pyfuse3.FUSEError(self._failed("mknod", path, FsError(errno.EPERM, f"a store holds no {kind}")))

    # -------------------------------------------------------------------- files
    async def open(self, inode: int, flags: int, ctx) -> pyfuse3.FileInfo:
        path = self._path(inode)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            self._writable("open", path)
            async with self._writer_opening():
                file = await self._call("open", path, self.core.open, path, flags)
        else:
            file = await self._at_hand("open", path, self.core.open_cached, self.core.open, path, flags)
        return self._file_info(file, inode, path)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx):
        path = self._child(parent_inode, name, "create")
        self._writable("create", path)
        async with self._writer_opening():
            file, attr = await self._call("create", path, self.core.create, path)
            if self.core.keeps_modes:
                owned = await self._owned(parent_inode, mode, ctx, directory=False)
                try:
                    attr = await self._call("create", path, self.core.set_attributes, path, owned)
                except BaseException:
                    await trio.to_thread.run_sync(file.release, limiter=self.limiter)
                    raise
        entry = self._entry(path, attr)
        return self._file_info(file, entry.st_ino, path), entry

    def _file_info(self, file: OpenFile, inode: int, path: str) -> pyfuse3.FileInfo:
        fh = next(self._fh)
        self.handles[fh] = Handle(file, inode, path)
        return pyfuse3.FileInfo(fh=fh, direct_io=file.direct_io, keep_cache=file.keep_cache and not file.direct_io)

    # pyfuse3 replies with any buffer (PyObject_GetBuffer); its stub says bytes
    async def read(self, fh: int, offset: int, size: int) -> bytes | memoryview:  # type: ignore[override]
        handle = self.handles[fh]
        self.counters["fuse_read"] += 1
        try:
            data = handle.file.read_cached(offset, size)  # at hand: no thread hop
        except Exception as exc:
            raise pyfuse3.FUSEError(self._failed("read", handle.path, exc)) from None
        if data is None:
            data = await self._call("read", handle.path, handle.file.read, offset, size)
            self.streams.after_read(handle.inode, handle.file, offset, len(data))
            return data
        self.streams.after_read(handle.inode, handle.file, offset, len(data))
        hot = handle.file.hot_windows()
        if hot:
            self._push_pages(handle, hot)
        if self.notifier.busy():
            time.sleep(0)  # not a wait: hands the GIL to the pushing thread for a moment
        return data

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self.handles[fh]
        try:
            written = handle.file.write_at_hand(offset, data)  # no thread hop
        except Exception as exc:
            raise pyfuse3.FUSEError(self._failed("write", handle.path, exc)) from None
        if written is None:
            return await self._call("write", handle.path, handle.file.write, offset, data)
        self.counters["fuse_write"] += 1
        return written

    async def flush(self, fh: int) -> None:
        handle = self.handles.get(fh)
        # a close of a file with nothing to store (OpenFile's flush) needs no worker
        # thread: `cat` of /.zarrfs/stats is not queued behind requests on a stalled store
        if handle is not None and type(handle.file).flush is not OpenFile.flush:
            await self._call("close", handle.path, handle.file.flush)

    async def fsync(self, fh: int, datasync: bool) -> None:
        handle = self.handles.get(fh)
        if handle is not None:
            await self._call("fsync", handle.path, handle.file.fsync)

    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh, None)
        if handle is None:
            return
        try:
            await trio.to_thread.run_sync(handle.file.release, limiter=self.limiter)
        except Exception as exc:  # nobody is left to tell: the log line is all
            self._failed("release", handle.path, exc)

    async def setattr(self, inode: int, attr, fields, fh, ctx) -> pyfuse3.EntryAttributes:
        # the kernel checks who may (default_permissions): the core keeps what it can
        handle = self.handles.get(fh) if fh is not None else None
        path = self.inodes.find(inode)
        if path is not None:
            where = path
        elif handle is not None:
            where = handle.path
        else:
            raise pyfuse3.FUSEError(errno.ENOENT)
        if fields.update_size:
            self._writable("truncate", where)
            # (an open file whose name was removed is truncated through its open alone)
            if handle is not None and (handle.file.writes or path is None):
                await self._call("truncate", where, handle.file.truncate, attr.st_size)
            else:
                await self._call("truncate", where, self.core.truncate, where, attr.st_size)
        change = FileMeta(
            mode=stat.S_IMODE(attr.st_mode) if fields.update_mode else None,
            uid=attr.st_uid if fields.update_uid else None,
            gid=attr.st_gid if fields.update_gid else None,
            atime_ns=attr.st_atime_ns if fields.update_atime else None,
            mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
        )
        if change != _NO_META and path is not None:  # (not kept for a file whose name is gone)
            self._writable("setattr", path)
            return self._entry(
                path, await self._call("setattr", path, self.core.set_attributes, path, change), counted=False
            )
        return await self.getattr(inode, ctx)

    # ---------------------------------------------------------- page cache pushes
    def _push_pages(self, handle: Handle, windows: list[tuple[int, int]]) -> None:
        """Hand windows that random reads keep returning to over to the kernel's page
        cache. A push never overlaps a writer: none starts while a file is open for
        writing or being opened for writing, and opening one first waits for pushes."""
        if self._no_writer():
            self.notifier.push(handle.inode, handle.file, windows)

    def _no_writer(self) -> bool:
        return not self._writers_opening and not any(h.file.writes for h in self.handles.values())

    @contextlib.asynccontextmanager
    async def _writer_opening(self):
        self._writers_opening += 1
        try:
            await self._pushes_ended()
            yield
        finally:
            self._writers_opening -= 1

    async def _pushes_ended(self) -> None:
        while self.notifier.busy():  # pushes take a millisecond or so
            await trio.sleep(0.002)

    # ------------------------------------------------------------------- xattrs
    async def listxattr(self, inode: int, ctx) -> list[bytes]:
        path = self._path(inode)
        if self.core.xattr_prefix is None:
            return []
        return [os.fsencode(name) for name in await self._call("listxattr", path, self.core.xattrs, path)]

    async def getxattr(self, inode: int, name: bytes, ctx) -> bytes:
        path = self._path(inode)
        prefix = self.core.xattr_prefix
        if prefix is None or not os.fsdecode(name).startswith(prefix):
            raise pyfuse3.FUSEError(errno.ENODATA)  # not one the core keeps: no thread hop
        value = (await self._call("getxattr", path, self.core.xattrs, path)).get(os.fsdecode(name))
        if value is None:
            raise pyfuse3.FUSEError(errno.ENODATA)
        return value

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx) -> None:
        path = self._path(inode)
        self._writable("setxattr", path)
        await self._call("setxattr", path, self.core.set_xattr, path, os.fsdecode(name), value)

    async def removexattr(self, inode: int, name: bytes, ctx) -> None:
        path = self._path(inode)
        self._writable("removexattr", path)
        prefix = self.core.xattr_prefix
        if prefix is None or not os.fsdecode(name).startswith(prefix):
            raise pyfuse3.FUSEError(errno.ENODATA)  # nothing is kept under such a name
        await self._call("removexattr", path, self.core.remove_xattr, path, os.fsdecode(name))


def guard_handlers(cls: type) -> type:
    """An unexpected exception in a handler becomes EIO and one log line: pyfuse3 would
    otherwise end the session (the daemon never dies of a failing request)."""

    def guarded(handler):
        async def guarded_handler(self, *args):
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
