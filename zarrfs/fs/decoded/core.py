"""The decoded tree as a filesystem core (docs/semantics.md): paths resolve through the
Tree to views, read by view_files.py; opens for writing become files.py's files, a `.npy`
a spool (npy_spools.py); node_names.py makes, erases and moves nodes; xattrs.py keeps
attributes. The core routes each request and keeps what they share."""

from __future__ import annotations

import errno
import functools
import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from ...defaults import METADATA_TTL
from ...format import AnyHierarchy
from ...format.consolidation import ConsolidatedUpkeep
from ...format.metadata import METADATA_NAMES
from ...store import FileMeta
from ...store.keys import join_path
from ..core import Attributes, FilesystemCore, NotAtHand, OpenFile
from ..directories import DirectoryTimes
from ..errors import FsError, errno_for, log_failure
from ..hooks import NO_HOOKS, CoreHooks
from . import xattrs
from .changes import MountChanges
from .consolidation import ConsolidationWriter
from .documents import DocumentLocks
from .entries import ARRAY, BROKEN, CHUNK, FILE, GROUP, INTERNAL_DIR, INTERNAL_FILE, KEY, KEY_DIR, Entry
from .files import BufferFile, ChunkFile, DataFile, DocumentFile
from .lifecycle import core_stats, store_left, warm_up
from .names import EverydayNames
from .node_names import NodeNames
from .npy_spools import NpySpools
from .pages import PageDrops
from .registry import PendingRegistry
from .store_keys import StoreKeys
from .times import NodeTimes
from .tree import Tree
from .tree_views import refuse_in_tree_view
from .view_files import ReadFiles
from .write_behind import WriteBehind

if TYPE_CHECKING:
    from ...format.pending import PendingWrites
    from ...views.data import DataView

log = logging.getLogger(__name__)
_LISTED_AT_ONCE = 1024  # larger chunk directories are listed lazily, by a worker


class DecodedCore(FilesystemCore):
    """Thread-safe: the Tree's caches are under its lock, each array's pending writes
    under theirs; each table under its own lock (opens for writing and writes kept for
    unmount: changes.py; `.npy` spools: npy_spools.py; how files are read:
    view_files.py; write-behind: write_behind.py; the writes counted for the kernel's
    pages: pages.py); each read-modify-write or store of a metadata document under its
    node's lock of `_documents` (an erasure or move: its subtree's)."""

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
        metadata_limit: int = 128 << 20,
        hooks: CoreHooks = NO_HOOKS,
    ) -> None:
        super().__init__(hooks)
        self.hierarchy = hierarchy
        self.read_only = read_only
        self.pending = PendingRegistry(may_wait=lambda: not self.tree.answering_from_cache())
        self._node_times = NodeTimes()  # of files: when the mount last changed their node, or saw it changed
        self.tree = Tree(hierarchy, metadata_ttl, self.stats, self.pending, self._replaced, metadata_limit)
        # the store's keys at their paths in array directories, as stored (store_keys.py)
        self.keys: StoreKeys = StoreKeys(self, spool_dir)
        self.tree.keys = self.keys
        # no attribute change (setxattr) reads a document that another store is replacing,
        # or that an erasure or move takes away: it would store the old one back (a resize
        # undone, its chunks outside erased; a removed node brought back without its chunks)
        self._documents = DocumentLocks()
        # opens for writing, stores failed at a close, arrays being emptied (changes.py)
        self.changes = MountChanges(self.pending)
        self._pages = PageDrops()  # which opens of shared views have the kernel drop its pages
        self._dir_times = DirectoryTimes()
        # scratch files, names removed while their node stays, `NAME.npy`s, modes, times (names.py)
        self._names = EverydayNames(self, scratch_limit, spool_dir)
        self._spools = NpySpools(self, spool_dir)  # `.npy` files being copied in
        self._nodes = NodeNames(self)  # mkdir, unlink, rmdir, rename
        # per file view, how it is read; per array, the walk through its chunk files
        self._readers = ReadFiles(self.tree, self._pages.kept)
        self._behind = WriteBehind(self.pending, dirty_limit)
        self._xattrs = xattrs.NodeXattrs(
            hierarchy, self.tree, self._documents, self._attributed, self.changing, self.stored
        )
        self._consolidation: ConsolidationWriter | None = None
        if not read_only:
            hierarchy.upkeep = ConsolidatedUpkeep(hierarchy.store)
            self._consolidation = ConsolidationWriter(hierarchy.upkeep, self._documents)

    # ------------------------------------------------------------------ reading
    def lookup(self, path: str, *, wait: bool = True) -> Attributes | None:
        if not wait:
            return self._lookup_at_hand(path)
        spooled = self._spools.attributes(path)
        if spooled is not None:
            return spooled
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

    def _lookup_at_hand(self, path: str) -> Attributes | None:
        if path in self._spools or self._names.scratch.get(path) is not None:
            raise NotAtHand
        if self._names.removed.hides(path):
            return None
        try:
            entry = self.tree.resolve_cached(path)
        except Exception as exc:  # (`NAME.npy` may answer for array NAME: asked the slow way)
            if errno_for(exc) == errno.ENOENT and not path.endswith(".npy"):
                return None
            raise NotAtHand from None
        if entry is None or (
            entry.kind == GROUP
            and self._lists_at_lookup(path)
            and self.tree.cached(self.tree.children, entry.node) is None
        ):
            raise NotAtHand
        attributes = self.tree.cached(self.tree.attributes, entry, True)
        if attributes is None:
            raise NotAtHand
        return self._timed(path, entry, attributes)

    def _open_at_hand(self, path: str, flags: int) -> OpenFile:
        """`open(wait=False)`: an open for reading (O_RDONLY is 0) of a file whose view is known."""
        if flags & (os.O_ACCMODE | os.O_TRUNC) or path in self._spools or self._names.scratch.get(path) is not None:
            raise NotAtHand
        entry = None if self._names.removed.hides(path) else self.tree.resolve_cached(path)
        if entry is None or entry.is_dir or entry.kind == KEY or self.hierarchy.needs_verifying(entry.node):
            raise NotAtHand
        view = self.tree.view_cached(entry)
        if view is None:
            raise NotAtHand
        return self._readers.opened(path, entry, view)

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

    def list_dir(self, path: str, *, wait: bool = True) -> Iterator[tuple[str, Attributes]]:
        if not wait:
            return self._list_at_hand(path)
        entry = self._existing(path)
        if not entry.is_dir:
            raise FsError(errno.ENOTDIR, "not a directory")
        if entry.kind == KEY_DIR:  # sizes from the store's listing, not one request per key
            return iter([(name, attributes) for name, _, attributes in self.keys.listing(entry)])
        return self._entries(path, entry)

    def _list_at_hand(self, path: str) -> Iterator[tuple[str, Attributes]]:
        try:
            entry = self.tree.resolve_cached(path)
            if entry is None or not entry.is_dir or entry.kind == BROKEN:
                raise NotAtHand
            listed = self.tree.listing_cached(entry, _LISTED_AT_ONCE)
        except Exception:  # asked again, the slow way, which reports it
            raise NotAtHand from None
        # a file listed lies in its own node's directory (or a chunk directory below it)
        if listed is None:
            raise NotAtHand
        listed = self._names.without_removed(path, listed)
        return iter([(n, self._timed(join_path(path, n), entry, a)) for n, a in listed] + self._names.listed(path))

    def _entries(self, path: str, entry: Entry) -> Iterator[tuple[str, Attributes]]:
        for name, child in self.tree.list_dir(entry):
            if self._names.removed.hides(join_path(path, name)):
                continue
            try:
                yield name, self._timed(join_path(path, name), child, self.tree.attributes(child))
            except Exception as exc:  # an unreadable file still lists nothing else wrong
                log_failure("readdir", "/" + join_path(path, name), exc)
        yield from self._names.listed(path)

    def open(self, path: str, flags: int, *, wait: bool = True) -> OpenFile:
        if not wait:
            return self._open_at_hand(path, flags)
        spooled = self._spools.open(path)
        if spooled is not None:
            return spooled
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
                if not flags & os.O_TRUNC:  # (a .npy replaces an array whole, or not at all)
                    raise FileExistsError(f"/{entry.node} already exists (its .npy is read as {entry.name})")
                return self.create(path)[0]
            file = self._writer(entry)
            self.opened_for_writing(path, file)
            if flags & os.O_TRUNC:
                file.truncate(0)
            return file
        return self._readers.opened(path, entry, self.tree.view(entry))

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
                cached = functools.partial(self.tree.cached, self._data_target, entry)
                return DataFile(functools.partial(self._data_target, entry), cached, self._wrote, self)
        refuse_in_tree_view(entry)
        raise FsError(errno.EACCES, "this file is a read-only view")

    def _data_target(self, entry: Entry) -> tuple[PendingWrites, DataView]:
        """What a write to the array's `data` goes to now: its pending chunks and its view,
        under its current metadata."""
        array = self.tree.array(entry.node)
        return self.pending.of(array), cast("DataView", self.tree.view(entry))  # an array's `data` (Tree._make_view)

    def opened_for_writing(self, path: str, file: OpenFile) -> None:
        self.changes.opened(path, file)

    # WriteHooks
    def stored(self, node_path: str, node_changed: bool = True) -> None:
        self._names.removed.show_chunks(node_path)
        self._touched(node_path)
        if node_changed:
            self.tree.forget(node_path, rewritten=True)
        self.changed(node_path)

    def changing(self, node_path: str) -> None:
        if self._consolidation is not None:
            self._consolidation.before_change(node_path)

    def synced(self) -> None:
        if self._consolidation is not None:
            self._consolidation.sync()

    def unstored(self, file: BufferFile) -> None:
        self.changes.unstored(file)

    def _replaced(self, node_path: str) -> None:
        """The node at `node_path` was found changed in the store by another writer."""
        self._node_times.touch(node_path)
        self.changed(node_path)

    def _touched(self, node_path: str, moved: bool = False) -> None:
        """The node at `node_path` (and what is below it) was written, erased or moved
        through the mount (`moved`: there, and every node below it has a new name)."""
        self.changes.touched(node_path)
        self._pages.written(node_path)
        self._node_times.touch(node_path, below=moved)

    def closed(self, file: OpenFile) -> None:
        self.changes.closed(file)

    def _wrote(self, pending: PendingWrites, may_block: bool) -> bool:
        """Around a write to `data` (write_behind.py: False means the write must go to a
        thread, past the dirty limit)."""
        self._pages.written(pending.array.path)
        self._names.removed.show_chunks(pending.array.path)
        return self._behind.wrote(pending, may_block)

    def truncate(self, path: str, size: int) -> None:
        """truncate(2) by path: a transaction of its own, judged at once."""
        if self._spools.truncate(path, size) or self._names.truncate(path, size):
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
        if path in self._spools:  # (held for the array its close makes: npy_spools.py)
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
        parent, _, name = path.rpartition("/")
        entry = self._existing(parent)
        refuse_in_tree_view(entry)
        npy = entry.kind == GROUP and name.endswith(".npy") and len(name) > 4
        chunk = None if npy else self._names.removed.made_again(path, self.tree.resolve)
        if chunk is not None:
            self._names.removed.show(path)
            return self.open(path, os.O_WRONLY | os.O_TRUNC), Attributes(False)
        spooled = self._spools.create(path, entry)
        if spooled is not None:
            return spooled, Attributes(False)
        if self.keys.creates(entry, name):
            return self.keys.create(entry, name)
        if entry.kind in (GROUP, ARRAY) and name in METADATA_NAMES:
            file = DocumentFile(self.hierarchy, self.pending.of, entry.node, name, b"", self, self._documents)
            self.opened_for_writing(path, file)
            # written again (tar, vim): the node is not on its way out, and its names are back
            self._names.removed.show_in(entry.node)
            self.changes.end_emptying(entry.node)
            return file, Attributes(False)
        return self._names.create(path, entry), Attributes(False)

    # -------------------------------------------------------------------- nodes
    def mkdir(self, path: str) -> Attributes:
        return self._nodes.mkdir(path)

    def unlink(self, path: str) -> None:
        if not self._spools.unlink(path):  # (a spool's opens still make the array at their close)
            self._nodes.unlink(path)

    def rmdir(self, path: str) -> None:
        self._nodes.rmdir(path)

    def rename(self, src: str, dst: str, replace: bool = True) -> None:
        self._nodes.rename(src, dst, replace)

    # ------------------------------------------------------------------- xattrs
    def xattrs(self, path: str) -> dict[str, bytes]:
        return self._xattrs.listed(path)

    def set_xattr(self, path: str, name: str, value: bytes) -> None:
        self._xattrs.set(path, name, value)

    def remove_xattr(self, path: str, name: str) -> None:
        self._xattrs.remove(path, name)

    def _attributed(self, path: str) -> str | None:
        """The path of the group or array at `path` (whose attributes its extended
        attributes are); None for anything else."""
        entry = None if self._names.scratch.get(path) is not None else self._existing(path)
        return None if entry is None or entry.kind not in (GROUP, ARRAY) else entry.node

    # ---------------------------------------------------------------- the mount
    warm_up = staticmethod(warm_up)

    def stats(self) -> dict[Any, Any]:
        # what is kept per node written (bounded: GENERATIONS_KEPT, PAGES_TABLES_KEPT)
        tracked = sum(self._pages.tracked()) + self.changes.counted()
        return core_stats(self.hierarchy, self.pending.dirty(), tracked, self.session_stats())

    def shutdown(self) -> None:
        """Store every buffered write: what open files hold, what failed to store at a
        last close, the pending chunks of `data`."""
        self._behind.shutdown()
        self._names.left_at_unmount()
        files, superseded = self.changes.left_at_unmount()
        store_left(files, superseded, self.pending.dirty(), self.storing)
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
