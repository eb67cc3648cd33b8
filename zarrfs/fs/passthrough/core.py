"""Passthrough mode (docs/semantics.md, `--raw`) as a filesystem core: every store key a file, every
prefix a directory, bytes exactly as stored. Lookups and listings are tree.py (over
listings.py: cached for `metadata_ttl`, whole subtrees at once where the store can); file
content is files.py (ranged reads with readahead; writes spooled, stored on close); here,
opens, and the changes of names and attributes.

Directories exist while the store holds keys under them; those made through the mount,
and those left empty by removals through it, are kept (`_made_dirs`) for the life of the
mount, as an object store cannot hold an empty prefix."""

from __future__ import annotations

import errno
import logging
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ...defaults import METADATA_TTL
from ...store import (
    FileMeta,
    KeyNotFoundError,
    Store,
    StorePermissionError,
    UnansweredFetches,
    ValueTooLargeError,
    validate_key,
)
from ..core import Attributes, NotAtHand, OpenFile
from ..directories import parent_of
from ..errors import FsError, log_failure
from ..hooks import NO_HOOKS, CoreHooks
from .files import KeyFileOpen, RawFile, close_one, truncated_if
from .readahead import RangeReader, ReadaheadBudget
from .tree import PassthroughTree

log = logging.getLogger(__name__)

READAHEAD_THREADS = 16
VERSIONS_KEPT = 10_000  # files whose (size, mtime) at their last open is remembered


class RawOpen(KeyFileOpen):
    """One open of a key: the file (shared by every open of the key) and this open's reads."""

    def __init__(self, core: PassthroughCore, file: RawFile, keep_cache: bool) -> None:
        self.core = core
        self.file = file
        self.keep_cache = keep_cache
        self.reader = RangeReader(file, core.executor, core.budget)
        self.writes = False

    def _store(self) -> None:
        # the close of the file's only open is most likely its last: its spool is given
        # to the store (no copy on a local store); a write through a descriptor still
        # open copies it back first
        self.core.store_file(self.file, last=self.core.only_open(self.file))

    def fsync(self) -> None:
        self.core.store_file(self.file)

    def release(self) -> None:
        self.reader.close()
        self.core.closed(self.file)


class PassthroughCore(PassthroughTree):
    """Thread-safe: the tables here (listings, made directories, open files) are under
    `_lock`; store calls and spool I/O run outside it. Modes, owners and times are the
    store's (metas.py): every Attributes handed out carries them."""

    keeps_modes = True

    def __init__(
        self,
        store: Store,
        *,
        read_only: bool = False,
        metadata_ttl: float = METADATA_TTL,
        spool_dir: str | None = None,
        unanswered: UnansweredFetches | None = None,
        readahead_memory: int = 256 << 20,
        metadata_memory: int = 20 << 20,
        object_meta: bool = True,
        hooks: CoreHooks = NO_HOOKS,
    ) -> None:
        """`metadata_memory`: what kept listings may hold; `readahead_memory`: what is
        fetched ahead of all sequential readers together."""
        super().__init__(store, metadata_ttl, metadata_memory, object_meta, hooks)
        self.unanswered = unanswered
        self.read_only = read_only or store.read_only
        self.executor = ThreadPoolExecutor(max_workers=READAHEAD_THREADS, thread_name_prefix="zarrfs-readahead")
        self.budget = ReadaheadBudget(readahead_memory)
        self._spool_dir = spool_dir
        self._opens: dict[int, int] = {}  # opens per open file, by id
        # (size, mtime) at the last open, of the VERSIONS_KEPT files opened last: a file
        # opened again unchanged keeps its pages in the kernel's cache
        self._versions: OrderedDict[str, tuple[int, float | None]] = OrderedDict()

    # ------------------------------------------------------------------ files
    def open(self, path: str, flags: int, *, wait: bool = True) -> OpenFile:
        if not wait:  # (an open may fetch the key's size and time)
            raise NotAtHand
        keep_cache = True
        with self._lock:
            file = self._files.get(path)
        if file is None:
            attr = self._existing(path)
            if attr.is_dir:
                raise FsError(errno.EISDIR, "is a directory")
            with self._lock:
                # the kernel's cached pages stay valid unless the stored value changed
                keep_cache = self._versions.pop(path, None) == (attr.size, attr.mtime)
                self._versions[path] = (attr.size, attr.mtime)
                if len(self._versions) > VERSIONS_KEPT:
                    self._versions.popitem(last=False)  # its next open drops its pages: the safe side
                file = self._files.get(path)
                if file is None:  # (another open may have raced us)
                    file = self._files[path] = RawFile(
                        self.store, path, attr.size, self._spool_dir, self.unanswered, attr.meta
                    )
        return truncated_if(self._open(file, keep_cache), flags)

    def _open(self, file: RawFile, keep_cache: bool) -> RawOpen:
        with self._lock:
            self._opens[id(file)] = self._opens.get(id(file), 0) + 1
        return RawOpen(self, file, keep_cache)

    def _fits(self, path: str, directory: bool = False) -> str:
        """`path` as a key, if the store takes it (for a `directory`, a key below it);
        ENAMETOOLONG before anything is made where the store's keys are shorter."""
        key = validate_key(path)
        limit = self.store.max_key_bytes
        length = len(key.encode()) + (2 if directory else 0)  # (below a directory: "/" and a name)
        if limit is not None and length > limit:
            raise FsError(errno.ENAMETOOLONG, f"a key of {length} bytes, more than the {limit} this store takes")
        return key

    def create(self, path: str) -> tuple[OpenFile, Attributes]:
        key = self._fits(path)
        file = RawFile(self.store, key, None, self._spool_dir, self.unanswered)
        file.create()
        with self._lock:
            if path in self._files:  # created meanwhile through another open: share it
                file.close()
                file = self._files[path]
            else:
                self._files[path] = file
        self._dir_times.touch(parent_of(path))
        return self._open(file, keep_cache=False), Attributes(False, file.size(), mtime=file.modified)

    def store_file(self, file: RawFile, last: bool = False) -> bool:
        """Store a file's spool if it changed (at its `last` close: giving the spool to
        the store, RawFile.flush); True if it did. A value the store refuses as too large
        fails EFBIG; either way a failure leaves the old value. What a close failed to store
        is not stored by a later close or fsync (a reader's, say) unless written again: that
        close told its writer it failed, and the store keeps the old value (`closed`)."""
        if file.refused:
            return False
        try:
            if not file.dirty or not file.flush(last):
                return False
        except ValueTooLargeError as exc:
            raise FsError(errno.EFBIG, f"not stored: {exc.message}") from None
        if not file.unlinked:
            self._metas.note(file.key, False, file.meta())
            self._metas.forget(file.key.rpartition("/")[0])  # its times changed
            self._listings.note(file.key, Attributes(False, file.stored_size or 0, mtime=file.modified))
        self.changed(file.key)  # its stored mtime is new
        return True

    def only_open(self, file: RawFile) -> bool:
        with self._lock:
            return self._opens.get(id(file)) == 1

    def closed(self, file: RawFile) -> None:
        """The last close of one open: the last one of the file stores it and lets it go."""

        def let_go() -> None:
            if self._files.get(file.key) is file:
                del self._files[file.key]
            file.close()

        close_one(self._lock, self._opens, file, lambda: self.store_file(file, last=True), let_go)

    def truncate(self, path: str, size: int) -> None:
        with self._lock:
            file = self._files.get(path)
            if file is not None:  # held as by an open, so that a last close meanwhile waits
                self._opens[id(file)] = self._opens.get(id(file), 0) + 1
        if file is not None:
            try:
                file.truncate(size)
                # stored before truncate(2) returns, as it is when no open holds the file:
                # the open may be one whose close has returned and whose release is on its
                # way (the kernel sends it afterwards), and a reader of the store goes by
                # the call's return
                self.store_file(file)
            finally:
                self.closed(file)
            return
        attr = self._existing(path)
        if attr.is_dir:
            raise FsError(errno.EISDIR, "is a directory")
        file = RawFile(self.store, path, attr.size, self._spool_dir, self.unanswered, attr.meta)
        try:
            file.truncate(size)
            file.flush(last=True)
        finally:
            file.close()
        self._metas.note(path, False, file.meta())
        self._listings.note(path, Attributes(False, size, mtime=file.modified))

    # ------------------------------------------------------------------ names
    def mkdir(self, path: str) -> Attributes:
        self._fits(path, directory=True)
        if self._entry(path) is not None:
            raise FsError(errno.EEXIST, "already exists")
        with self._lock:
            self._made_dirs.add(path)
        self._metas.forget(path.rpartition("/")[0])  # its times changed
        self._listings.note(path, Attributes(True))
        self._listings.put(path, {}, [])  # nothing was there: it holds nothing
        self._dir_times.touch(parent_of(path), path)
        return self._directory(path, self._listings.cached(path))

    # ------------------------------------------------------------- attributes
    def set_attributes(self, path: str, meta: FileMeta) -> Attributes:
        """Kept by the store (on a local file or directory; S3: object metadata, by a
        CopyObject onto itself); a file whose content is not stored yet keeps them until
        it is, and gets them with it. Where the store keeps none (directories on S3,
        memory://), they are kept in memory for the life of the mount."""
        attr = self._existing(path)
        change = replace(meta, ctime_ns=time.time_ns())
        file = None
        if not attr.is_dir:
            with self._lock:
                file = self._files.get(path)
            if file is not None and file.dirty:
                file.set_meta(change)
                return replace(attr, meta=file.meta())
        kept = self.store.keeps_dir_meta and path != "" if attr.is_dir else self.keeps_meta
        if kept:
            try:
                new = self.store.set_meta(path, change, directory=attr.is_dir)
            except StorePermissionError as exc:
                raise FsError(errno.EPERM, f"the store refused: {exc.message}") from None
        else:
            new = (self._metas.get(path, attr.is_dir) or FileMeta()).updated(change)
        self._metas.note(path, attr.is_dir, new)
        if attr.is_dir:
            self._dir_times.settled(path)  # times set now win over the entries' last change
        if file is not None:
            file.set_meta(change)  # for its next store
        return replace(attr, meta=new)

    def rmdir(self, path: str) -> None:
        if not self._existing(path).is_dir:
            raise FsError(errno.ENOTDIR, "not a directory")
        if self._has_children(path):
            raise FsError(errno.ENOTEMPTY, "directory not empty")
        parent, _, base = path.rpartition("/")
        listing = self._listings.cached(parent)
        if self.store.keeps_dir_meta or (listing is not None and base in listing.dirs):
            # an empty directory the store itself holds (a local one): remove it there too
            self.store.erase_prefix(path + "/")
        self._removed(path)
        self._dir_times.touch(parent_of(path))

    def unlink(self, path: str) -> None:
        if self._existing(path).is_dir:
            raise FsError(errno.EISDIR, "is a directory")
        with self._lock:
            file = self._files.get(path)
        if file is not None:  # still open: it lives on in its spool until closed, never stored
            file.hold()
        self.store.erase(path)
        if file is not None:
            with self._lock:
                file.unlinked = True
                if self._files.get(path) is file:
                    del self._files[path]
        self._removed(path)
        self._dir_times.touch(parent_of(path))

    def rename(self, src: str, dst: str, replace: bool = True) -> None:
        source = self._existing(src)
        self._fits(dst, directory=source.is_dir)
        target = self._entry(dst)
        if target is not None:
            if not replace:
                raise FsError(errno.EEXIST, "the destination exists")
            if source.is_dir and not target.is_dir:
                raise FsError(errno.ENOTDIR, "the destination is not a directory")
            if target.is_dir and not source.is_dir:
                raise FsError(errno.EISDIR, "the destination is a directory")
            if target.is_dir and self._has_children(dst):
                raise FsError(errno.ENOTEMPTY, "the destination is not empty")
        if source.is_dir:
            self._rename_dir(src, dst, target is not None)
        else:
            with self._lock:
                file = self._files.get(src)
                replaced = self._files.get(dst)
            if file is not None:  # written but not yet closed: store it, then move it
                self.store_file(file)
            if replaced is not None and replaced is not file:  # open: it keeps its bytes
                replaced.hold()
            self.store.move(src, dst, replace=True)
            with self._lock:
                replaced = self._files.pop(dst, None)
                if replaced is not None:
                    replaced.unlinked = True
                if file is not None:
                    file.key = dst
                    if self._files.get(src) is file:  # (not let go by its last close meanwhile)
                        self._files[dst] = self._files.pop(src)
        self._moved(src, dst, source)
        self._dir_times.touch(parent_of(src), parent_of(dst), *([dst] if source.is_dir else []))

    def _rename_dir(self, old: str, new: str, replaces_empty_dir: bool) -> None:
        with self._lock:
            inside = [f for k, f in self._files.items() if k.startswith(old + "/")]
        for file in inside:
            self.store_file(file)
        if replaces_empty_dir:
            self.store.erase_prefix(new + "/")
        try:
            self.store.move(old, new)
        except KeyNotFoundError:  # nothing stored below: only the mount knew the directory
            if self.store.keeps_dir_meta:  # or a local store holds it empty: made anew, as it was
                meta = self._metas.get(old, True)
                if meta is not None:
                    self.store.set_meta(new, replace(meta, ctime_ns=None), directory=True)
            self.store.erase_prefix(old + "/")
        with self._lock:
            for file in inside:
                del self._files[file.key]
                file.key = new + file.key[len(old) :]
                self._files[file.key] = file

    def _moved(self, old: str, new: str, attr: Attributes) -> None:
        self._metas.moved(old, new)
        self._metas.forget(old.rpartition("/")[0])  # their times changed
        self._metas.forget(new.rpartition("/")[0])
        self._listings.note(old, None)
        self._listings.note(new, attr)
        with self._lock:
            moved = {d for d in self._made_dirs if d == old or d.startswith(old + "/")}
            self._forget_below(old, gone=True)
            self._forget_below(new)
            self._made_dirs |= {new + d[len(old) :] for d in moved}
            self._dir_times.forget(old)
            self._keep_parent(old)

    def link(self, src: str, dst: str) -> Attributes:
        # A store has no links: the new name gets a copy of the value (so the
        # link-then-unlink idiom of atomic writers, zarr-python's among them, works),
        # made by the store itself where it can (Store.copy): never the whole value in
        # memory, which a store that cannot copy refuses past a bound.
        self._fits(dst)
        if self._existing(src).is_dir:
            raise FsError(errno.EPERM, "directories cannot be linked")
        if self._entry(dst) is not None:
            raise FsError(errno.EEXIST, "the destination exists")
        with self._lock:
            file = self._files.get(src)
        if file is not None:
            self.store_file(file)
        try:
            self.store.copy(src, dst)
        except ValueTooLargeError as exc:
            raise FsError(
                errno.EPERM, f"this store copies through memory, and the value is too large to link ({exc.message})"
            ) from None
        info = self.store.get_info(dst)
        if info is None:  # erased at once by another
            raise KeyNotFoundError("no such key", dst)
        attr = Attributes(False, info[0], mtime=time.time())
        self._listings.note(dst, attr)
        self._dir_times.touch(parent_of(dst))
        return attr

    # ---------------------------------------------------------------- the mount
    def stats(self) -> dict[str, Any]:
        return {**self.store.request_stats(), **self.session_stats(), "readahead_bytes": self.budget.used}

    def shutdown(self) -> None:
        """Store what open files still hold (the session has ended, opens with it)."""
        with self._lock:
            files = list(self._files.values())
            self._files.clear()
        for file in files:
            try:
                self.store_file(file, last=True)
            except Exception as exc:
                log_failure("flush at unmount", "/" + file.key, exc)
            file.close()

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)
