"""The decoded tree (docs/semantics.md): which entry a virtual path names, what a directory lists,
and the view behind each file, over the nodes as cached (nodes.py). What is derived from
the nodes is kept too: the entry each path resolved to (until the first node state it was
derived from expires, or `forget` drops it) and the attributes of files.

Every method here may block on the store."""

from __future__ import annotations

import errno
import json
import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ... import __version__
from ...format import Group, NodeNotFoundError
from ...store import StoreError
from ...store.keys import join_path
from ...views import catalogue
from ...views.base import BytesView, FileView
from ..core import Attributes
from ..directories import links
from ..errors import FsError
from . import key_names, tree_views
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
    TREE_DIR,
    TREE_KINDS,
    Entry,
    KeyFiles,
    NotCached,
    directory,
    split_vpath,
)
from .nodes import VIEW_BYTES, Nodes
from .resolved import ResolvedPaths
from .surroundings import TreeSurroundings

if TYPE_CHECKING:
    from ...format import AnyHierarchy, Array
    from .registry import PendingRegistry

log = logging.getLogger(__name__)


class Tree(Nodes):
    """Paths to entries, directories to listings, entries to views and attributes, over
    the nodes as cached (nodes.py)."""

    def __init__(
        self,
        hierarchy: AnyHierarchy,
        metadata_ttl: float,
        stats_source: Callable[[], dict[str, Any]],
        pending: PendingRegistry,
        replaced: Callable[[str], None] = lambda path: None,
        metadata_limit: int = 128 << 20,
    ) -> None:
        super().__init__(hierarchy, metadata_ttl, pending, replaced, metadata_limit)
        self.stats_source = stats_source  # callable returning the stats dict
        self.keys: KeyFiles | None = None  # the core's: what key paths hold
        self._resolved = ResolvedPaths(metadata_limit)
        self.around = TreeSurroundings(self)  # what the catalogue's kinds consult
        self._making = TreeSurroundings(self, within_ttl=True)  # (a group's dataset.nc: its members fresh)

    def forget(self, path: str, erased: bool = False, rewritten: bool = False) -> None:
        """As Nodes.forget, and the entries of its path and the paths below it."""
        super().forget(path, erased, rewritten)
        self._resolved.drop(path)

    # --------------------------------------------------------------- entries
    def resolve_cached(self, vpath: str) -> Entry | None:
        return self.cached(self.resolve, vpath)

    def view_cached(self, entry: Entry) -> FileView | None:
        return self.cached(self.view, entry)

    def attributes(self, entry: Entry, cached: bool = False) -> Attributes:
        """What the kernel is told of an entry; with `cached`, only from what is known
        (NotCached otherwise: a size that needs a store call)."""
        if entry.kind in TREE_KINDS:
            return tree_views.attributes(self, entry, cached)
        if entry.is_dir:
            return directory(self._links(entry))
        if entry.kind == INTERNAL_FILE:
            return Attributes(False, self._size(self.view(entry), cached), writable=False, derived=True)
        if entry.kind == KEY:
            return self._key_files(entry).attributes(entry)
        state = self.node_state(entry.node)
        if state.error is not None:
            raise state.error
        chunk = entry.coords if entry.kind == CHUNK else None
        key = entry.name if chunk is None else _chunk_files_key(state.node, chunk)
        kind = None if chunk is not None else catalogue.kind_of(state.node, entry.name)
        if kind is not None and kind.renewed:
            self.view(entry)  # (made again once older than the ttl: its size with it)
        known = state.attributes.get(key)
        if known is not None and not (kind is not None and kind.follows_members):
            return known
        # most sizes follow from the metadata: the file's view need not be built for them
        size = catalogue.chunk_size(state.node, chunk) if chunk is not None else catalogue.size(state.node, entry.name)
        if size is None:
            size = self._size(self.view(entry), cached)
        # what a write can go to (core._writer): chunk files, documents and the kinds
        # written to; the other views show no write permission, as a write to them fails EACCES
        document = chunk is None and state.node is not None and entry.name in state.node.documents
        writable = chunk is not None or document or (kind is not None and kind.writable)
        # blocks for the documents and the one whole view of the data; none for the rest
        derived = not document and (kind is None or not kind.whole)
        known = state.attributes[key] = Attributes(False, size, writable=writable, derived=derived)
        return known

    @staticmethod
    def _size(view: FileView, cached: bool) -> int:
        size = view.cached_size() if cached else view.size()
        if size is None:
            raise NotCached("size")
        return size

    def listing_cached(self, entry: Entry, limit: int) -> list[tuple[str, Attributes]] | None:
        """A directory's entries with their attributes, from what is known; None where
        that is not enough, or for a chunk directory of more than `limit` entries."""

        def listed() -> list[tuple[str, Attributes]] | None:
            if entry.kind == CHUNK_DIR and self.array(entry.node).chunk_grid.grid_shape[len(entry.coords)] > limit:
                return None
            if entry.kind == TREE_DIR and tree_views.too_many(self, entry, limit):
                return None
            return [(name, self.attributes(child, cached=True)) for name, child in self.list_dir(entry)]

        return self.cached(listed)

    def resolve(self, vpath: str) -> Entry:
        """The entry a path names ("" is the root, no leading or trailing slash)."""
        if vpath.startswith("/") or vpath.endswith("/") or "//" in vpath:
            entry = self.resolve("")
            for name in split_vpath(vpath):
                entry = self.lookup(entry, name)
            return entry
        return self._resolve(vpath)[1]

    def _resolve(self, vpath: str) -> tuple[float, Entry]:
        """(valid until, entry): kept until the oldest node state it was derived from (its
        own and its parents') expires; its parent's is resolved the same way."""
        if vpath.partition("/")[0] == INTERNAL:  # never waits on the store, nor on the root's metadata
            entry = Entry(INTERNAL_DIR)
            for name in split_vpath(vpath)[1:]:
                entry = self.lookup(entry, name)
            return math.inf, entry
        now = time.monotonic()
        known = self._resolved.get(vpath, now)
        if known is not None:
            return known
        generation = self._resolved.generation
        outer = getattr(self._local, "oldest", None)
        self._local.oldest = now
        try:
            if vpath:
                parent, _, name = vpath.rpartition("/")
                until, entry = self._resolve(parent)
                entry = self.lookup(entry, name)
            else:
                until, entry = math.inf, Entry(GROUP if isinstance(self.node(""), Group) else ARRAY)
            until = min(until, self._local.oldest + self.ttl)
        finally:
            self._local.oldest = outer
        if until > now:
            self._resolved.keep(vpath, (until, entry), generation, now)
        return until, entry

    def lookup(self, parent: Entry, name: str) -> Entry:
        kind = parent.kind
        if kind in TREE_KINDS:
            return tree_views.lookup(self, parent, name)
        if kind == BROKEN:
            raise self.node_state(parent.node).error or FsError(errno.EIO, "unreadable node")
        if name == INTERNAL and parent.node == "" and kind in (GROUP, ARRAY):
            return Entry(INTERNAL_DIR)
        if kind == GROUP:
            group = self.node(parent.node)
            if name in group.documents:
                return Entry(FILE, parent.node, name)
            child = join_path(parent.node, name)
            if name in (".", "..") or "/" in name:
                raise FsError(errno.ENOENT, "no such entry")
            try:
                state = self.node_state(child)
            except NodeNotFoundError:  # a file of the group's own, where it shows one
                kind = catalogue.kind_of(group, name)
                if kind is not None and name in kind.shows(group, parent.node, self.around):
                    return Entry(FILE, parent.node, name)
                raise
            except StoreError:  # one child's failing store read never breaks its parent
                if getattr(self._local, "listing", False):
                    return Entry(BROKEN, child)
                raise
            if state.error is not None:
                return Entry(BROKEN, child)
            return Entry(GROUP if isinstance(state.node, Group) else ARRAY, child)
        if kind == ARRAY:
            array = self.array(parent.node)
            if name == "chunks" and self._has_chunk_files(array):
                return Entry(CHUNK_DIR, parent.node)
            kind = catalogue.kind_of(array, name)
            if name in array.documents or (kind is not None and name in kind.shows(array, parent.node, self.around)):
                return Entry(FILE, parent.node, name)
            return self._key_entry(array, parent, name)
        if kind == KEY_DIR:
            return self._key_entry(self.array(parent.node), parent, name)
        if kind == CHUNK_DIR:
            array = self.array(parent.node)
            grid = array.chunk_grid.grid_shape
            depth = len(parent.coords)
            if not name.isdigit() or (len(name) > 1 and name[0] == "0") or int(name) >= grid[depth]:
                raise NodeNotFoundError(f"no chunk {name!r} in /{parent.node}/chunks (grid {grid})")
            coords = (*parent.coords, int(name))
            return Entry(CHUNK if len(coords) == len(grid) else CHUNK_DIR, parent.node, coords=coords)
        if kind == INTERNAL_DIR:
            if name in ("stats", "version"):
                return Entry(INTERNAL_FILE, name=name)
            if catalogue.tree_kind(name) is not None:
                return tree_views.root(name)
            raise FsError(errno.ENOENT, "no such entry")
        raise FsError(errno.ENOTDIR, "not a directory")

    @staticmethod
    def _key_entry(array: Array, parent: Entry, name: str) -> Entry:
        prefix = parent.name if parent.kind == KEY_DIR else ""
        found = key_names.name_kind(array, prefix, name)
        if found is None:
            raise NodeNotFoundError(f"no {name!r} in array /{parent.node}")
        return Entry(KEY_DIR if found == key_names.KEY_DIR else KEY, parent.node, join_path(prefix, name))

    def _key_files(self, entry: Entry) -> KeyFiles:
        """What key paths hold: a store call, never made in cached-only mode."""
        if self.keys is None or self.answering_from_cache():
            raise NotCached(entry.name)
        return self.keys

    def _links(self, entry: Entry) -> int:
        """A directory's links (fs/directories.py): a group's sub-directories are its child
        nodes, as last listed (2 links until it is; DecodedCore.lookup lists it); an
        array's, `chunks/`; a chunk directory's, its row of the grid, unless it holds the
        chunk files themselves."""
        kind = entry.kind
        if kind == GROUP:
            return links(self.listed_count(entry.node))
        if kind not in (ARRAY, CHUNK_DIR):
            return links(0)
        array = self.node_state(entry.node).node
        if array is None or isinstance(array, Group):  # unreadable, or a group by now
            return links(0)
        if kind == ARRAY:
            return links(1 if self._has_chunk_files(array) else 0)
        grid = array.chunk_grid.grid_shape
        depth = len(entry.coords)
        return links(grid[depth] if depth + 1 < len(grid) else 0)

    @staticmethod
    def _has_chunk_files(array: Array) -> bool:
        return bool(array.shape) and not array.dtype.variable_length

    def list_dir(self, entry: Entry) -> Iterable[tuple[str, Entry]]:
        """The entries of a directory, in a stable order."""
        kind = entry.kind
        if kind in TREE_KINDS:
            return tree_views.list_dir(self, entry)
        if kind == BROKEN:
            raise self.node_state(entry.node).error or FsError(errno.EIO, "unreadable node")
        if kind == INTERNAL_DIR:
            trees = [(kind.name, tree_views.root(kind.name)) for kind in catalogue.TREES]
            return [(n, Entry(INTERNAL_FILE, name=n)) for n in ("stats", "version")] + trees
        if kind == GROUP:
            group = self.node(entry.node)
            out = [(n, Entry(FILE, entry.node, n)) for n in group.documents]
            self._local.listing = True
            try:
                for name in self.children(entry.node):
                    try:
                        out.append((name, self.lookup(entry, name)))
                    except (NodeNotFoundError, FsError) as exc:  # a name no lookup finds is not listed
                        log.debug("listing /%s: %r left out: %s", entry.node, name, exc)
            finally:
                self._local.listing = False
            named = {name for name, _ in out}  # (a child node of a file's name wins)
            return out + [
                (n, Entry(FILE, entry.node, n)) for n in self._group_files(group, entry.node) if n not in named
            ]
        if kind == ARRAY:
            array = self.array(entry.node)
            names = [*array.documents, *catalogue.shown(array, entry.node, self.around)]
            out = [(n, Entry(FILE, entry.node, n)) for n in names]
            if self._has_chunk_files(array):
                out.append(("chunks", Entry(CHUNK_DIR, entry.node)))
            return out  # the store's keys are not listed here (key_names.py)
        if kind == KEY_DIR:
            return [(name, child) for name, child, _ in self._key_files(entry).listing(entry)]
        if kind == CHUNK_DIR:
            array = self.array(entry.node)
            grid = array.chunk_grid.grid_shape
            depth = len(entry.coords)
            child_kind = CHUNK if depth + 1 == len(grid) else CHUNK_DIR
            # lazily: a grid of any size lists in constant memory
            return ((str(i), Entry(child_kind, entry.node, coords=(*entry.coords, i))) for i in range(grid[depth]))
        raise FsError(errno.ENOTDIR, "not a directory")

    # ------------------------------------------------------------------ views
    def view(self, entry: Entry) -> FileView:
        if entry.kind == INTERNAL_FILE:
            return self._internal_view(entry.name)
        if entry.kind in TREE_KINDS:
            return tree_views.view_of(self, entry)
        state = self.node_state(entry.node)
        if state.error is not None:
            raise state.error
        key = (entry.name, entry.coords)
        view: FileView | None
        made, view = state.views.get(key, (0.0, None))
        kind = None if entry.kind == CHUNK else catalogue.kind_of(state.node, entry.name)
        if (
            view is None
            or (kind is not None and kind.renewed and time.monotonic() - made >= self.ttl)
            or (
                kind is not None
                and kind.follows_members
                and getattr(view, "plan", None) is not self.around.netcdf_plan(entry.node)
            )
        ):
            if view is not None:  # its size may differ from the view's it replaces
                state.attributes.pop(entry.name, None)
            made, view = time.monotonic(), self._make_view(state.node, entry, kind)
            if key not in state.views:
                self.grown(entry.node, state, VIEW_BYTES)
            state.views[key] = (made, view)
        return view

    def view_now(self, entry: Entry, known: FileView, cached: bool = False) -> FileView | None:
        """`known` while it is still the entry's view (its node neither dropped nor found
        changed since, whatever the ttl: no store call), else the entry's view from `view`
        (with `cached`, from `view_cached`: None where that needs a store call)."""
        state = self.known_state(entry.node)
        kept: object = None if state is None else state.views.get((entry.name, entry.coords), (0.0, None))[1]
        if kept is known:
            return known
        if cached:
            return self.view_cached(entry)
        return self.view(entry)

    def _make_view(self, node: Array | Group, entry: Entry, kind: catalogue.FileKind | None) -> FileView:
        if entry.kind == CHUNK:
            return catalogue.chunk_view(node, entry.coords, self.pending.of)
        if entry.name in node.documents:
            raw = node.documents[entry.name]
            return BytesView(lambda: raw, cheap=True)
        if kind is None:
            raise FsError(errno.ENOENT, f"no view {entry.name!r}")
        return kind.make(node, entry.name, entry.node, self._making)

    def _group_files(self, group: Group, path: str) -> list[str]:
        """The files of the catalogue's kinds the group shows (those whose store reads fail
        left out: a child the store fails to give never breaks its parent's listing)."""
        names: list[str] = []
        for kind in catalogue.kinds_of(group):
            try:
                names += kind.shows(group, path, self.around)
            except StoreError as exc:
                log.debug("listing /%s: %s left out: %s", path, "/".join(kind.names), exc)
        return names

    def _internal_view(self, name: str) -> FileView:
        if name == "version":
            return BytesView(lambda: f"zarrfs {__version__}\n".encode(), cheap=True)
        return BytesView(
            lambda: (json.dumps(self.stats_source(), indent=2, sort_keys=True) + "\n").encode(), cheap=True
        )


def _chunk_files_key(array: Array, coords: tuple[int, ...]) -> str:
    """The key of a chunk file's attributes in its node's state: one for all chunk files
    of a regular grid, one per chunk shape of a rectilinear grid."""
    grid = array.chunk_grid
    return "chunks/*" if grid.regular else f"chunks/{grid.chunk_shape_of(coords)}"
