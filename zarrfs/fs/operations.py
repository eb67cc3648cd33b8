"""The pyfuse3 Operations adapter: each handler reads like the syscall it serves and hands
blocking work (store calls, decoding, rendering) to `Tree` in a worker thread."""

from __future__ import annotations

import contextlib
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

from ..format import Array, Group, InvalidWriteError, validate_node_name
from ..format.metadata import dump_json, load_json
from ..views.base import FileView
from .errors import FsError, errno_for, guard_handlers, log_failure
from .inodes import InodeTable, child_path
from .pagecache import PagePusher
from .tree import ARRAY, BROKEN, CHUNK, CHUNK_DIR, FILE, GROUP, INTERNAL_FILE, Entry, Tree
from .writes import ChunkWriter, DocumentWriter, NpySpool, write_data

log = logging.getLogger("zarrfs")

_XATTR_PREFIX = "user.zarr."
_DIRECT_IO_FILES = {"info"}  # rendered anew, so their size may differ from an old stat
_DOCUMENTS = ("zarr.json", ".zarray", ".zgroup", ".zattrs")
# Chunk files and documents are replaced whole while others read them: each open sees one
# version, never the kernel's pages or size of another (a writer's O_TRUNC empties both).
_PER_OPEN_KINDS = {CHUNK}
# wholly written chunks of `data` are stored in the background once this much is ready
_WRITE_BEHIND = 32 << 20


@dataclass
class MountOptions:
    read_only: bool = False
    uid: int = os.getuid()
    gid: int = os.getgid()
    metadata_ttl: float = 10.0
    threads: int = 8
    dirty_limit: int = 256 << 20  # buffered writes to `data` are stored beyond this


@dataclass
class Handle:
    entry: Entry
    vpath: str = ""
    inode: int = 0
    view: FileView | None = None
    listing: list | None = None
    writer: Any = None  # ChunkWriter | DocumentWriter: this open's own; NpySpool: shared
    array: Array | None = None  # writes to `data` go to this array's pending chunks


@guard_handlers
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
        self.writers: dict[int, list] = {}  # inode of a .npy being copied in -> [spool, open handles]
        self.unstored: list = []  # writers closed while the store failed
        self.spools: dict[str, int] = {}  # vpath of a .npy being copied in -> inode
        self.dirty_arrays: set[Array] = set()  # arrays with buffered writes to `data`
        self._writing_behind: set[Array] = set()
        self.pages = PagePusher()
        self._writers_opening = 0
        self.nursery: trio.Nursery | None = None

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
        stats.update(self.pages.pushed)
        cache = self.tree.hierarchy.context.cache
        if cache is not None:
            stats["cache_bytes"] = cache.nbytes
        return stats

    def _file_attributes(self, vpath: str, size: int) -> pyfuse3.EntryAttributes:
        attr = self._attributes(vpath, Entry(CHUNK_DIR))
        attr.st_mode = stat.S_IFREG | 0o644
        attr.st_nlink = 1
        attr.st_size = size
        return attr

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
            writer = self.writers.get(attr.st_ino)
            attr.st_size = writer[0].size() if writer and writer[0].dirty else self.tree.view(entry).size()
        if entry.kind == INTERNAL_FILE:
            attr.st_mode = stat.S_IFREG | 0o444
        attr.st_uid = self.options.uid
        attr.st_gid = self.options.gid
        attr.st_blksize = 1 << 20  # cp and others size their buffers by it: fewer, larger requests
        attr.st_blocks = -(-attr.st_size // 512)
        attr.st_atime_ns = attr.st_mtime_ns = attr.st_ctime_ns = self.mount_time_ns
        attr.entry_timeout = self.options.metadata_ttl
        attr.attr_timeout = self.options.metadata_ttl
        return attr

    async def quiesce(self) -> None:
        """Before the session stops: end the page cache pushes while requests are still
        answered (a push can be waiting on a page that a read in flight holds)."""
        self.pages.close()
        await self._pushes_ended()

    async def shutdown(self) -> None:
        """Called once the session has ended, before the daemon exits: store every
        buffered write, so nothing acknowledged is lost."""
        self.pages.close()

        def flush_everything() -> None:
            for writer in [w for w, _ in self.writers.values()] + self.unstored:
                try:
                    writer.commit()
                except Exception as exc:  # e.g. a chunk file left short: not stored
                    log_failure("flush at unmount", getattr(writer, "vpath", "?"), exc)
            for array in list(self.dirty_arrays):
                try:
                    array.pending.flush()
                except Exception as exc:
                    log_failure("flush at unmount", "/" + array.path + "/data", exc)

        await trio.to_thread.run_sync(flush_everything)

    def _invalidate_later(self, node_path: str) -> None:
        """Drop the kernel's cached pages and attributes of every file of a node, from a
        background task: invalidating inside the request that caused it can deadlock."""
        prefix = node_path + "/" if node_path else ""
        inodes = [i for p, i in self.inodes.items() if p == node_path or p.startswith(prefix)]

        def invalidate() -> None:
            for ino in inodes:
                try:
                    pyfuse3.invalidate_inode(ino, attr_only=False)
                except OSError:  # the kernel does not know this inode (any more)
                    pass

        if self.nursery is not None and inodes:
            self.nursery.start_soon(trio.to_thread.run_sync, invalidate)

    # ------------------------------------------------------------------ lookups
    async def lookup(self, parent_inode: int, name: bytes, ctx=None) -> pyfuse3.EntryAttributes:
        vpath = child_path(self._path(parent_inode), os.fsdecode(name))
        self.inodes.inode(vpath)
        _, attr = await self._blocking("lookup", vpath, self._resolve_attr, vpath)
        return attr

    def _resolve_attr(self, vpath: str) -> tuple[Entry, pyfuse3.EntryAttributes]:
        if vpath in self.spools:
            return Entry(FILE, name=vpath), self._file_attributes(vpath, self.writers[self.spools[vpath]][0].size())
        entry = self.tree.resolve(vpath)
        return entry, self._attributes(vpath, entry)

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
        if flags & os.O_ACCMODE != os.O_RDONLY:
            return await self._open_for_writing(inode, vpath, flags)

        def prepare() -> tuple[Entry, FileView]:
            entry = self.tree.resolve(vpath)
            if entry.is_dir:
                raise FsError(errno.EISDIR, "is a directory")
            return entry, self.tree.view(entry)

        entry, view = await self._blocking("open", vpath, prepare)
        fh = next(self._fh)
        per_open = _is_per_open(entry)
        self.handles[fh] = Handle(entry, vpath=vpath, inode=inode, view=view.pinned() if per_open else view)
        direct = per_open or entry.kind == INTERNAL_FILE or entry.name in _DIRECT_IO_FILES
        return pyfuse3.FileInfo(fh=fh, keep_cache=view.keep_cache and not direct, direct_io=direct)

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self.handles[fh]
        if handle.writer is not None:
            return await self._blocking("read", handle.vpath, handle.writer.read, offset, size)
        if handle.view is None:
            handle.view = await self._blocking("read", handle.vpath, self.tree.view, handle.entry)
        cached = handle.view.read_cached(offset, size)  # decoded chunks at hand: no thread hop
        if cached is not None:
            hot = handle.view.take_hot_windows()
            if hot:
                self._push_pages(handle, hot)
            if self.pages.busy():
                time.sleep(0)  # not a wait: hands the GIL to the pushing thread for a moment
            return cached
        return await self._blocking("read", handle.vpath, handle.view.read, offset, size)

    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh, None)
        if handle is None or handle.writer is None:
            return
        if isinstance(handle.writer, NpySpool):
            shared = self.writers[handle.inode]
            shared[1] -= 1
            if shared[1] <= 0:
                del self.writers[handle.inode]
                self.spools.pop(handle.vpath, None)
                shared[0].close()
            return
        writer = handle.writer
        if writer.dirty and writer.refusal is None:  # written since its last close was judged
            try:
                await self._commit(handle)
            except pyfuse3.FUSEError:
                pass  # logged
        if writer.dirty and writer.refusal is not None:
            log.warning("close /%s: %s: %s; dropped at the last close, the store is unchanged",
                        handle.vpath, errno.errorcode[errno_for(writer.refusal)], writer.refusal)
        elif writer.dirty:  # its store failed: kept, and stored again at unmount
            self.unstored.append(writer)
        self._invalidate_later(handle.vpath)  # the kernel's idea of its size came from this writer

    # ---------------------------------------------------------- page cache pushes
    def _push_pages(self, handle: Handle, windows: list[tuple[int, int]]) -> None:
        """Hand windows that random reads keep returning to over to the kernel's page
        cache, so that later reads in them are served without a request. A push never
        overlaps a writer: none starts while a file is open for writing or being opened
        for writing, and opening one first waits for those under way."""
        if self._writers_opening or any(h.writer is not None or h.array is not None for h in self.handles.values()):
            return
        self.pages.push(handle.inode, handle.view, windows)

    @contextlib.asynccontextmanager
    async def _writer_opening(self):
        """Around opening a file for writing: no push starts, and those under way end first."""
        self._writers_opening += 1
        try:
            await self._pushes_ended()
            yield
        finally:
            self._writers_opening -= 1

    async def _pushes_ended(self) -> None:
        while self.pages.busy():  # pushes take a millisecond or so
            await trio.sleep(0.002)

    # ------------------------------------------------------------------ writing
    def _check_writable(self, op: str, vpath: str) -> None:
        if self.options.read_only:
            log.warning("%s /%s: EROFS: the mount is read-only", op, vpath)
            raise pyfuse3.FUSEError(errno.EROFS)

    def _writer_for(self, vpath: str, entry: Entry) -> tuple[Any, Array | None]:
        """Blocking: what a write to this file goes to."""
        if entry.kind == CHUNK:
            return ChunkWriter(self.tree.node(entry.node), entry.coords), None
        if entry.kind == FILE:
            node = self.tree.node(entry.node)
            if entry.name in node.documents:
                return DocumentWriter(self.tree.hierarchy, entry.node, entry.name, node.documents[entry.name]), None
            if entry.name == "data":
                return None, node
        raise FsError(errno.EACCES, "this file is a read-only view")

    async def _open_for_writing(self, inode: int, vpath: str, flags: int) -> pyfuse3.FileInfo:
        self._check_writable("open", vpath)
        async with self._writer_opening():
            spool = self.writers.get(inode)
            if spool is not None:  # a .npy being copied in, opened again
                entry, writer, array = Entry(FILE, name=vpath), spool[0], None
                spool[1] += 1
            else:
                entry = await self._blocking("open", vpath, self.tree.resolve, vpath)
                writer, array = await self._blocking("open", vpath, self._writer_for, vpath, entry)
            if writer is not None and flags & os.O_TRUNC:
                await self._blocking("open", vpath, writer.truncate, 0)
            fh = next(self._fh)
            self.handles[fh] = Handle(entry, vpath, inode, writer=writer, array=array)
            return pyfuse3.FileInfo(fh=fh, keep_cache=False, direct_io=writer is not None and spool is None)

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self.handles[fh]
        if handle.writer is not None:
            return await self._blocking("write", handle.vpath, handle.writer.write, offset, data)
        array = handle.array
        if array is None:
            raise pyfuse3.FUSEError(errno.EBADF)
        self.dirty_arrays.add(array)
        written = await self._blocking("write", handle.vpath, write_data, array, offset, data)
        if sum(a.pending.nbytes for a in self.dirty_arrays) > self.options.dirty_limit:
            try:
                await self._store_pending(handle)
            except pyfuse3.FUSEError:
                pass  # logged; the data stays pending and close reports the failure
        elif (self.nursery is not None and array not in self._writing_behind
              and array.pending.complete_nbytes >= _WRITE_BEHIND):
            self._writing_behind.add(array)
            self.nursery.start_soon(self._write_behind, handle.vpath, array)
        return written

    async def _write_behind(self, vpath: str, array: Array) -> None:
        """Store wholly written chunks in the background, overlapping encoding with the
        writes that follow. A failure here is logged; the chunks stay pending and the
        next flush (close, fsync) stores them or reports the error to the writer."""
        try:
            await trio.to_thread.run_sync(array.pending.store_complete, limiter=self.limiter)
        except Exception as exc:  # kept pending: reported again at close
            log_failure("write-behind", "/" + vpath, exc)
        finally:
            self._writing_behind.discard(array)

    def _check_not_open_for_writing(self, op: str, node_path: str) -> None:
        """A node cannot be erased or moved while a file in it is open for writing: the
        writes would land under a name that no longer holds the node."""
        prefix = node_path + "/"
        for handle in self.handles.values():
            if (handle.writer is not None or handle.array is not None) and handle.vpath.startswith(prefix):
                log.warning("%s /%s: EBUSY: /%s is open for writing", op, node_path, handle.vpath)
                raise pyfuse3.FUSEError(errno.EBUSY)

    def _dirty_under(self, node_path: str) -> list[Array]:
        return [a for a in self.dirty_arrays if a.path == node_path or a.path.startswith(node_path + "/")]

    async def _store_pending(self, handle: Handle) -> None:
        if handle.array is not None and handle.array.pending:
            await self._blocking("flush", handle.vpath, handle.array.pending.flush)
            if not handle.array.pending:
                self.dirty_arrays.discard(handle.array)
            self._invalidate_later(handle.entry.node)

    async def _commit(self, handle: Handle) -> None:
        if handle.writer is not None:
            try:
                stored = await trio.to_thread.run_sync(handle.writer.commit, limiter=self.limiter)
            except (FsError, InvalidWriteError) as exc:
                # kept while a descriptor is open: the last close logs it if still refused
                log.debug("close /%s: %s (kept until the last close)", handle.vpath, exc)
                raise pyfuse3.FUSEError(errno_for(exc)) from None
            except Exception as exc:
                self.counters["errors"] += 1
                raise pyfuse3.FUSEError(log_failure("close", "/" + handle.vpath, exc)) from None
            if stored:
                node = handle.vpath.rpartition("/")[0] if isinstance(handle.writer, NpySpool) else _node_of(handle)
                self.tree.forget(node)
                self._invalidate_later(node)
        else:
            await self._store_pending(handle)

    async def flush(self, fh: int) -> None:
        handle = self.handles.get(fh)
        if handle is not None and (handle.writer is not None or handle.array is not None):
            await self._commit(handle)

    async def fsync(self, fh: int, datasync: bool) -> None:
        await self.flush(fh)

    async def setattr(self, inode: int, attr, fields, fh, ctx) -> pyfuse3.EntryAttributes:
        vpath = self._path(inode)
        if fields.update_size:
            self._check_writable("truncate", vpath)
            handle = self.handles.get(fh) if fh is not None else None
            if handle is not None and handle.writer is not None:  # ftruncate of this open's copy
                await self._blocking("truncate", vpath, handle.writer.truncate, attr.st_size)
            else:
                await self._truncate(inode, vpath, attr.st_size)
        _, attributes = await self._blocking("setattr", vpath, self._resolve_attr, vpath)
        return attributes

    async def _truncate(self, inode: int, vpath: str, size: int) -> None:
        """truncate(2) by path: a transaction of its own, judged at once."""
        spool = self.writers.get(inode)
        if spool is not None:
            await self._blocking("truncate", vpath, spool[0].truncate, size)
            return
        entry = await self._blocking("truncate", vpath, self.tree.resolve, vpath)
        writer, array = await self._blocking("truncate", vpath, self._writer_for, vpath, entry)
        if array is not None:
            current = self.tree.view(entry).size()
            if size != current and size != 0:
                log.warning("truncate /%s: EINVAL: the size of data is fixed by the shape (%d)", vpath, current)
                raise pyfuse3.FUSEError(errno.EFBIG if size > current else errno.EINVAL)
            return
        await self._blocking("truncate", vpath, writer.truncate, size)
        try:
            await self._commit(Handle(entry, vpath, inode, writer=writer))
        except pyfuse3.FUSEError:
            if writer.refusal is not None:
                log.warning("truncate /%s: %s: %s; the store is unchanged", vpath,
                            errno.errorcode[errno_for(writer.refusal)], writer.refusal)
            raise

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int, ctx):
        parent = self._path(parent_inode)
        text = os.fsdecode(name)
        vpath = child_path(parent, text)
        self._check_writable("create", vpath)
        async with self._writer_opening():

            def prepare() -> Any:
                entry = self.tree.resolve(parent)
                if entry.kind == GROUP and text.endswith(".npy") and len(text) > 4:
                    array_path = child_path(entry.node, text[:-4])
                    validate_node_name(text[:-4])
                    if self.tree.hierarchy.exists(array_path):
                        raise FileExistsError(f"/{array_path} already exists")
                    return NpySpool(self.tree.hierarchy, array_path)
                if entry.kind in (GROUP, ARRAY) and text in _DOCUMENTS:
                    return DocumentWriter(self.tree.hierarchy, entry.node, text, b"")
                raise FsError(errno.EPERM, "only .npy files and metadata documents can be created here")

            writer = await self._blocking("create", vpath, prepare)
            inode = self.inodes.inode(vpath)
            spool = isinstance(writer, NpySpool)
            if spool:
                self.writers[inode] = [writer, 1]
                self.spools[vpath] = inode
            fh = next(self._fh)
            self.handles[fh] = Handle(Entry(FILE, name=text), vpath, inode, writer=writer)
            attr = await self._blocking("create", vpath, self._file_attributes, vpath, 0)
            return pyfuse3.FileInfo(fh=fh, direct_io=not spool), attr

    # ------------------------------------------------------------- nodes
    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx) -> pyfuse3.EntryAttributes:
        parent = self._path(parent_inode)
        vpath = child_path(parent, os.fsdecode(name))
        self._check_writable("mkdir", vpath)

        def make() -> pyfuse3.EntryAttributes:
            entry = self.tree.resolve(parent)
            if entry.kind != GROUP:
                raise FsError(errno.EPERM, "directories can be made only in groups")
            group = self.tree.node(entry.node)
            self.tree.hierarchy.create_group(vpath, zarr_format=group.metadata.zarr_format)
            self.tree.forget(vpath)
            return self._resolve_attr(vpath)[1]

        return await self._blocking("mkdir", vpath, make)

    async def unlink(self, parent_inode: int, name: bytes, ctx) -> None:
        parent = self._path(parent_inode)
        vpath = child_path(parent, os.fsdecode(name))
        self._check_writable("unlink", vpath)
        if vpath in self.spools:
            return

        def remove() -> None:
            entry = self.tree.resolve(vpath)
            if entry.kind == CHUNK:
                self.tree.node(entry.node).pending.replace_chunk(entry.coords, None)
                return entry.node
            if entry.is_dir:
                raise FsError(errno.EISDIR, "is a directory")
            return None  # the other files are views of the node: `rm -r` removes it at rmdir

        node = await self._blocking("unlink", vpath, remove)
        if node is not None:
            self._invalidate_later(node)

    async def rmdir(self, parent_inode: int, name: bytes, ctx) -> None:
        parent = self._path(parent_inode)
        vpath = child_path(parent, os.fsdecode(name))
        self._check_writable("rmdir", vpath)

        def remove() -> bool:
            entry = self.tree.resolve(vpath)
            if entry.kind == CHUNK_DIR:
                return False  # chunk directories come from the grid: nothing to erase
            if entry.kind == GROUP and self.tree.hierarchy.children(entry.node):
                raise FsError(errno.ENOTEMPTY, "the group has children")
            if entry.kind not in (GROUP, ARRAY, BROKEN):
                raise FsError(errno.ENOTDIR, "not a directory")
            if entry.kind == ARRAY:  # waits for background stores, which must not outlive it
                self.tree.node(entry.node).pending.discard_all()
            self.tree.hierarchy.erase_node(entry.node)
            self.tree.hierarchy.context.forget_pending(entry.node)
            self.tree.forget(entry.node)
            return True

        self._check_not_open_for_writing("rmdir", vpath)
        if await self._blocking("rmdir", vpath, remove):
            # buffered writes to what was erased have nowhere to go
            for array in self._dirty_under(vpath):
                array.pending.discard_all()
                self.dirty_arrays.discard(array)

    async def rename(self, parent_old: int, name_old: bytes, parent_new: int, name_new: bytes, flags: int, ctx) -> None:
        src = child_path(self._path(parent_old), os.fsdecode(name_old))
        dst = child_path(self._path(parent_new), os.fsdecode(name_new))
        self._check_writable("rename", src)
        if flags:
            raise pyfuse3.FUSEError(errno.EINVAL)

        def move() -> None:
            entry = self.tree.resolve(src)
            target_parent = self.tree.resolve(dst.rpartition("/")[0])
            if entry.kind not in (GROUP, ARRAY, BROKEN) or target_parent.kind != GROUP:
                raise FsError(errno.EPERM, "only arrays and groups can be moved, and only into groups")
            for array in dirty:  # stored under the old name before the node moves
                array.pending.flush()
            self.tree.hierarchy.move_node(src, dst)
            self.tree.hierarchy.context.forget_pending(src)
            self.tree.forget(src)
            self.tree.forget(dst)

        self._check_not_open_for_writing("rename", src)
        dirty = self._dirty_under(src)
        await self._blocking("rename", src, move)
        self.dirty_arrays.difference_update(dirty)
        self.inodes.rename_tree(src, dst)

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

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx) -> None:
        vpath = self._path(inode)
        self._check_writable("setxattr", vpath)
        key = _attribute_key(name)
        try:
            text = value.decode()
        except UnicodeDecodeError:
            log.warning("setxattr /%s %s: EINVAL: the value is not UTF-8 text", vpath, os.fsdecode(name))
            raise pyfuse3.FUSEError(errno.EINVAL) from None
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:  # setfattr -v K: a plain word is stored as a JSON string
            parsed = text
        except RecursionError:
            log.warning("setxattr /%s %s: EINVAL: the value nests too deeply", vpath, os.fsdecode(name))
            raise pyfuse3.FUSEError(errno.EINVAL) from None
        node = await self._blocking("setxattr", vpath, self._update_attributes, vpath,
                                    lambda a: a.__setitem__(key, parsed))
        self._invalidate_later(node)

    async def removexattr(self, inode: int, name: bytes, ctx) -> None:
        vpath = self._path(inode)
        self._check_writable("removexattr", vpath)
        key = _attribute_key(name)

        def remove(attributes: dict) -> None:
            if key not in attributes:
                raise pyfuse3.FUSEError(pyfuse3.ENOATTR)
            del attributes[key]

        node = await self._blocking("removexattr", vpath, self._update_attributes, vpath, remove)
        self._invalidate_later(node)

    def _update_attributes(self, vpath: str, change: Callable[[dict], None]) -> str:
        """Blocking: rewrite a node's attributes through its metadata document; returns
        the node's path."""
        entry = self.tree.resolve(vpath)
        if entry.kind not in (GROUP, ARRAY):
            raise FsError(errno.ENOTSUP, "attributes belong to arrays and groups")
        node = self.tree.node(entry.node)
        if "zarr.json" in node.documents:
            name = "zarr.json"
            document = load_json(node.documents[name], name)
            attributes = document.setdefault("attributes", {})
            change(attributes)
        elif node.documents:
            name = ".zattrs"
            attributes = load_json(node.documents[name], name) if name in node.documents else {}
            change(attributes)
            document = attributes
        else:
            raise FsError(errno.ENOTSUP, "an implicit group has no metadata to hold attributes")
        self.tree.hierarchy.replace_document(entry.node, name, dump_json(document))
        self.tree.forget(entry.node)
        return entry.node

    async def getxattr(self, inode: int, name: bytes, ctx) -> bytes:
        vpath = self._path(inode)
        key = os.fsdecode(name)
        attrs = await self._blocking("getxattr", vpath, self._attributes_of, vpath)
        if not key.startswith(_XATTR_PREFIX) or key[len(_XATTR_PREFIX):] not in attrs:
            raise pyfuse3.FUSEError(pyfuse3.ENOATTR)
        return json.dumps(attrs[key[len(_XATTR_PREFIX):]], ensure_ascii=False).encode()


def _attribute_key(name: bytes) -> str:
    text = os.fsdecode(name)
    if not text.startswith(_XATTR_PREFIX) or len(text) == len(_XATTR_PREFIX):
        raise pyfuse3.FUSEError(errno.ENOTSUP)
    return text[len(_XATTR_PREFIX):]


def _is_per_open(entry: Entry) -> bool:
    return entry.kind in _PER_OPEN_KINDS or (entry.kind == FILE and entry.name in _DOCUMENTS)


def _node_of(handle: Handle) -> str:
    writer = handle.writer
    return writer.node_path if isinstance(writer, DocumentWriter) else writer.array.path
