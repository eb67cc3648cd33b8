"""The passthrough tree's lookups and listings: what the store's listings show
(listings.py), with the mount's own changes over them (directories made, files not
stored yet), and the modes, owners and times kept for each path (metas.py). The core
(core.py) adds files and the changes of names on top."""

from __future__ import annotations

import errno
import threading
from collections.abc import Iterator
from dataclasses import replace

from ...store import FileMeta, Store
from ...store.keys import join_path
from ..core import Attributes, FilesystemCore, NotAtHand
from ..directories import DirectoryTimes, links, parent_of
from ..errors import FsError
from ..hooks import CoreHooks
from .files import RawFile
from .listings import LISTED_NAME_BYTES, Listing, Listings
from .metas import UNKNOWN, Metas

DIRECTORY = Attributes(True)  # shared: the adapter may tell equal attributes apart by identity
# a bigger directory is sorted in a worker thread, not on the adapter's event loop
_SORTED_ON_THE_LOOP = 10_000


class PassthroughTree(FilesystemCore):
    """The tables of the tree (listings, made directories, open files by key) are under
    `_lock`, which the core's own tables share."""

    def __init__(
        self, store: Store, metadata_ttl: float, metadata_memory: int, object_meta: bool, hooks: CoreHooks
    ) -> None:
        super().__init__(hooks)
        self.store = store
        # whether the store's files keep their modes, owners and times (object_meta False:
        # an object store's are neither read nor changed, at a request per object: kept in
        # memory as for a store that keeps none; new content still carries them)
        self.keeps_meta = store.keeps_meta and object_meta
        store.keep_empty_directories()  # with their modes and times (a local store)
        self.ttl = metadata_ttl
        self._lock = threading.RLock()
        self._listings = Listings(store, metadata_ttl, self._lock, metadata_memory // LISTED_NAME_BYTES)
        self._metas = Metas(store, metadata_ttl, self.keeps_meta)
        self._made_dirs: set[str] = set()
        self._files: dict[str, RawFile] = {}  # open files by key
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

    def lookup(self, path: str, *, wait: bool = True) -> Attributes | None:
        if not wait:
            return self._lookup_at_hand(path)
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

    def _lookup_at_hand(self, path: str) -> Attributes | None:
        if path != "":
            parent, _, name = path.rpartition("/")
            listing = self._listings.fresh(parent)
            if listing is None:
                raise NotAtHand
            attr = self._child(parent, name, listing)
            if attr is None or not attr.is_dir:
                return None if attr is None else self._with_cached_meta(path, attr)
        own = self._listings.cached(path)  # (an expired one counts sub-directories well enough)
        if own is None and path:
            raise NotAtHand
        return self._with_cached_meta(path, self._directory(path, own))

    def _with_meta(self, path: str, attr: Attributes) -> Attributes:
        """`attr` with the mode, owner and times the store keeps for `path` (asked for
        where they are not known)."""
        if attr.meta is not None:  # an open file's own
            return attr
        meta = self._metas.get(path, attr.is_dir)
        return attr if meta is None else replace(attr, meta=self._latest(path, attr, meta))

    def _with_cached_meta(self, path: str, attr: Attributes) -> Attributes:
        if attr.meta is not None:
            return attr
        meta = self._metas.cached(path, attr.is_dir)
        if meta is UNKNOWN:
            raise NotAtHand
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

    def list_dir(self, path: str, *, wait: bool = True) -> Iterator[tuple[str, Attributes]]:
        if not wait:
            return self._list_at_hand(path)
        if not self._existing(path).is_dir:
            raise FsError(errno.ENOTDIR, "not a directory")
        children = self._children(path, self._listings.get(path))
        # the attributes of the files not known yet, in one batch (parallel HEADs on S3)
        self._metas.fill([join_path(path, n) for n, a in children if not a.is_dir and a.meta is None])
        return iter([(name, self._with_meta(join_path(path, name), attr)) for name, attr in children])

    def _list_at_hand(self, path: str) -> Iterator[tuple[str, Attributes]]:
        attr = self._lookup_at_hand(path)
        listing = self._listings.fresh(path) if attr is not None and attr.is_dir else None
        if listing is None or listing.names() > _SORTED_ON_THE_LOOP:
            raise NotAtHand
        children = self._children(path, listing)
        return iter([(name, self._with_cached_meta(join_path(path, name), child)) for name, child in children])

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
