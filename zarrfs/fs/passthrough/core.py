"""Passthrough mode (docs/semantics.md, `--raw`) as a filesystem core: every store key a file, every
prefix a directory, bytes exactly as stored. Listings are listings.py (cached for
`metadata_ttl`, whole subtrees at once where the store can); file content is files.py
(ranged reads with readahead; writes spooled, stored on close).

Directories exist while the store holds keys under them; those made through the mount,
and those left empty by removals through it, are kept (`_made_dirs`) for the life of the
mount, as an object store cannot hold an empty prefix."""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

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
from ...store.keys import join_path
from ..core import NOT_CACHED, Attributes, FilesystemCore, OpenFile
from ..directories import DirectoryTimes, links, parent_of
from ..errors import FsError, log_failure
from .files import KeyFileOpen, RangeReader, RawFile, ReadaheadBudget, close_one, truncated_if
from .listings import Listing, Listings
from .metas import UNKNOWN, Metas

log = logging.getLogger(__name__)

READAHEAD_THREADS = 16
VERSIONS_KEPT = 10_000  # files whose (size, mtime) at their last open is remembered
DIRECTORY = Attributes(True)  # shared: the adapter may tell equal attributes apart by identity
# a bigger directory is sorted in a worker thread, not on the adapter's event loop
_SORTED_ON_THE_LOOP = 10_000


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


class PassthroughCore(FilesystemCore):
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
        object_meta: bool = True,
    ) -> None:
        self.store = store
        # whether the store's files keep their modes, owners and times (object_meta False:
        # an object store's are neither read nor changed, at a request per object: kept in
        # memory as for a store that keeps none; new content still carries them)
        self.keeps_meta = store.keeps_meta and object_meta
        store.keep_empty_directories()  # with their modes and times (a local store)
        self.unanswered = unanswered
        self.read_only = read_only or store.read_only
        self.ttl = metadata_ttl
        self.executor = ThreadPoolExecutor(max_workers=READAHEAD_THREADS, thread_name_prefix="zarrfs-readahead")
        self.budget = ReadaheadBudget(readahead_memory)  # fetched ahead of all sequential readers
        self._spool_dir = spool_dir
        self._lock = threading.RLock()
        self._listings = Listings(store, metadata_ttl, self._lock)
        self._metas = Metas(store, metadata_ttl, self.keeps_meta)
        self._made_dirs: set[str] = set()
        self._files: dict[str, RawFile] = {}  # open files by key
        self._opens: dict[int, int] = {}  # opens per open file, by id
        # (size, mtime) at the last open, of the VERSIONS_KEPT files opened last: a file
        # opened again unchanged keeps its pages in the kernel's cache
        self._versions: OrderedDict[str, tuple[int, float | None]] = OrderedDict()
        self._dir_times = DirectoryTimes()

    # -------------------------------------------------------------- the tree
    def _overlay(self, directory: str) -> dict[str, Attributes]:
        """Children the store does not list (yet): directories made or kept through the
        mount, files whose content is in a spool. Callers hold `_lock`."""
        prefix = directory + "/" if directory else ""
        children: dict[str, Attributes] = {}
        for made in self._made_dirs:
            if made.startswith(prefix):
                children[made[len(prefix) :].split("/", 1)[0]] = Attributes(True)
        for file in self._files.values():
            if file.spooled and not file.unlinked and file.key.startswith(prefix):
                name, sep, _ = file.key[len(prefix) :].partition("/")
                children.setdefault(
                    name,
                    Attributes(True) if sep else Attributes(False, file.size(), mtime=file.modified, meta=file.meta()),
                )
        return children

    def lookup(self, path: str) -> Attributes | None:
        attr = self._entry(path)
        if attr is None or not attr.is_dir:
            return attr
        # the root's own listing is not waited for: stat of the root is how a mount is
        # seen to be ready
        own = self._listings.get(path) if path else self._listings.cached(path)
        return replace(self._directory(path, own), meta=attr.meta)

    def _entry(self, path: str) -> Attributes | None:
        """What is at `path`, as its directory's listing shows it."""
        if path == "":
            return self._with_meta(path, DIRECTORY)
        parent, _, name = path.rpartition("/")
        attr = self._child(parent, name, self._listings.get(parent))
        return None if attr is None else self._with_meta(path, attr)

    def lookup_cached(self, path: str) -> Attributes | object | None:
        if path != "":
            parent, _, name = path.rpartition("/")
            listing = self._listings.fresh(parent)
            if listing is None:
                return NOT_CACHED
            attr = self._child(parent, name, listing)
            if attr is None or not attr.is_dir:
                return None if attr is None else self._with_cached_meta(path, attr)
        own = self._listings.cached(path)  # (an expired one counts sub-directories well enough)
        return NOT_CACHED if own is None and path else self._with_cached_meta(path, self._directory(path, own))

    def _with_meta(self, path: str, attr: Attributes) -> Attributes:
        """`attr` with the mode, owner and times the store keeps for `path` (asked for
        where they are not known)."""
        if attr.meta is not None:  # an open file's own
            return attr
        meta = self._metas.get(path, attr.is_dir)
        return attr if meta is None else replace(attr, meta=self._latest(path, attr, meta))

    def _with_cached_meta(self, path: str, attr: Attributes) -> Attributes | object:
        if attr.meta is not None:
            return attr
        meta = self._metas.cached(path, attr.is_dir)
        if meta is UNKNOWN:
            return NOT_CACHED
        return attr if meta is None else replace(attr, meta=self._latest(path, attr, meta))

    def _latest(self, path: str, attr: Attributes, meta: FileMeta) -> FileMeta:
        """A directory's kept times, unless the mount changed its entries since they were
        kept (or cached): then those of the change (_directory), as a local filesystem shows."""
        changed = self._dir_times.get(path) if attr.is_dir else None
        if changed is None or (meta.ctime_ns is None and meta.mtime_ns is None):
            return meta
        kept = max(t for t in (meta.ctime_ns, meta.mtime_ns) if t is not None)
        return meta if kept >= changed * 1e9 else replace(meta, mtime_ns=None, ctime_ns=None)

    def _directory(self, path: str, listing: Listing | None, unlisted: set[str] | None = None) -> Attributes:
        """What `stat` shows of directory `path`: the time of the mount's last change of
        its entries (or the store's own directory's, if later), and 2 links plus one per
        sub-directory where its `listing` is at hand (`unlisted`: its sub-directories
        that only the mount knows, from _unlisted_dirs)."""
        changed = self._dir_times.get(path)
        if listing is None:
            return DIRECTORY if changed is None else Attributes(True, mtime=changed)
        mtime = ctime = changed
        if listing.times is not None:  # the store's own directory (a local one): its times, or ours if later
            mtime, ctime = (max(t, changed or t) for t in listing.times)
        if unlisted is None:
            with self._lock:
                unlisted = self._unlisted_dirs([path])[path]
        return Attributes(True, mtime=mtime, nlink=links(len(listing.dirs | unlisted)), ctime=ctime)

    def _unlisted_dirs(self, directories: list[str]) -> dict[str, set[str]]:
        """The sub-directories of each of `directories` that the store may not list (yet):
        made through the mount, or holding a file not stored yet; in one pass over those
        (a readdir asks for all its sub-directories at once). Callers hold `_lock`."""
        found: dict[str, set[str]] = {directory: set() for directory in directories}
        spooled = [parent_of(f.key) for f in self._files.values() if f.spooled and not f.unlinked]
        for path in [*self._made_dirs, *spooled]:
            parts = path.split("/") if path else []
            for depth, name in enumerate(parts):
                above = found.get("/".join(parts[:depth]))
                if above is not None:
                    above.add(name)
        return found

    def _child(self, parent: str, name: str, listing: Listing) -> Attributes | None:
        """What is at `name` in directory `parent`, whose store listing is `listing`."""
        with self._lock:
            overlay = self._overlay(parent).get(name)
            if name in listing.dirs or (overlay is not None and overlay.is_dir):
                return Attributes(True)  # a key and a prefix of the same name: the prefix is shown
            if overlay is not None:
                return overlay
            if name in listing.files:
                size, mtime = listing.files[name]
                return Attributes(False, size, mtime=mtime)
        return None

    def _existing(self, path: str) -> Attributes:
        attr = self._entry(path)
        if attr is None:
            raise FsError(errno.ENOENT, "no such key or prefix")
        return attr

    def list_dir(self, path: str) -> Iterator[tuple[str, Attributes]]:
        if not self._existing(path).is_dir:
            raise FsError(errno.ENOTDIR, "not a directory")
        children = self._children(path, self._listings.get(path))
        # the attributes of the files not known yet, in one batch (parallel HEADs on S3)
        self._metas.fill([join_path(path, n) for n, a in children if not a.is_dir and a.meta is None])
        return iter([(name, self._with_meta(join_path(path, name), attr)) for name, attr in children])

    def list_dir_cached(self, path: str) -> Iterator[tuple[str, Attributes]] | None:
        attr = self.lookup_cached(path)
        listing = self._listings.fresh(path) if isinstance(attr, Attributes) and attr.is_dir else None
        if listing is None or listing.names() > _SORTED_ON_THE_LOOP:
            return None
        entries = []
        for name, child in self._children(path, listing):
            known = self._with_cached_meta(join_path(path, name), child)
            if not isinstance(known, Attributes):
                return None
            entries.append((name, known))
        return iter(entries)

    def _children(self, path: str, listing: Listing) -> list[tuple[str, Attributes]]:
        with self._lock:  # the mount's own changes are noted in listings under it
            children = {name: Attributes(False, size, mtime=mtime) for name, (size, mtime) in listing.files.items()}
            children.update(self._overlay(path))
            children.update((name, DIRECTORY) for name in listing.dirs)
            subdirs = {join_path(path, name): name for name, attr in children.items() if attr.is_dir}
            unlisted = self._unlisted_dirs(list(subdirs))
            for child, name in subdirs.items():
                children[name] = self._directory(child, self._listings.cached(child), unlisted[child])
        return sorted(children.items())

    def _has_children(self, path: str) -> bool:
        """Whether directory `path` holds anything, asking the store afresh."""
        files, dirs = self.store.list_dir_info(path + "/")
        self._listings.put(path, files, dirs)
        with self._lock:
            return bool(files or dirs or self._overlay(path))

    def _forget_below(self, path: str, gone: bool = False) -> None:
        """Drop cached listings and made directories at and below `path` (`gone`: the
        store holds nothing there any more)."""
        self._listings.forget_below(path, gone)
        self._made_dirs = {d for d in self._made_dirs if d != path and not d.startswith(path + "/")}

    def _removed(self, path: str) -> None:
        self._metas.removed(path)
        self._metas.forget(path.rpartition("/")[0])  # its times changed
        self._listings.note(path, None)
        with self._lock:
            self._forget_below(path, gone=True)
            self._dir_times.forget(path)
            self._keep_parent(path)

    def _keep_parent(self, path: str) -> None:
        """A directory emptied through the mount stays (a shell's `rm -r` then rmdirs it)."""
        parent = path.rpartition("/")[0]
        if parent:
            self._made_dirs.add(parent)

    # ------------------------------------------------------------------ files
    def open(self, path: str, flags: int) -> OpenFile:
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
    def stats(self) -> dict:
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
