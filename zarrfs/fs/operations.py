"""The pyfuse3 Operations adapter: each handler reads like the syscall it serves and hands
blocking work (store calls, decoding, rendering) to `Tree` in a worker thread."""

from __future__ import annotations

import errno
import itertools
import json
import logging
import os
import stat
import time
from dataclasses import dataclass
from typing import Any, Callable

import pyfuse3
import trio

from ..format import Array, Group
from ..views.base import FileView
from .errors import FsError, log_failure
from .inodes import InodeTable, child_path
from .tree import ARRAY, BROKEN, CHUNK, GROUP, INTERNAL_FILE, Entry, Tree

log = logging.getLogger("zarrfs")

_XATTR_PREFIX = "user.zarr."
_DIRECT_IO_FILES = {"info"}  # rendered anew, so their size may differ from an old stat


@dataclass
class MountOptions:
    read_only: bool = False
    uid: int = os.getuid()
    gid: int = os.getgid()
    metadata_ttl: float = 10.0
    threads: int = 8


@dataclass
class Handle:
    entry: Entry
    view: FileView | None = None
    listing: list | None = None


class ZarrOperations(pyfuse3.Operations):
    """FUSE requests to tree operations.

    Handlers run in trio tasks on one thread. They touch the inode table and the handle
    table only there (no lock needed); everything that may block goes through `_blocking`,
    which runs it in a worker thread under a CapacityLimiter."""

    supports_dot_lookup = False
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, tree: Tree, options: MountOptions) -> None:
        super().__init__()
        self.tree = tree
        self.options = options
        self.inodes = InodeTable()
        self.handles: dict[int, Handle] = {}
        self._fh = itertools.count(1)
        self.limiter = trio.CapacityLimiter(options.threads)
        self.mount_time_ns = time.time_ns()
        self.counters = {"fuse_requests": 0, "errors": 0}

    # ------------------------------------------------------------------ plumbing
    async def _blocking(self, op: str, vpath: str, fn: Callable[..., Any], *args: Any) -> Any:
        self.counters["fuse_requests"] += 1
        try:
            return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)
        except pyfuse3.FUSEError:
            raise
        except Exception as exc:  # every failure becomes an errno and one log line
            code = log_failure(op, "/" + vpath, exc)
            if code != errno.ENOENT:
                self.counters["errors"] += 1
            raise pyfuse3.FUSEError(code) from None

    def _path(self, inode: int) -> str:
        try:
            return self.inodes.path(inode)
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    def stats(self) -> dict:
        stats = dict(self.tree.hierarchy.context.stats.snapshot())
        stats.update(self.counters)
        cache = self.tree.hierarchy.context.cache
        if cache is not None:
            stats["cache_bytes"] = cache.nbytes
        return stats

    def _attributes(self, vpath: str, entry: Entry) -> pyfuse3.EntryAttributes:
        """Blocking: a file's size may need its view (info renders)."""
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = self.inodes.inode(vpath)
        writable = 0 if self.options.read_only else 0o200
        if entry.is_dir:
            attr.st_mode = stat.S_IFDIR | 0o555 | writable
            attr.st_nlink = 2
            attr.st_size = 0
        else:
            attr.st_mode = stat.S_IFREG | 0o444 | writable
            attr.st_nlink = 1
            attr.st_size = self.tree.view(entry).size()
        if entry.kind == INTERNAL_FILE:
            attr.st_mode = stat.S_IFREG | 0o444
        attr.st_uid = self.options.uid
        attr.st_gid = self.options.gid
        attr.st_blksize = 1 << 17
        attr.st_blocks = -(-attr.st_size // 512)
        attr.st_atime_ns = attr.st_mtime_ns = attr.st_ctime_ns = self.mount_time_ns
        attr.entry_timeout = self.options.metadata_ttl
        attr.attr_timeout = self.options.metadata_ttl
        return attr

    def _resolve_attr(self, vpath: str) -> tuple[Entry, pyfuse3.EntryAttributes]:
        entry = self.tree.resolve(vpath)
        return entry, self._attributes(vpath, entry)

    async def shutdown(self) -> None:
        """Called once the session has ended, before the daemon exits."""

    # ------------------------------------------------------------------ lookups
    async def lookup(self, parent_inode: int, name: bytes, ctx=None) -> pyfuse3.EntryAttributes:
        vpath = child_path(self._path(parent_inode), os.fsdecode(name))
        self.inodes.inode(vpath)
        _, attr = await self._blocking("lookup", vpath, self._resolve_attr, vpath)
        return attr

    async def getattr(self, inode: int, ctx=None) -> pyfuse3.EntryAttributes:
        vpath = self._path(inode)
        _, attr = await self._blocking("getattr", vpath, self._resolve_attr, vpath)
        return attr

    async def forget(self, inode_list) -> None:
        """Inode numbers stay allocated for the whole mount, so there is nothing to drop."""

    async def statfs(self, ctx) -> pyfuse3.StatvfsData:
        st = pyfuse3.StatvfsData()
        st.f_bsize = st.f_frsize = 4096
        st.f_blocks = st.f_bfree = st.f_bavail = 0
        st.f_files = st.f_ffree = st.f_favail = 0
        st.f_namemax = 255
        return st

    # -------------------------------------------------------------- directories
    async def opendir(self, inode: int, ctx) -> int:
        vpath = self._path(inode)

        def listing() -> list[tuple[str, pyfuse3.EntryAttributes]]:
            entry = self.tree.resolve(vpath)
            if not entry.is_dir:
                raise FsError(errno.ENOTDIR, "not a directory")
            out = []
            for name, child in self.tree.list_dir(entry):
                path = child_path(vpath, name)
                try:
                    out.append((name, self._attributes(path, child)))
                except Exception as exc:  # an unreadable file still lists; its reads fail
                    log_failure("readdir", "/" + path, exc)
            return out

        fh = next(self._fh)
        self.handles[fh] = Handle(Entry(GROUP), listing=await self._blocking("opendir", vpath, listing))
        return fh

    async def readdir(self, fh: int, start_id: int, token) -> None:
        listing = self.handles[fh].listing
        for i in range(start_id, len(listing)):
            name, attr = listing[i]
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attr, i + 1):
                break

    async def releasedir(self, fh: int) -> None:
        self.handles.pop(fh, None)

    # -------------------------------------------------------------------- files
    async def open(self, inode: int, flags: int, ctx) -> pyfuse3.FileInfo:
        vpath = self._path(inode)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            if self.options.read_only:
                log.warning("open /%s for writing: EROFS: the mount is read-only", vpath)
                raise pyfuse3.FUSEError(errno.EROFS)
            log.warning("open /%s for writing: EROFS: writing through is not available yet", vpath)
            raise pyfuse3.FUSEError(errno.EROFS)

        def prepare() -> tuple[Entry, FileView]:
            entry = self.tree.resolve(vpath)
            if entry.is_dir:
                raise FsError(errno.EISDIR, "is a directory")
            return entry, self.tree.view(entry)

        entry, view = await self._blocking("open", vpath, prepare)
        fh = next(self._fh)
        self.handles[fh] = Handle(entry, view)
        direct = entry.kind == INTERNAL_FILE or entry.name in _DIRECT_IO_FILES
        return pyfuse3.FileInfo(fh=fh, keep_cache=view.keep_cache and not direct, direct_io=direct)

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self.handles[fh]
        vpath = f"{handle.entry.node}/{handle.entry.name or 'chunks/' + '/'.join(map(str, handle.entry.coords))}"
        return await self._blocking("read", vpath, handle.view.read, offset, size)

    async def release(self, fh: int) -> None:
        self.handles.pop(fh, None)

    # ------------------------------------------------------------------- xattrs
    def _attributes_of(self, vpath: str) -> dict:
        entry = self.tree.resolve(vpath)
        if entry.kind not in (GROUP, ARRAY):
            return {}
        node = self.tree.node(entry.node)
        return node.attributes if isinstance(node, Group) else node.metadata.attributes

    async def listxattr(self, inode: int, ctx) -> list[bytes]:
        vpath = self._path(inode)
        attrs = await self._blocking("listxattr", vpath, self._attributes_of, vpath)
        return [(_XATTR_PREFIX + k).encode() for k in attrs]

    async def getxattr(self, inode: int, name: bytes, ctx) -> bytes:
        vpath = self._path(inode)
        key = os.fsdecode(name)
        attrs = await self._blocking("getxattr", vpath, self._attributes_of, vpath)
        if not key.startswith(_XATTR_PREFIX) or key[len(_XATTR_PREFIX):] not in attrs:
            raise pyfuse3.FUSEError(pyfuse3.ENOATTR)
        return json.dumps(attrs[key[len(_XATTR_PREFIX):]], ensure_ascii=False).encode()
