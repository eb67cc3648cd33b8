"""Passthrough mode (SPEC §4, `--raw`): every store key a file, every prefix a directory,
bytes exactly as stored. Directory listings are cached for --metadata-ttl; file content
is views/raw.py (ranged reads with readahead; writes spooled locally, stored on close).

Concurrency as in the decoded tree (see the package docstring): handlers run on the trio
thread and alone touch the tables here (inodes, listings, directories made through the
mount, open files, handles); store calls and spool I/O run in worker threads through
`_blocking`. A listing fetched while a handler changed that directory is fetched again
(a generation counter per directory), so a listing never hides our own writes."""

from __future__ import annotations

import errno
import functools
import itertools
import logging
import os
import stat
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

import pyfuse3
import trio

from ..store import InvalidKeyError, KeyNotFoundError, Store, open_store, validate_key
from ..views.raw import RangeReader, RawFile, ReadaheadBudget
from .errors import FsError, guarded, log_failure
from .inodes import InodeTable, child_path
from .mount import MountConfig, SourceError
from .operations import MountOptions

log = logging.getLogger("zarrfs")

_THREADS = 16
_READAHEAD_BUDGET = 256 << 20  # bytes fetched ahead of all sequential readers together
_BLOCK_SIZE = 1 << 20  # st_blksize: cp and stdio size their buffers by it
_STATFS_BLOCKS = 1 << 38  # an object store has no capacity to report: 1 PiB, all free
_STATFS_FILES = 1 << 32


def raw_operations(config: MountConfig) -> tuple[RawOperations, Callable[[], None]]:
    """Operations for passthrough mode, and what to call once unmounted. Any store will
    do, an empty one too; raises SourceError when it cannot be opened or listed."""
    try:
        store = open_store(config.source, config.storage_options, read_only=config.read_only)
        store.list_dir("")
    except Exception as exc:
        raise SourceError(f"cannot open {config.source}: {exc}") from None
    # Spool files are anonymous (O_TMPFILE) files here: never under our own mountpoint.
    spool_dir = os.path.realpath(tempfile.gettempdir())
    mountpoint = os.path.realpath(config.mountpoint)
    if os.path.commonpath([spool_dir, mountpoint]) == mountpoint:
        raise SourceError(f"the spool directory {spool_dir} lies inside the mountpoint; set TMPDIR")
    options = MountOptions(
        read_only=config.read_only or store.read_only, uid=config.uid, gid=config.gid,
        metadata_ttl=config.metadata_ttl, threads=_THREADS,
    )
    executor = ThreadPoolExecutor(max_workers=_THREADS, thread_name_prefix="zarrfs-readahead")
    ops = RawOperations(store, options, spool_dir, executor)
    return ops, lambda: executor.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class Node:
    """What a path is: a directory, or a file of `size` bytes (mtime None: unknown)."""

    is_dir: bool
    size: int = 0
    mtime: float | None = None


@dataclass
class Listing:
    """One directory as the store listed it: files with (size, mtime), sub-directories."""

    files: dict[str, tuple[int, float | None]]
    dirs: set[str]
    expires: float


@dataclass
class Handle:
    inode: int
    file: RawFile
    reader: RangeReader


class RawOperations(pyfuse3.Operations):
    """FUSE requests to store operations: lookups and listings from cached `list_dir_info`
    results; reads, writes and truncation through one RawFile per open inode; mkdir,
    unlink, rmdir, rename and link to erase, move and set.

    Directories exist while the store holds keys under them; those made through the
    mount, and those left empty by removals through it, are kept (`made_dirs`) for the
    life of the mount, as an object store cannot hold an empty prefix."""

    supports_dot_lookup = False
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, store: Store, options: MountOptions, spool_dir: str,
                 executor: ThreadPoolExecutor) -> None:
        super().__init__()
        self.store = store
        self.options = options
        self.inodes = InodeTable()
        self.listings: dict[str, Listing] = {}
        self.made_dirs: set[str] = set()
        self.files: dict[int, RawFile] = {}  # open files by inode
        self.handles: dict[int, Handle] = {}
        self.dir_handles: dict[int, list[tuple[str, pyfuse3.EntryAttributes]]] = {}
        self.limiter = trio.CapacityLimiter(options.threads)
        self._spool_dir = spool_dir
        self._executor = executor
        self._budget = ReadaheadBudget(_READAHEAD_BUDGET)
        self._opens: dict[int, int] = {}  # handles per open inode
        self._versions: dict[int, tuple[int, float | None]] = {}  # (size, mtime) at last open
        self._generations: dict[str, int] = {}
        self._fetching: dict[str, trio.Event] = {}
        self._fh = itertools.count(1)
        self._mount_time = time.time()

    # ------------------------------------------------------------------ plumbing
    async def _blocking(self, op: str, vpath: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await trio.to_thread.run_sync(fn, *args, limiter=self.limiter)
        except Exception as exc:  # every failure becomes an errno and one log line
            raise pyfuse3.FUSEError(log_failure(op, "/" + vpath, exc)) from None

    @staticmethod
    def _fail(op: str, vpath: str, code: int, why: str) -> NoReturn:
        raise pyfuse3.FUSEError(log_failure(op, "/" + vpath, FsError(code, why)))

    def _path(self, inode: int) -> str:
        try:
            return self.inodes.path(inode)
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT) from None

    def _child(self, parent_inode: int, name: bytes) -> str:
        return child_path(self._path(parent_inode), os.fsdecode(name))

    def _writable(self, op: str, vpath: str) -> None:
        if self.options.read_only:
            self._fail(op, vpath, errno.EROFS, "the mount is read-only")

    def _new_key(self, op: str, vpath: str) -> str:
        try:
            return validate_key(vpath)
        except InvalidKeyError as exc:
            raise pyfuse3.FUSEError(log_failure(op, "/" + vpath, exc)) from None

    def _attributes(self, inode: int, node: Node) -> pyfuse3.EntryAttributes:
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = inode
        writable = 0 if self.options.read_only else 0o200
        if node.is_dir:
            attr.st_mode = stat.S_IFDIR | 0o555 | writable
            attr.st_nlink = 2
        else:
            attr.st_mode = stat.S_IFREG | 0o444 | writable
            attr.st_nlink = 1
            attr.st_size = node.size
        attr.st_uid = self.options.uid
        attr.st_gid = self.options.gid
        attr.st_blksize = _BLOCK_SIZE
        attr.st_blocks = -(-attr.st_size // 512)
        mtime_ns = int((node.mtime if node.mtime is not None else self._mount_time) * 1e9)
        attr.st_atime_ns = attr.st_mtime_ns = attr.st_ctime_ns = mtime_ns
        attr.entry_timeout = attr.attr_timeout = self.options.metadata_ttl
        return attr

    async def quiesce(self) -> None:
        """Nothing runs beside the requests here that must end before the session stops."""

    async def shutdown(self) -> None:
        """Store what open files still hold (the session has ended, handles with it)."""
        for file in list(self.files.values()):
            try:
                await self._store("unmount", file)
            except pyfuse3.FUSEError:
                pass
            file.close()
        self.files.clear()

    # ------------------------------------------------------------- the tree
    async def _listing(self, op: str, directory: str) -> Listing:
        """The store's listing of `directory`, from the cache while it is fresh."""
        while True:
            listing = self.listings.get(directory)
            if listing is not None and listing.expires > time.monotonic():
                return listing
            pending = self._fetching.get(directory)
            if pending is None:
                break
            await pending.wait()
        done = self._fetching[directory] = trio.Event()
        prefix = directory + "/" if directory else ""
        try:
            for _ in range(3):
                generation = self._generations.get(directory, 0)
                files, dirs = await self._blocking(op, directory, self.store.list_dir_info, prefix)
                listing = Listing(files, set(dirs), time.monotonic() + self.options.metadata_ttl)
                if self._generations.get(directory, 0) == generation:
                    self._cache_listing(directory, listing)
                    break
            return listing
        finally:
            del self._fetching[directory]
            done.set()

    def _cache_listing(self, directory: str, listing: Listing) -> None:
        if len(self.listings) > 4096:
            now = time.monotonic()
            for stale in [d for d, entry in self.listings.items() if entry.expires <= now]:
                del self.listings[stale]
        self.listings[directory] = listing

    def _overlay(self, directory: str) -> dict[str, Node]:
        """Children the store does not list (yet): directories made or kept through the
        mount, files whose content is in a spool."""
        prefix = directory + "/" if directory else ""
        children: dict[str, Node] = {}
        for made in self.made_dirs:
            if made.startswith(prefix):
                children[made[len(prefix):].split("/", 1)[0]] = Node(True)
        for file in self.files.values():
            if file.spooled and not file.unlinked and file.key.startswith(prefix):
                name, sep, _ = file.key[len(prefix):].partition("/")
                node = Node(True) if sep else Node(False, file.size(), file.modified)
                children.setdefault(name, node)
        return children

    async def _node(self, op: str, vpath: str) -> Node | None:
        if vpath == "":
            return Node(True)
        parent, _, name = vpath.rpartition("/")
        listing = await self._listing(op, parent)
        overlay = self._overlay(parent).get(name)
        if name in listing.dirs or (overlay is not None and overlay.is_dir):
            return Node(True)  # a key and a prefix of the same name: the prefix is shown
        if overlay is not None:
            return overlay
        if name in listing.files:
            return Node(False, *listing.files[name])
        return None

    async def _existing(self, op: str, vpath: str) -> Node:
        node = await self._node(op, vpath)
        if node is None:
            self._fail(op, vpath, errno.ENOENT, "no such key or prefix")
        return node

    async def _has_children(self, op: str, vpath: str) -> bool:
        """Whether directory `vpath` holds anything, asking the store afresh."""
        files, dirs = await self._blocking(op, vpath, self.store.list_dir_info, vpath + "/")
        self._changed(vpath)
        self._cache_listing(vpath, Listing(files, set(dirs), time.monotonic() + self.options.metadata_ttl))
        return bool(files or dirs or self._overlay(vpath))

    def _changed(self, directory: str) -> None:
        self._generations[directory] = self._generations.get(directory, 0) + 1

    def _note(self, vpath: str, node: Node | None) -> None:
        """Record in the cached listing of the parent what our own change left at `vpath`."""
        parent, _, name = vpath.rpartition("/")
        self._changed(parent)
        listing = self.listings.get(parent)
        if listing is None:
            return
        listing.files.pop(name, None)
        listing.dirs.discard(name)
        if node is not None and node.is_dir:
            listing.dirs.add(name)
        elif node is not None:
            listing.files[name] = (node.size, node.mtime)

    def _forget_below(self, vpath: str) -> None:
        """Drop cached listings and made directories at and below `vpath`."""
        for directory in [d for d in self.listings if d == vpath or d.startswith(vpath + "/")]:
            del self.listings[directory]
            self._changed(directory)
        self.made_dirs = {d for d in self.made_dirs if d != vpath and not d.startswith(vpath + "/")}

    def _keep_parent(self, vpath: str) -> None:
        """A directory emptied through the mount stays (a shell's `rm -r` then rmdirs it)."""
        parent = vpath.rpartition("/")[0]
        if parent:
            self.made_dirs.add(parent)

    def _removed(self, vpath: str) -> None:
        self._note(vpath, None)
        self._forget_below(vpath)
        self.inodes.remove_tree(vpath)
        self._keep_parent(vpath)

    def _moved(self, old: str, new: str, node: Node) -> None:
        moved = {d for d in self.made_dirs if d == old or d.startswith(old + "/")}
        self._note(old, None)
        self._note(new, node)
        self._forget_below(old)
        self._forget_below(new)
        self.made_dirs |= {new + d[len(old):] for d in moved}
        self.inodes.rename_tree(old, new)
        self._keep_parent(old)

    def _open_file(self, vpath: str) -> RawFile | None:
        for file in self.files.values():
            if file.key == vpath and not file.unlinked:
                return file
        return None

    # ------------------------------------------------------------------ lookups
    @guarded
    async def lookup(self, parent_inode: int, name: bytes, ctx=None) -> pyfuse3.EntryAttributes:
        vpath = self._child(parent_inode, name)
        node = await self._node("lookup", vpath)
        if node is None:  # a negative entry, cached by the kernel like a positive one
            attr = pyfuse3.EntryAttributes()
            attr.st_ino = 0
            attr.entry_timeout = self.options.metadata_ttl
            return attr
        return self._attributes(self.inodes.inode(vpath), node)

    @guarded
    async def getattr(self, inode: int, ctx=None) -> pyfuse3.EntryAttributes:
        file = self.files.get(inode)
        if file is not None and (file.unlinked or file.spooled):  # no need to ask the store
            return self._attributes(inode, Node(False, file.size(), file.modified))
        vpath = self._path(inode)
        return self._attributes(inode, await self._existing("getattr", vpath))

    async def forget(self, inode_list) -> None:
        """Inode numbers stay allocated while their path exists, so there is nothing to drop."""

    @guarded
    async def statfs(self, ctx) -> pyfuse3.StatvfsData:
        st = pyfuse3.StatvfsData()
        st.f_bsize = st.f_frsize = 4096
        st.f_blocks = st.f_bfree = st.f_bavail = _STATFS_BLOCKS
        st.f_files = st.f_ffree = st.f_favail = _STATFS_FILES
        st.f_namemax = 255
        return st

    # -------------------------------------------------------------- directories
    @guarded
    async def opendir(self, inode: int, ctx) -> int:
        vpath = self._path(inode)
        if not (await self._existing("opendir", vpath)).is_dir:
            self._fail("opendir", vpath, errno.ENOTDIR, "not a directory")
        listing = await self._listing("opendir", vpath)
        children = {name: Node(False, *info) for name, info in listing.files.items()}
        children.update(self._overlay(vpath))
        children.update((name, Node(True)) for name in listing.dirs)
        entries = [(name, self._attributes(self.inodes.inode(child_path(vpath, name)), node))
                   for name, node in sorted(children.items())]
        fh = next(self._fh)
        self.dir_handles[fh] = entries
        return fh

    @guarded
    async def readdir(self, fh: int, start_id: int, token) -> None:
        entries = self.dir_handles[fh]
        for i in range(start_id, len(entries)):
            name, attr = entries[i]
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attr, i + 1):
                break

    async def releasedir(self, fh: int) -> None:
        self.dir_handles.pop(fh, None)

    @guarded
    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx) -> pyfuse3.EntryAttributes:
        vpath = self._child(parent_inode, name)
        self._writable("mkdir", vpath)
        self._new_key("mkdir", vpath)
        if await self._node("mkdir", vpath) is not None:
            self._fail("mkdir", vpath, errno.EEXIST, "already exists")
        self.made_dirs.add(vpath)
        self._note(vpath, Node(True))
        return self._attributes(self.inodes.inode(vpath), Node(True))

    @guarded
    async def rmdir(self, parent_inode: int, name: bytes, ctx) -> None:
        vpath = self._child(parent_inode, name)
        self._writable("rmdir", vpath)
        if not (await self._existing("rmdir", vpath)).is_dir:
            self._fail("rmdir", vpath, errno.ENOTDIR, "not a directory")
        if await self._has_children("rmdir", vpath):
            self._fail("rmdir", vpath, errno.ENOTEMPTY, "directory not empty")
        parent, _, base = vpath.rpartition("/")
        listing = self.listings.get(parent)
        if listing is not None and base in listing.dirs:
            # an empty directory the store itself holds (a local one): remove it there too
            await self._blocking("rmdir", vpath, self.store.erase_prefix, vpath + "/")
        self._removed(vpath)

    # -------------------------------------------------------------------- files
    @guarded
    async def open(self, inode: int, flags: int, ctx) -> pyfuse3.FileInfo:
        vpath = self._path(inode)
        writing = (flags & os.O_ACCMODE) != os.O_RDONLY or bool(flags & os.O_TRUNC)
        if writing:
            self._writable("open", vpath)
        keep_cache = True
        if inode not in self.files:
            node = await self._existing("open", vpath)
            if node.is_dir:
                self._fail("open", vpath, errno.EISDIR, "is a directory")
            # the kernel's cached pages stay valid unless the stored value changed
            keep_cache = self._versions.get(inode) == (node.size, node.mtime)
            self._versions[inode] = (node.size, node.mtime)
            if inode not in self.files:  # (another open may have raced us)
                self.files[inode] = RawFile(self.store, vpath, node.size, self._spool_dir)
        fh = self._add_handle(inode)
        if flags & os.O_TRUNC:
            try:
                await self._blocking("open", vpath, self.files[inode].truncate, 0)
            except pyfuse3.FUSEError:
                await self.release(fh)
                raise
        return pyfuse3.FileInfo(fh=fh, keep_cache=keep_cache)

    @guarded
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx):
        vpath = self._child(parent_inode, name)
        self._writable("create", vpath)
        key = self._new_key("create", vpath)
        file = RawFile(self.store, key, None, self._spool_dir)
        await self._blocking("create", vpath, file.create)
        inode = self.inodes.inode(vpath)
        if inode in self.files:  # created meanwhile through another handle: share it
            file.close()
        else:
            self.files[inode] = file
        fh = self._add_handle(inode)
        node = Node(False, self.files[inode].size(), file.modified)
        return pyfuse3.FileInfo(fh=fh, keep_cache=False), self._attributes(inode, node)

    def _add_handle(self, inode: int) -> int:
        file = self.files[inode]
        self._opens[inode] = self._opens.get(inode, 0) + 1
        fh = next(self._fh)
        self.handles[fh] = Handle(inode, file, RangeReader(file, self._executor, self._budget))
        return fh

    @guarded
    async def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self.handles[fh]
        return await self._blocking("read", handle.file.key, handle.file.read, handle.reader, offset, size)

    @guarded
    async def write(self, fh: int, offset: int, buf: bytes) -> int:
        handle = self.handles[fh]
        return await self._blocking("write", handle.file.key, handle.file.write, offset, buf)

    @guarded
    async def flush(self, fh: int) -> None:
        handle = self.handles[fh]
        if await self._store("flush", handle.file):
            await self._invalidate_attributes(handle.inode)

    @guarded
    async def fsync(self, fh: int, datasync: bool) -> None:
        handle = self.handles[fh]
        if await self._store("fsync", handle.file):
            await self._invalidate_attributes(handle.inode)

    @guarded
    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh)
        handle.reader.close()
        inode = handle.inode
        self._opens[inode] -= 1
        if self._opens[inode] > 0:
            return
        try:
            await self._store("release", handle.file)
        except pyfuse3.FUSEError:
            pass  # logged; there is no one left to tell
        if self._opens.get(inode) == 0:  # not opened again meanwhile
            del self._opens[inode]
            del self.files[inode]
            handle.file.close()

    async def _store(self, op: str, file: RawFile) -> bool:
        """Store a file's spool if it changed; True if it did."""
        if not file.dirty:
            return False
        if not await self._blocking(op, file.key, file.flush):
            return False
        if not file.unlinked:
            self._note(file.key, Node(False, file.stored_size or 0, file.modified))
        return True

    async def _invalidate_attributes(self, inode: int) -> None:
        """The stored value has a new mtime: let the kernel ask for the attributes again."""
        try:
            await trio.to_thread.run_sync(functools.partial(pyfuse3.invalidate_inode, inode, attr_only=True))
        except OSError as exc:  # the kernel no longer knows the inode
            log.debug("invalidate inode %d: %s", inode, exc)

    @guarded
    async def setattr(self, inode: int, attr, fields, fh, ctx) -> pyfuse3.EntryAttributes:
        # Modes, owners and times cannot be stored: they are accepted and not kept.
        if fields.update_size:
            file = self.files.get(inode)
            vpath = file.key if file is not None else self._path(inode)
            self._writable("truncate", vpath)
            if file is not None:  # stored when the file is flushed or closed
                await self._blocking("truncate", vpath, file.truncate, attr.st_size)
            else:
                node = await self._existing("truncate", vpath)
                if node.is_dir:
                    self._fail("truncate", vpath, errno.EISDIR, "is a directory")
                file = RawFile(self.store, vpath, node.size, self._spool_dir)
                try:
                    await self._blocking("truncate", vpath, _truncate_and_store, file, attr.st_size)
                finally:
                    file.close()
                self._note(vpath, Node(False, attr.st_size, file.modified))
        return await self.getattr(inode, ctx)

    @guarded
    async def unlink(self, parent_inode: int, name: bytes, ctx) -> None:
        vpath = self._child(parent_inode, name)
        self._writable("unlink", vpath)
        if (await self._existing("unlink", vpath)).is_dir:
            self._fail("unlink", vpath, errno.EISDIR, "is a directory")
        await self._blocking("unlink", vpath, self.store.erase, vpath)
        file = self._open_file(vpath)
        if file is not None:  # still open: it lives on until closed, but is not stored
            file.unlinked = True
        self._removed(vpath)

    @guarded
    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx) -> None:
        old = self._child(parent_inode_old, name_old)
        new = self._child(parent_inode_new, name_new)
        self._writable("rename", old)
        if flags & pyfuse3.RENAME_EXCHANGE:
            self._fail("rename", old, errno.EINVAL, "exchanging two names is not supported")
        self._new_key("rename", new)
        source = await self._existing("rename", old)
        target = await self._node("rename", new)
        if target is not None:
            if flags & pyfuse3.RENAME_NOREPLACE:
                self._fail("rename", new, errno.EEXIST, "the destination exists")
            if source.is_dir and not target.is_dir:
                self._fail("rename", new, errno.ENOTDIR, "the destination is not a directory")
            if target.is_dir and not source.is_dir:
                self._fail("rename", new, errno.EISDIR, "the destination is a directory")
            if target.is_dir and await self._has_children("rename", new):
                self._fail("rename", new, errno.ENOTEMPTY, "the destination is not empty")
        if source.is_dir:
            await self._rename_dir(old, new, target is not None)
        else:
            file = self._open_file(old)
            if file is not None:  # written but not yet closed: store it, then move it
                await self._store("rename", file)
            await self._blocking("rename", old,
                                 functools.partial(self.store.move, old, new, replace=True))
            replaced = self._open_file(new)
            if replaced is not None:
                replaced.unlinked = True
            if file is not None:
                file.key = new
        self._moved(old, new, source)

    async def _rename_dir(self, old: str, new: str, replaces_empty_dir: bool) -> None:
        for file in list(self.files.values()):
            if file.key.startswith(old + "/") and not file.unlinked:
                await self._store("rename", file)
        if replaces_empty_dir:
            await self._blocking("rename", new, self.store.erase_prefix, new + "/")
        await self._blocking("rename", old, _move_prefix, self.store, old, new)
        for file in self.files.values():
            if file.key.startswith(old + "/"):
                file.key = new + file.key[len(old):]

    @guarded
    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx) -> pyfuse3.EntryAttributes:
        # A store has no links: the new name gets a copy of the value (so the
        # link-then-unlink idiom of atomic writers, zarr-python's among them, works).
        old = self._path(inode)
        new = self._child(new_parent_inode, new_name)
        self._writable("link", new)
        self._new_key("link", new)
        if (await self._existing("link", old)).is_dir:
            self._fail("link", old, errno.EPERM, "directories cannot be linked")
        if await self._node("link", new) is not None:
            self._fail("link", new, errno.EEXIST, "the destination exists")
        file = self.files.get(inode)
        if file is not None:
            await self._store("link", file)
        size = await self._blocking("link", new, _copy_value, self.store, old, new)
        node = Node(False, size, time.time())
        self._note(new, node)
        return self._attributes(self.inodes.inode(new), node)


def _truncate_and_store(file: RawFile, size: int) -> None:
    file.truncate(size)
    file.flush()


def _move_prefix(store: Store, old: str, new: str) -> None:
    try:
        store.move(old, new)
    except KeyNotFoundError:  # nothing stored below: only the mount knew the directory
        store.erase_prefix(old + "/")


def _copy_value(store: Store, src: str, dst: str) -> int:
    value = store.get(src)
    if value is None:
        raise KeyNotFoundError("no such key", src)
    store.set(dst, value)
    return len(value)
