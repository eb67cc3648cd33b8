"""The handlers of open files: open, create, read, write, the closes, setattr (a
truncate goes through the open where there is one), and the page cache pushes that
random reads earn, which never overlap a writer."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import AsyncIterator

import pyfuse3
import trio

from ...store import FileMeta
from ..core import Attributes, NotAtHand, OpenFile
from .requests import NO_META, Handle, Requests
from .stream_pages import LEAD, LEAD_WAIT, StreamPushes


class FileRequests(Requests):
    """Open files by handle; `_writers_opening` counts opens for writing under way."""

    _writers_opening = 0
    _streams: StreamPushes | None = None

    @property
    def streams(self) -> StreamPushes:
        """Pushes ahead of sequential readers (`stream_pages.py`), made at the first read."""
        if self._streams is None:
            self._streams = StreamPushes(self.notifier, self._no_writer)
        return self._streams

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        path = self._path(inode)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            self._writable("open", path)
            async with self._writer_opening():
                file = await self._call("open", path, self.core.open, path, flags)
        else:
            file = await self._at_hand("open", path, self.core.open, path, flags)
        return self._file_info(file, inode, path)

    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: pyfuse3.RequestContext
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
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
        return pyfuse3.FileInfo(
            fh=pyfuse3.FileHandleT(fh), direct_io=file.direct_io, keep_cache=file.keep_cache and not file.direct_io
        )

    # pyfuse3 replies with any buffer (PyObject_GetBuffer); its stub says bytes
    async def read(self, fh: int, offset: int, size: int) -> bytes | memoryview:  # type: ignore[override]
        handle = self.handles[fh]
        self.counters["fuse_read"] += 1
        try:
            data = handle.file.read(offset, size, wait=False)  # at hand: no thread hop
        except NotAtHand:
            data = await self._call("read", handle.path, handle.file.read, offset, size)
            if self.streams.after_read(handle.inode, handle.file, offset, len(data)):
                await self._lead(handle.inode, offset + len(data))
            return data
        except Exception as exc:
            raise pyfuse3.FUSEError(self._failed("read", handle.path, exc)) from None
        if self.streams.after_read(handle.inode, handle.file, offset, len(data)):
            await self._lead(handle.inode, offset + len(data))
        hot = handle.file.hot_windows()
        if hot:
            self._push_pages(handle, hot)
        if self.notifier.busy():
            time.sleep(0)  # not a wait: hands the GIL to the pushing thread for a moment
        return data

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self.handles[fh]
        try:
            written = handle.file.write(offset, data, wait=False)  # no thread hop
        except NotAtHand:
            return await self._call("write", handle.path, handle.file.write, offset, data)
        except Exception as exc:
            raise pyfuse3.FUSEError(self._failed("write", handle.path, exc)) from None
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

    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
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
        if change != NO_META and path is not None:  # (not kept for a file whose name is gone)
            self._writable("setattr", path)
            changed = await self._call("setattr", path, self.core.set_attributes, path, change)
            return self._entry(path, changed, counted=False)
        return await self.getattr(inode, ctx)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext | None = None) -> pyfuse3.EntryAttributes:
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

    # ---------------------------------------------------------- page cache pushes
    async def _lead(self, inode: int, end: int) -> None:
        """A streaming reader's reply waits until the windows queued in the `LEAD` bytes
        past it are pushed (at most `LEAD_WAIT`): let go at once, it would pass the pushes
        and send a request, through this loop, for each page it reached first."""
        event = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def wake() -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(event.set)

        waiter = self.notifier.when_pushed(inode, end, end + LEAD, wake)
        if waiter is None:
            return
        self.counters["fuse_read_led"] += 1
        try:
            with trio.move_on_after(LEAD_WAIT):
                await event.wait()
        finally:
            self.notifier.unwait(waiter)

    def _push_pages(self, handle: Handle, windows: list[tuple[int, int]]) -> None:
        """Hand windows that random reads keep returning to over to the kernel's page
        cache. A push never overlaps a writer: none starts while a file is open for
        writing or being opened for writing, and opening one first waits for pushes."""
        if self._no_writer():
            self.notifier.push(handle.inode, handle.file, windows)

    def _no_writer(self) -> bool:
        return not self._writers_opening and not any(h.file.writes for h in self.handles.values())

    @contextlib.asynccontextmanager
    async def _writer_opening(self) -> AsyncIterator[None]:
        self._writers_opening += 1
        try:
            await self._pushes_ended()
            yield
        finally:
            self._writers_opening -= 1
