"""The decoded tree as a filesystem core (docs/semantics.md): paths resolve through the Tree to
views; opens for writing become the files of files.py and npy.py; nodes are made, erased
and moved through the hierarchy; attributes are extended attributes. A `.npy` copied in
(npy.py: numpy) is imported with the first."""

from __future__ import annotations

import errno
import functools
import logging
import os
import resource
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from ...defaults import METADATA_TTL
from ...format import AnyHierarchy, validate_node_name
from ...format.consolidation import ConsolidatedUpkeep
from ...format.metadata import METADATA_NAMES
from ...store import FileMeta
from ...store.keys import ancestors, join_path
from ...views import catalogue
from ...views.ahead.policy import DecodeAhead
from ...views.base import FileView
from ..core import NOT_CACHED, Attributes, FilesystemCore, OpenFile
from ..directories import DirectoryTimes, links, parent_of
from ..errors import FsError, errno_for, log_failure
from ..hooks import NO_HOOKS, CoreHooks
from . import xattrs
from .consolidation import ConsolidationWriter
from .documents import DocumentLocks
from .entries import (
    ARRAY,
    BROKEN,
    CHUNK,
    CHUNK_DIR,
    FILE,
    GROUP,
    INTERNAL,
    INTERNAL_DIR,
    INTERNAL_FILE,
    KEY,
    KEY_DIR,
    V2_CHUNK,
    V2_DIR,
    V2_FILE,
    Entry,
    directory,
)
from .files import BufferFile, ChunkFile, DataFile, DocumentFile
from .hot import HotWindows
from .names import EverydayNames
from .pages import PageDrops
from .registry import PendingRegistry
from .store_keys import StoreKeys
from .times import NodeTimes
from .tree import Tree
from .view_files import ChunkViewFile, SharedViewFile, ViewFile
from .walk import ChunkWalk
from .write_behind import WriteBehind

if TYPE_CHECKING:
    from ...format import Array
    from ...format.pending import PendingWrites
    from ...views.chunk import ChunkView
    from ...views.data import DataView
    from .npy import NpySpool

log = logging.getLogger(__name__)
_LISTED_AT_ONCE = 1024  # larger chunk directories are listed lazily, by a worker

EMPTIED_KEPT = 10_000


class DecodedCore(FilesystemCore):
    """Thread-safe: the Tree's caches are under its lock, each array's pending writes
    under theirs, the tables here (opens for writing, `.npy` spools, writes kept for
    unmount) under `_lock`, write-behind and the writes counted for the kernel's pages
    under their own (write_behind.py, pages.py), and each
    read-modify-write or store of a metadata document under its node's lock of
    `_documents` (an erasure or move: its subtree's)."""

    xattr_prefix = xattrs.XATTR_PREFIX

    def __init__(
        self,
        hierarchy: AnyHierarchy,
        *,
        read_only: bool = False,
        metadata_ttl: float = METADATA_TTL,
        spool_dir: str | None = None,
        dirty_limit: int = 256 << 20,
        scratch_limit: int = 256 << 20,
        hooks: CoreHooks = NO_HOOKS,
    ) -> None:
        super().__init__(hooks)
        self.hierarchy = hierarchy
        self.read_only = read_only
        self.pending = PendingRegistry(may_wait=lambda: not self.tree.answering_from_cache())
        self._node_times = NodeTimes()  # of files: when the mount last changed their node, or saw it changed
        self.tree = Tree(hierarchy, metadata_ttl, self.stats, self.pending, replaced=self._replaced)
        # the store's keys at their paths in array directories, as stored (store_keys.py)
        self.keys: StoreKeys = StoreKeys(self, spool_dir)
        self.tree.keys = self.keys
        self._spool_dir = spool_dir
        self._lock = threading.Lock()
        # no attribute change (setxattr) reads a document that another store is replacing,
        # or that an erasure or move takes away: it would store the old one back (a resize
        # undone, its chunks outside erased; a removed node brought back without its chunks)
        self._documents = DocumentLocks()
        self._writers: dict[int, tuple[str, OpenFile]] = {}  # opens for writing, by id
        self._spools: dict[str, NpySpool] = {}  # `.npy` files being copied in, by path
        self._unstored: list[BufferFile] = []  # whose store failed at their last close
        self._changes: dict[str, int] = {}  # node path -> writes, erasures and moves through the mount
        self._pages = PageDrops()  # which opens of shared views have the kernel drop its pages
        self._dir_times = DirectoryTimes()
        # scratch files, names removed while their node stays, `NAME.npy` of an array made
        # from one, and the modes and times set (names.py)
        self._names = EverydayNames(self, scratch_limit, spool_dir)
        # arrays whose metadata document was unlinked (as `rm -r` does before its rmdir):
        # only those are erased by rmdir, a bare `rmdir ARRAY` is ENOTEMPTY (at most
        # EMPTIED_KEPT remembered, the oldest forgotten first)
        self._emptied: OrderedDict[str, None] = OrderedDict()
        # per file view: its HotWindows (for `data`, `data.npy`) and DecodeAhead
        self._read_state: weakref.WeakKeyDictionary[FileView, tuple[Any, ...]] = weakref.WeakKeyDictionary()
        # per array: the walk through its chunk files
        self._walks: weakref.WeakKeyDictionary[Array, ChunkWalk] = weakref.WeakKeyDictionary()
        self._behind = WriteBehind(self.pending, dirty_limit)
        self._consolidation: ConsolidationWriter | None = None
        if not read_only:
            hierarchy.upkeep = ConsolidatedUpkeep(hierarchy.store)
            self._consolidation = ConsolidationWriter(hierarchy.upkeep, self._documents)

    # ------------------------------------------------------------------ reading
    def lookup(self, path: str) -> Attributes | None:
        with self._lock:
            spool = self._spools.get(path)
        if spool is not None:
            return Attributes(False, spool.spool.size(), meta=self._names.modes.shown(path, None))
        scratch = self._names.attributes(path)
        if scratch is not None:
            return scratch
        entry = self._resolve(path)
        if entry is None:
            return None
        if entry.kind == GROUP and self._lists_at_lookup(path):
            self.tree.children(entry.node)  # (its links count them)
        return self._timed(path, entry, self.tree.attributes(entry))

    def _lists_at_lookup(self, path: str) -> bool:
        """Whether a lookup of group `path` lists it, for its links: all but the root, unless
        the mount changed the root's entries (`stat` of the root is how a mount is seen to
        be ready: it reads the root's document alone)."""
        return path != "" or self._dir_times.get(path) is not None

    def _timed(self, path: str, entry: Entry, attributes: Attributes) -> Attributes:
        """An entry's attributes with the time of the mount's last change: of a directory's
        entries; of a file's node (times.py). (`entry`: the file's, or its directory's.)"""
        changed = self._change_time(path, entry, attributes.is_dir)
        held = self._names.modes.shown(path, changed)
        if held is not None:
            attributes = replace(attributes, meta=held)
        return attributes if changed is None else replace(attributes, mtime=changed)

    def _change_time(self, path: str, entry: Entry, is_dir: bool) -> float | None:
        if is_dir:
            return self._dir_times.get(path)
        return self._node_times.get(entry.node) if entry.kind not in (INTERNAL_DIR, INTERNAL_FILE) else None

    def lookup_cached(self, path: str) -> Attributes | None | object:
        with self._lock:
            if path in self._spools:
                return NOT_CACHED
        if self._names.scratch.get(path) is not None:
            return NOT_CACHED
        if self._names.removed.hides(path):
            return None
        try:
            entry = self.tree.resolve_cached(path)
        except Exception as exc:  # (`NAME.npy` may answer for array NAME: asked the slow way)
            return None if errno_for(exc) == errno.ENOENT and not path.endswith(".npy") else NOT_CACHED
        if entry is None or (
            entry.kind == GROUP
            and self._lists_at_lookup(path)
            and self.tree.cached(self.tree.children, entry.node) is None
        ):
            return NOT_CACHED
        attributes = self.tree.cached(self.tree.attributes, entry, True)
        return NOT_CACHED if attributes is None else self._timed(path, entry, attributes)

    def open_cached(self, path: str, flags: int) -> OpenFile | None:
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            return None
        with self._lock:
            if path in self._spools:
                return None
        if self._names.scratch.get(path) is not None or self._names.removed.hides(path):
            return None
        entry = self.tree.resolve_cached(path)
        if entry is None or entry.is_dir or entry.kind == KEY or self.hierarchy.needs_verifying(entry.node):
            return None
        view = self.tree.view_cached(entry)
        return None if view is None else self._view_file(path, entry, view)

    def _resolve(self, path: str) -> Entry | None:
        if self._names.removed.hides(path):
            return None
        try:
            return self.tree.resolve(path)
        except Exception as exc:
            if errno_for(exc) == errno.ENOENT:
                return self._names.npy_alias(path)
            raise

    def _existing(self, path: str) -> Entry:
        entry = self._resolve(path)
        if entry is None:
            raise FsError(errno.ENOENT, "no such file or directory")
        return entry

    def list_dir(self, path: str) -> Iterator[tuple[str, Attributes]]:
        entry = self._existing(path)
        if not entry.is_dir:
            raise FsError(errno.ENOTDIR, "not a directory")
        if entry.kind == KEY_DIR:  # sizes from the store's listing, not one request per key
            return iter([(name, attributes) for name, _, attributes in self.keys.listing(entry)])
        return self._entries(path, entry)

    def list_dir_cached(self, path: str) -> list[tuple[str, Attributes]] | None:
        try:
            entry = self.tree.resolve_cached(path)
            if entry is None or not entry.is_dir or entry.kind == BROKEN:
                return None
            listed = self.tree.listing_cached(entry, _LISTED_AT_ONCE)
        except Exception:  # asked again, the slow way, which reports it
            return None
        # a file listed lies in its own node's directory (or a chunk directory below it)
        if listed is None:
            return None
        listed = self._names.without_removed(path, listed)
        return [(n, self._timed(join_path(path, n), entry, a)) for n, a in listed] + self._names.listed(path)

    def _entries(self, path: str, entry: Entry) -> Iterator[tuple[str, Attributes]]:
        for name, child in self.tree.list_dir(entry):
            if self._names.removed.hides(join_path(path, name)):
                continue
            try:
                yield name, self._timed(join_path(path, name), child, self.tree.attributes(child))
            except Exception as exc:  # an unreadable file still lists nothing else wrong
                log_failure("readdir", "/" + join_path(path, name), exc)
        yield from self._names.listed(path)

    def open(self, path: str, flags: int) -> OpenFile:
        with self._lock:
            spool = self._spools.get(path)
        if spool is not None:
            from .npy import NpyFile

            return NpyFile(spool, lambda: self._npy_created(spool), self._spool_closed)
        scratch = self._names.open(path, flags)
        if scratch is not None:
            return scratch
        entry = self._existing(path)
        if entry.is_dir:
            raise FsError(errno.EISDIR, "is a directory")
        if entry.kind == KEY:
            return self.keys.open(entry, flags)
        if self.hierarchy.needs_verifying(entry.node) and not self.hierarchy.verify_node(entry.node):
            log.warning(
                "open /%s: the consolidated metadata is stale for /%s (changed or erased by "
                "another writer); its own documents are used",
                path,
                entry.node,
            )
            self.tree.forget(entry.node)
            entry = self._existing(path)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            if self._names.is_alias(path, entry):
                raise FileExistsError(f"/{entry.node} already exists (its .npy is read as {entry.name})")
            file = self._writer(entry)
            self._opened(path, file)
            if flags & os.O_TRUNC:
                file.truncate(0)
            return file
        return self._view_file(path, entry, self.tree.view(entry))

    def _view_file(self, path: str, entry: Entry, view: FileView) -> ViewFile:
        # chunk files and documents are replaced whole: each open sees one version of them
        if entry.kind == CHUNK:
            walk = self._walk(cast("ChunkView", view).array)  # a chunk file's view (Tree._make_view)
            walk.opened(entry.coords)
            return ChunkViewFile(view.pinned(), walk, entry.coords)
        per_open = entry.kind == FILE and entry.name in METADATA_NAMES
        # (info and data.jsonl: their lengths are not known ahead of the reads; data.jsonl's is 0)
        kind = catalogue.by_name(entry.name) if entry.kind == FILE else None
        direct = per_open or entry.kind == INTERNAL_FILE or (kind is not None and kind.direct)
        if per_open or entry.kind != FILE:
            return ViewFile(view.pinned() if per_open else view, None, direct_io=direct, keep_cache=not direct)
        reading = functools.partial(self._reading, hot=kind is not None and kind.hot)
        if direct:  # never in the kernel's pages
            hot, ahead = reading(view)
            return ViewFile(view, hot, direct_io=True, keep_cache=False, ahead=ahead)
        return SharedViewFile(self.tree, entry, view, reading, keep_cache=self._pages.kept(path, entry.node))

    def _walk(self, array: Array) -> ChunkWalk:
        with self._lock:
            walk = self._walks.get(array)
            if walk is None:
                walk = self._walks[array] = ChunkWalk(array)
            return walk

    def _reading(self, view: FileView, hot: bool) -> tuple[HotWindows | None, DecodeAhead]:
        """What the opens of one file share about how it is read."""
        with self._lock:
            shared = self._read_state.get(view)
            if shared is None:
                shared = self._read_state[view] = (HotWindows(view.size()) if hot else None, DecodeAhead(view))
            return shared

    # ------------------------------------------------------------------ writing
    def _writer(self, entry: Entry) -> OpenFile:
        """What a write to this file goes to."""
        if entry.kind == CHUNK:
            return ChunkFile(lambda: self.pending.of(self.tree.array(entry.node)), entry.coords, self)
        if entry.kind == FILE:
            node = self.tree.node(entry.node)
            if entry.name in node.documents:
                return DocumentFile(
                    self.hierarchy,
                    self.pending.of,
                    entry.node,
                    entry.name,
                    node.documents[entry.name],
                    self,
                    self._documents,
                )
            if entry.name == "data":
                return DataFile(
                    functools.partial(self._data_target, entry),
                    functools.partial(self.tree.cached, self._data_target, entry),
                    self._wrote,
                    self,
                )
        _refuse_in_v2(entry)
        raise FsError(errno.EACCES, "this file is a read-only view")

    def _data_target(self, entry: Entry) -> tuple[PendingWrites, DataView]:
        """What a write to the array's `data` goes to now: its pending chunks and its view,
        under its current metadata."""
        array = self.tree.array(entry.node)
        return self.pending.of(array), cast("DataView", self.tree.view(entry))  # an array's `data` (Tree._make_view)

    def _opened(self, path: str, file: OpenFile) -> None:
        with self._lock:
            self._writers[id(file)] = (path, file)

    opened_for_writing = _opened

    # WriteHooks
    def stored(self, node_path: str, node_changed: bool = True) -> None:
        self._names.removed.show_chunks(node_path)
        self._touched(node_path)
        if node_changed:
            self.tree.forget(node_path)
        self.changed(node_path)

    def changing(self, node_path: str) -> None:
        if self._consolidation is not None:
            self._consolidation.before_change(node_path)

    def synced(self) -> None:
        if self._consolidation is not None:
            self._consolidation.sync()

    def unstored(self, file: BufferFile) -> None:
        with self._lock:
            file.unstored_at = self._changes_of(file.node_path)
            self._unstored.append(file)

    def _replaced(self, node_path: str) -> None:
        """The node at `node_path` was found changed in the store by another writer."""
        self._node_times.touch(node_path)
        self.changed(node_path)

    def _touched(self, node_path: str, moved: bool = False) -> None:
        """The node at `node_path` (and what is below it) was written, erased or moved
        through the mount (`moved`: there, and every node below it has a new name)."""
        with self._lock:
            # counted only where a store that failed waits for unmount (_changes_of): the
            # table grows with the nodes that matter to one, not with every node written
            if any(node_path == f.node_path or node_path in ancestors(f.node_path) for f in self._unstored):
                self._changes[node_path] = self._changes.get(node_path, 0) + 1
        self._pages.written(node_path)
        self._node_times.touch(node_path, below=moved)

    def _changes_of(self, node_path: str) -> tuple[int, int]:
        """What has changed the node at `node_path` so far: changes through the mount to
        it or to a node above it, and its array's writes to `data`, buffered or stored
        (write-behind too)."""
        path, changes = node_path, 0
        while True:
            changes += self._changes.get(path, 0)
            if not path:
                break
            path = path.rpartition("/")[0]
        return changes, sum(p.version + p.stores for p in self.pending.under(node_path))

    def closed(self, file: OpenFile) -> None:
        with self._lock:
            self._writers.pop(id(file), None)

    def _wrote(self, pending: PendingWrites, may_block: bool) -> bool:
        """Around a write to `data` (write_behind.py: False means the write must go to a
        thread, past the dirty limit)."""
        self._pages.written(pending.array.path)
        self._names.removed.show_chunks(pending.array.path)
        return self._behind.wrote(pending, may_block)

    def truncate(self, path: str, size: int) -> None:
        """truncate(2) by path: a transaction of its own, judged at once."""
        with self._lock:
            spool = self._spools.get(path)
        if spool is not None:
            spool.spool.truncate(size)
            return
        if self._names.truncate(path, size):
            return
        entry = self._existing(path)
        if entry.is_dir:
            raise FsError(errno.EISDIR, "is a directory")
        if entry.kind == KEY:
            self.keys.truncate(entry, size)
            return
        file = self._writer(entry)
        file.truncate(size)
        if isinstance(file, BufferFile):
            file.commit()

    def set_attributes(self, path: str, meta: FileMeta) -> Attributes:
        """Held by the mount, never stored (modes.py; docs/times-and-modes.md)."""
        scratch = self._names.set_attributes(path, meta)
        if scratch is not None:
            return scratch
        with self._lock:
            spooled = path in self._spools
        if spooled:  # (held for the array its close makes: _npy_created)
            self._names.modes.set(path, meta, None)
        else:
            entry = self._existing(path)
            is_dir = self.tree.attributes(entry).is_dir
            self._names.modes.set(path, meta, self._change_time(path, entry, is_dir))
        attr = self.lookup(path)
        if attr is None:
            raise FsError(errno.ENOENT, "no such file or directory")
        return attr

    def create(self, path: str) -> tuple[OpenFile, Attributes]:
        from .npy import NpyFile, NpySpool

        parent, _, name = path.rpartition("/")
        entry = self._existing(parent)
        _refuse_in_v2(entry)
        chunk = self._names.removed.made_again(path, self.tree.resolve)
        if chunk is not None:
            self._names.removed.show(path)
            return self.open(path, os.O_WRONLY | os.O_TRUNC), Attributes(False)
        if entry.kind == GROUP and name.endswith(".npy") and len(name) > 4:
            validate_node_name(name[:-4])
            array_path = join_path(entry.node, name[:-4])
            if array_path == INTERNAL or self.hierarchy.exists(array_path):  # (/.zarrfs would hide it)
                raise FileExistsError(f"/{array_path} already exists")
            if self._names.scratch.get(array_path) is not None:  # (it would hide the array)
                raise FileExistsError(f"/{array_path} is a scratch file")
            group = self.tree.node(entry.node)
            spool = NpySpool(
                self.hierarchy,
                array_path,
                self._spool_dir,
                changing=self.changing,
                zarr_format=group.metadata.zarr_format,
            )
            with self._lock:
                self._spools[path] = spool
            return NpyFile(spool, lambda: self._npy_created(spool), self._spool_closed), Attributes(False)
        if self.keys.creates(entry, name):
            return self.keys.create(entry, name)
        if entry.kind in (GROUP, ARRAY) and name in METADATA_NAMES:
            file = DocumentFile(self.hierarchy, self.pending.of, entry.node, name, b"", self, self._documents)
            self._opened(path, file)
            # written again (tar, vim): the node is not on its way out, and its names are back
            self._names.removed.show_in(entry.node)
            with self._lock:
                self._emptied.pop(entry.node, None)
            return file, Attributes(False)
        return self._names.create(path, entry), Attributes(False)

    def _npy_created(self, spool: NpySpool) -> None:
        self.tree.forget(spool.array_path)
        self._node_times.touch(spool.array_path)
        with self._lock:
            paths = [p for p, s in self._spools.items() if s is spool]
        for path in paths:  # what `cp -p` set on it before the close holds for the array made
            self._names.modes.restamp(path, self._node_times.get(spool.array_path))
        self._dir_times.touch(parent_of(spool.array_path))
        self.changed(spool.array_path, names=True)

    def _spool_closed(self, spool: NpySpool) -> None:
        with self._lock:
            spool.opens -= 1
            if spool.opens > 0:
                return
            for path in [p for p, s in self._spools.items() if s is spool]:
                del self._spools[path]
        spool.spool.close()
        if spool.dirty and spool.refusal is not None:  # refused at every close: nothing was created
            log_failure(
                "release",
                "/" + spool.array_path + ".npy",
                FsError(spool.refusal.errno, f"{spool.refusal}; dropped at the last close, nothing created"),
            )

    # -------------------------------------------------------------------- nodes
    def mkdir(self, path: str) -> Attributes:
        entry = self._existing(path.rpartition("/")[0])
        _refuse_in_v2(entry)
        if entry.kind != GROUP:
            raise FsError(errno.EPERM, "directories can be made only in groups")
        self.changing(path)
        with self._documents.held((entry.node, path)):  # the group never becomes an array meanwhile
            group = self.tree.node(entry.node)
            self.hierarchy.create_group(path, zarr_format=group.metadata.zarr_format)
            self.tree.forget(path)
        self._dir_times.touch(parent_of(path), path)
        self._node_times.touch(path)
        return self._timed(path, Entry(GROUP, path), directory(links(0)))

    def unlink(self, path: str) -> None:
        """An unlink that answers 0 takes its name away (removed.py): one that left it would
        have tar, cpio and unzip remove and make it again forever."""
        with self._lock:
            spool = self._spools.pop(path, None)
            # a group's dataset.nc, image.ome.tif or preview.png, listed to `rm -r` and gone
            # with the group's last array before rm came to it: removed, as rm meant (its
            # group is being emptied: its zarr.json was unlinked first)
            gone_view = path.rpartition("/")[2] in catalogue.GROUP_FILE_NAMES and parent_of(path) in self._emptied
        if spool is not None:  # the name goes; its opens still make the array at their close
            return
        if self._names.unlink(path):
            return
        entry = self._resolve(path) if gone_view else self._existing(path)
        if entry is None:
            return
        _refuse_in_v2(entry)
        if entry.kind == KEY:
            self.keys.unlink(entry)
        elif entry.kind == CHUNK:  # read as the fill value from now on: what removing a chunk means
            with self._lock:
                again = self._names.removed.erased_since(path, self._changes_of(entry.node))
                again = again and entry.node not in self._emptied
            if again:  # the name goes too, until the file is made again (tar) or its array written
                self._names.removed.hide(path)
                return
            self.pending.of(self.tree.array(entry.node)).replace_chunk(entry.coords, None)
            self._touched(entry.node)
            self.changed(entry.node)
            with self._lock:
                self._names.removed.erased(path, self._changes_of(entry.node))
        elif entry.is_dir:
            raise FsError(errno.EISDIR, "is a directory")
        elif entry.kind == FILE and entry.name in METADATA_NAMES and not self._names.is_alias(path, entry):
            with self._lock:  # the array is erased by the rmdir that follows (`rm -r`)
                self._emptied[entry.node] = None
                while len(self._emptied) > EMPTIED_KEPT:
                    self._emptied.popitem(last=False)
            self._names.removed.hide(path)
        else:
            with self._lock:
                emptied = entry.kind == FILE and entry.node in self._emptied and not self._names.is_alias(path, entry)
            if not emptied:
                raise FsError(
                    errno.EPERM,
                    "a view of its node: it goes with the node (rm -r), or once the node's metadata document is removed",
                )
            self._names.removed.hide(path)  # `rm -r` on its way to the rmdir that erases the node

    def rmdir(self, path: str) -> None:
        entry = self._existing(path)
        _refuse_in_v2(entry)
        if entry.kind in (CHUNK_DIR, KEY_DIR):
            return  # chunk and key directories come from the grid: nothing to erase
        if entry.kind not in (GROUP, ARRAY, BROKEN):
            if entry.is_dir:  # /.zarrfs
                raise FsError(errno.EPERM, "only groups and arrays can be removed")
            raise FsError(errno.ENOTDIR, "not a directory")
        self.changing(entry.node)
        with self._documents.held(subtrees=(entry.node,)):
            if entry.kind == GROUP and self.hierarchy.children(entry.node):
                raise FsError(errno.ENOTEMPTY, "the group has children")
            scratch = self._names.scratch.any_below(entry.node)
            if scratch is not None:
                raise FsError(errno.ENOTEMPTY, f"/{scratch} is a scratch file in it")
            self._check_not_open_for_writing(entry.node)
            with self._lock:
                emptied = entry.node in self._emptied
                self._emptied.pop(entry.node, None)
            if entry.kind == ARRAY and not emptied:
                raise FsError(errno.ENOTEMPTY, "an array is removed with its files (rm -r), not by rmdir alone")
            for pending in self.pending.under(entry.node):  # waits for background stores
                pending.discard_all()
            self._touched(entry.node)
            self.hierarchy.erase_node(entry.node)
            self.pending.forget(entry.node)
            self.tree.forget(entry.node, erased=True)
            self._names.removed.forget(entry.node)
            self._names.modes.forget(entry.node)
            self._names.modes.forget(entry.node + ".npy")  # (its NAME.npy answered for it)
        self._dir_times.forget(path)
        self._dir_times.touch(parent_of(path))

    def rename(self, src: str, dst: str, replace: bool = True) -> None:
        if self._names.rename(src, dst, replace):
            return
        entry = self._existing(src)
        if entry.kind == KEY:
            self.keys.rename(entry, self._existing(dst.rpartition("/")[0]), dst.rpartition("/")[2], replace)
            return
        target_parent = self._existing(dst.rpartition("/")[0])
        _refuse_in_v2(entry)
        _refuse_in_v2(target_parent)
        if entry.kind not in (GROUP, ARRAY, BROKEN) or target_parent.kind != GROUP:
            raise FsError(errno.EPERM, "only arrays and groups can be moved, and only into groups")
        if not replace and self._resolve(dst) is not None:
            raise FsError(errno.EEXIST, "the destination exists")
        if dst == src or dst.startswith(src + "/"):  # (refused before what it replaces is erased)
            raise FsError(errno.EINVAL, "a node cannot move into itself")
        self.changing(entry.node)
        self.changing(dst)
        with self._documents.held(subtrees=(entry.node, dst)):
            self._check_not_open_for_writing(src)
            for pending in self.pending.under(src):  # stored under the old name before the node moves
                pending.flush()
            replaced = self._replaced_by_move(dst)
            self._touched(src)
            self._touched(dst, moved=True)
            if replaced:  # an empty group, as rename(2) replaces an empty directory
                self.hierarchy.erase_node(dst)
            self.hierarchy.move_node(src, dst)
            self.pending.forget(src)
            self.tree.forget(src)
            self.tree.forget(dst)
            self._names.removed.forget(src)
            self._names.removed.forget(dst)
            with self._lock:  # a document removed is the moved node's, not the next one's there
                for path in [p for p in self._emptied if p in (src, dst) or p.startswith((src + "/", dst + "/"))]:
                    del self._emptied[path]
            self._names.scratch.moved(src, dst)
            for suffix in ("", ".npy"):  # the node, and the NAME.npy that answers for an array
                self._names.modes.forget(dst + suffix)  # what was set on a group it replaced goes with it
                self._names.modes.moved(src + suffix, dst + suffix)
        self._dir_times.forget(src)
        self._dir_times.touch(parent_of(src), parent_of(dst), dst)

    def _replaced_by_move(self, dst: str) -> bool:
        """(Documents held.) Whether a node moved to `dst` replaces what is there: nothing
        is (False), an empty group is (True); anything else stays, and the move fails."""
        target = self._resolve(dst)
        if target is None:
            return False
        if target.kind == GROUP and target.node == dst:
            if self.hierarchy.children(dst):
                raise FsError(errno.ENOTEMPTY, "the destination group has children")
            scratch = self._names.scratch.any_below(dst)
            if scratch is not None:  # (as rmdir: a group holding a scratch file is not empty)
                raise FsError(errno.ENOTEMPTY, f"/{scratch} is a scratch file in it")
            self._check_not_open_for_writing(dst)
            return True
        if target.kind in (ARRAY, BROKEN):
            raise FsError(errno.ENOTEMPTY, "the destination is an array: it is removed with its files (rm -r)")
        if target.is_dir:
            raise FsError(errno.EPERM, "only groups can be replaced by a move")
        raise FsError(errno.ENOTDIR, "the destination is not a directory")

    def _check_not_open_for_writing(self, node_path: str) -> None:
        """A node cannot be erased or moved while a file in it is open for writing: the
        writes would land under a name that no longer holds the node."""
        prefix = node_path + "/"
        with self._lock:
            busy = [p for p, _ in self._writers.values() if p.startswith(prefix)]
        if busy:
            raise FsError(errno.EBUSY, f"/{busy[0]} is open for writing")

    # ------------------------------------------------------------------- xattrs
    def xattrs(self, path: str) -> dict[str, bytes]:
        return xattrs.listed(self._attributes_of(path))

    def set_xattr(self, path: str, name: str, value: bytes) -> None:
        key, parsed = xattrs.key_of(name), xattrs.parsed(value)
        self._update_attributes(path, lambda attributes: attributes.__setitem__(key, parsed))

    def remove_xattr(self, path: str, name: str) -> None:
        key = xattrs.key_of(name)
        self._update_attributes(path, lambda attributes: xattrs.remove(attributes, key))

    def _attributes_of(self, path: str) -> dict[Any, Any]:
        node = self._attributed(path)
        return {} if node is None else xattrs.attributes_of(self.tree.node(node))

    def _update_attributes(self, path: str, change: Callable[[dict[Any, Any]], None]) -> None:
        node = self._attributed(path)
        if node is None:
            raise FsError(errno.ENOTSUP, "attributes belong to arrays and groups")
        self.changing(node)
        with self._documents.held((node,)):
            xattrs.rewrite(self.hierarchy, node, change)
        self.stored(node)

    def _attributed(self, path: str) -> str | None:
        """The path of the group or array at `path` (whose attributes its extended
        attributes are); None for anything else."""
        entry = None if self._names.scratch.get(path) is not None else self._existing(path)
        return None if entry is None or entry.kind not in (GROUP, ARRAY) else entry.node

    # ---------------------------------------------------------------- the mount
    def warm_up(self) -> None:
        """numpy (the first array opened needs it) and numcodecs (the first chunk decoded
        or encoded): 0.1-0.2 s of imports that the first `dd`, `cp` or `find` would
        otherwise wait for. These libraries only, never zarrfs's own modules, which a
        request's thread may be importing meanwhile: libraries that never import zarrfs
        cannot wait on it (no import deadlock)."""
        try:
            import numcodecs  # noqa: F401  (numpy with it)
        except Exception as exc:  # the first request that needs it says what is wrong
            log.debug("warming up: %s", exc)

    def stats(self) -> dict[Any, Any]:
        context = self.hierarchy.context
        stats = {"bytes_fetched": 0, "bytes_stored": 0, "cache_hits": 0, "cache_misses": 0}
        stats.update(context.stats.snapshot())
        stats.update(getattr(self.hierarchy.store, "request_stats", dict)())
        stats.update(self.session_stats())
        if context.cache is not None:
            stats["cache_bytes"] = context.cache.nbytes
            stats["cache_evictions"] = context.cache.evictions
        with self._lock:  # what is kept per node written (bounded: GENERATIONS_KEPT, PAGES_TABLES_KEPT)
            kept = sum(self._pages.tracked()) + len(self._changes)
        stats["nodes_tracked"] = kept + sum(context.cache.table_sizes() if context.cache is not None else ())
        stats["dirty_bytes"] = sum(p.nbytes for p in self.pending.dirty())
        if self.hierarchy.upkeep is not None:
            stats["consolidated_writes"] = self.hierarchy.upkeep.writes
            stats["consolidated_retries"] = self.hierarchy.upkeep.retries
        stats["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return stats

    def shutdown(self) -> None:
        """Store every buffered write: what open files hold, what failed to store at a
        last close, the pending chunks of `data`."""
        self._behind.shutdown()
        self._names.left_at_unmount()
        with self._lock:
            # a content that failed to store at its last close (the close said so) is stored
            # now only where nothing has changed its node since: never over a later write
            superseded = [f for f in self._unstored if self._changes_of(f.node_path) != f.unstored_at]
            files = [f for _, f in self._writers.values() if isinstance(f, BufferFile)]
            files += [f for f in self._unstored if f not in superseded]
        for file in superseded:
            log_failure(
                "flush at unmount",
                "/" + file.node_path,
                FsError(
                    errno.EIO,
                    "a content that failed to store at its close was not stored again: "
                    "its node was written, erased or moved since",
                ),
            )
        dirty = self.pending.dirty()
        left = sum(p.nbytes for p in dirty) + sum(f.size() for f in files if f.dirty)
        self.storing(left)
        for file in files:
            try:
                file.commit()
            except Exception as exc:  # e.g. a chunk file left short: not stored
                log_failure("flush at unmount", "/" + file.node_path, exc)
        for pending in dirty:
            left -= pending.nbytes
            try:
                pending.flush()
            except Exception as exc:
                log_failure("flush at unmount", "/" + pending.array.path + "/data", exc)
            self.storing(max(0, left))
        self.keys.shutdown()
        if self._consolidation is not None:
            self._consolidation.close()

    def store_buffered(self) -> None:
        """Store the writes to `data` that were acknowledged and are still buffered, as
        before a commit (files still open for writing are not acknowledged yet)."""
        for pending in self.pending.dirty():
            pending.flush()
        self.synced()

    def close(self) -> None:
        self._behind.shutdown()
        self.keys.close()
        if self._consolidation is not None:
            self._consolidation.close()


def _refuse_in_v2(entry: Entry) -> None:
    """The v2 view (/.zarrfs/v2/) shows the hierarchy; nothing there is written."""
    if entry.kind in (V2_DIR, V2_FILE, V2_CHUNK):
        raise FsError(errno.EROFS, "the v2 view (/.zarrfs/v2) is read-only")
