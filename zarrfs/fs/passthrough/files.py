"""A store key as a plain file (passthrough mode, docs/semantics.md): reads are ranged gets, with
readahead for sequential readers (readahead.py); writes go to a local spool file that is stored whole,
atomically, on flush, streamed from the spool. Methods block."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TypeVar

from ...store import ByteRange, FileMeta, Store, StoreUnavailableError, UnansweredFetches
from ...store.local_writes import copy_file
from ..core import Attributes, NotAtHand, OpenFile
from ..errors import FsError
from ..spool import Spool
from .readahead import RangeReader

log = logging.getLogger(__name__)

_FILL_PIECE = 32 << 20  # bytes per ranged get when copying a stored value into a spool
# the largest file, on every store: S3's largest object (5 TiB; ext4's largest file is 16
# TiB); a write or truncate past it fails EFBIG at once, as on a local filesystem
MAX_FILE_SIZE = 5 << 40


class RawFile:
    """The value at one key as an open file, shared by all handles of one inode.

    Until something writes to it, reads go to the store (through each handle's
    RangeReader). The first write or truncate copies the value into an anonymous local
    spool file; from then on the spool is the file, and flush() stores it whole from
    there (Store.set_file: streamed, in bounded memory, where the store can). `key`
    follows renames; `unlinked` stops a removed file from being stored again. `unanswered` (remote stores) keeps
    the values the store did not answer for a deadline, as the decoded tree keeps chunks.
    `meta`: its mode, owner and times, given to the store with its content; a write makes
    its mtime that of the write, until a later utimens sets one.
    """

    def __init__(
        self,
        store: Store,
        key: str,
        stored_size: int | None,
        spool_dir: str | None,
        unanswered: UnansweredFetches | None = None,
        meta: FileMeta | None = None,
    ) -> None:
        self.store = store
        self.unanswered = unanswered
        self.key = key
        self.stored_size = stored_size  # None: nothing stored at `key` when opened
        self.unlinked = False
        self.modified: float | None = None  # when last written through the mount
        self._meta = meta or FileMeta()
        self._spool_dir = spool_dir
        self._spool: Spool | None = None
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        # held while the spool is written, and while a last flush gives it to the store;
        # once given (`_given`), the spool is the stored value: the next write copies it first
        self._write_lock = threading.Lock()
        self._given = False
        self._failed = -1  # the version whose store failed last
        self._refused = -1  # the version whose store failed at a close
        self._version = 0  # writes so far; dirty while it differs from _stored_version
        self._stored_version = 0

    @property
    def spooled(self) -> bool:
        return self._spool is not None

    @property
    def refused(self) -> bool:
        """Whether what the file holds now is what a close failed to store."""
        return self._refused == self._version and self.dirty

    def close_failed(self) -> None:
        """A close failed to store the file (its writer was told)."""
        self._refused = self._failed

    @property
    def dirty(self) -> bool:
        return self._version != self._stored_version and not self.unlinked

    def size(self) -> int:
        spool = self._spool
        if spool is not None:
            return spool.size()
        return self.stored_size or 0

    def meta(self) -> FileMeta:
        """The attributes the file has now (its mtime: the last write's, unless set since)."""
        with self._lock:
            return self._meta_now()

    def _meta_now(self) -> FileMeta:
        if self._meta.mtime_ns is not None or self.modified is None:
            return self._meta
        return replace(self._meta, mtime_ns=int(self.modified * 1e9))

    def set_meta(self, change: FileMeta) -> None:
        """Attributes set while the file holds content not yet stored: stored with it."""
        with self._lock:
            self._meta = self._meta.updated(change)

    def _wrote(self) -> None:
        """Callers hold `_lock`."""
        self._version += 1
        self.modified = time.time()
        self._meta = replace(self._meta, mtime_ns=None, ctime_ns=time.time_ns())

    def create(self) -> None:
        """Start as a new, empty file: stored at the next flush even if nothing is written."""
        self._materialize(0)
        with self._lock:
            self._wrote()

    def hold(self) -> None:
        """Its key is about to be removed or replaced while the file is open: copy the
        stored value into the spool (if not there yet), which holds the file's bytes
        from then on, as an unlinked file's inode does until its last close."""
        with self._write_lock:
            self._materialize()

    def read(self, reader: RangeReader, offset: int, size: int) -> bytes:
        spool = self._spool
        if spool is None:
            return reader.read(offset, size)
        return spool.read(offset, size)

    def write(self, offset: int, data: bytes) -> int:
        _check_size(offset + len(data))
        with self._write_lock:
            written = self._writable().write(offset, data)
        with self._lock:  # after the bytes are in the spool, so a racing flush stays dirty
            self._wrote()
        return written

    def truncate(self, size: int) -> None:
        _check_size(size)
        with self._write_lock:
            self._writable(size).truncate(size)
        with self._lock:
            self._wrote()

    def flush(self, last: bool = False) -> bool:
        """Store the spool at `key` if it changed since last stored; True if it did. At
        the `last` flush (its last close) the spool is given to the store, which may keep
        that very file (a local store on the same filesystem: no copy)."""
        with self._flush_lock, contextlib.ExitStack() as stack:
            if last:
                stack.enter_context(self._write_lock)
            with self._lock:
                version = self._version
                if version == self._stored_version or self.unlinked or self._spool is None:
                    return False
                spool = self._spool
                meta = self._meta_now()
            try:
                size = self.store.set_file(self.key, spool.fileno(), consume=last, meta=meta)
            except BaseException:
                self._failed = version
                raise
            self._given = self._given or last
            if self.unanswered is not None:  # the store has answered for it now
                self.unanswered.forget([self.key])
            with self._lock:
                self._stored_version = version
                self.stored_size = size
            return True

    def close(self) -> None:
        with self._lock:
            spool, self._spool = self._spool, None
        if spool is not None:
            spool.close()

    def _writable(self, limit: int | None = None) -> Spool:
        """The spool, to be written: a copy of it if it was given to the store. Callers
        hold `_write_lock`."""
        if not self._given:
            return self._materialize(limit)
        given = self._spool
        assert given is not None
        copy = Spool(self._spool_dir)
        try:
            copy_file(given.fileno(), copy.fileno())
        except BaseException:
            copy.close()
            raise
        with self._lock:
            self._spool = copy  # the given one is closed by its last reader (or now)
        self._given = False
        return copy

    def _materialize(self, limit: int | None = None) -> Spool:
        """The spool, created on first use holding the stored value (up to `limit` bytes)."""
        with self._lock:
            if self._spool is not None:
                return self._spool
            spool = Spool(self._spool_dir)
            try:
                self._fill(spool, limit)
            except BaseException:
                spool.close()
                raise
            self._spool = spool
            return spool

    def _fill(self, spool: Spool, limit: int | None) -> None:
        if not self.stored_size or limit == 0:
            return
        offset = 0
        while limit is None or offset < limit:
            wanted = _FILL_PIECE if limit is None else min(limit - offset, _FILL_PIECE)
            piece = self.get(self.key, offset, offset + wanted)
            if piece is None:  # removed since it was opened: what is left is empty
                spool.truncate(0)
                return
            spool.write(offset, piece)
            offset += len(piece)
            if len(piece) < wanted:  # the end of the value
                return

    def get(self, key: str, start: int, end: int) -> bytes | None:
        """Bytes `start:end` of the value at `key` (None: no such key); a key the store
        did not answer within the last deadline fails at once."""
        unanswered = self.unanswered
        if unanswered is None:
            return self.store.get(key, ByteRange.span(start, end))
        unanswered.check([key])
        started = time.monotonic()
        try:
            return self.store.get(key, ByteRange.span(start, end))
        except StoreUnavailableError as exc:
            unanswered.note([key], exc, time.monotonic() - started)
            raise


def _check_size(size: int) -> None:
    if size > MAX_FILE_SIZE:
        raise FsError(errno.EFBIG, f"{size} bytes, more than the largest file ({MAX_FILE_SIZE} bytes)")


class KeyFileOpen(OpenFile):
    """One open of a key: the file (shared by every open of the key) and this open's
    reads. What storing the file at a flush means is its core's (`_store`)."""

    file: RawFile
    reader: RangeReader
    writes: bool

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes:
        if not wait:
            raise NotAtHand
        return self.file.read(self.reader, offset, size)

    def write(self, offset: int, data: bytes, *, wait: bool = True) -> int:
        if not wait:
            raise NotAtHand
        self.writes = True
        return self.file.write(offset, data)

    def truncate(self, size: int) -> None:
        self.writes = True
        self.file.truncate(size)

    def flush(self) -> None:
        try:
            self._store()
        except BaseException:
            self.file.close_failed()
            raise

    def _store(self) -> None:
        raise NotImplementedError

    def attributes(self) -> Attributes:
        file = self.file
        return Attributes(False, file.size(), mtime=file.modified, nlink=0 if file.unlinked else 1)


_Open = TypeVar("_Open", bound="KeyFileOpen")


def truncated_if(opened: _Open, flags: int) -> _Open:
    """`opened`, emptied where the open asked O_TRUNC (released if that fails)."""
    if flags & os.O_TRUNC:
        try:
            opened.truncate(0)
        except BaseException:
            opened.release()
            raise
    return opened


def close_one(
    lock: AbstractContextManager[object],
    opens: dict[int, int],
    file: RawFile,
    store: Callable[[], object],
    let_go: Callable[[], None],
) -> None:
    """The close of one open of `file` (its opens counted in `opens`, under `lock`): the
    last one stores it (`store`) and lets it go (`let_go`, under `lock`, unless it was
    opened again meanwhile). What a close already failed to store is dropped (that close
    told the writer), with one log line, rather than stored behind its back."""
    with lock:
        opens[id(file)] -= 1
        if opens[id(file)] > 0:
            return
    try:
        if file.refused:
            log.warning(
                "close /%s: the value a close failed to store is dropped; the store keeps what it holds", file.key
            )
            return
        store()
    finally:
        with lock:
            if opens.get(id(file)) == 0:  # not opened again meanwhile
                del opens[id(file)]
                let_go()
