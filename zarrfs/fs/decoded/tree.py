"""The decoded tree (docs/semantics.md): which entry a virtual path names, what a directory lists,
and the view behind each file. Nodes are cached for `metadata_ttl` seconds, and so is
what is derived from them: the entry each path resolved to (until the first node state
it was derived from expires, or `forget` drops it) and the attributes of files. Past
the ttl a node or listing is read again, and served as known while that is slow
(refresh.py).

Every method here may block on the store; the caches are guarded by one lock. The views
of arrays (numpy) are imported with the first array opened: the mount is ready before."""

from __future__ import annotations

import errno
import functools
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar, overload

from ... import __version__
from ...format import (
    AnyHierarchy,
    FormatError,
    Group,
    MetadataError,
    NodeNotFoundError,
    UnsupportedError,
    node_replaced,
)
from ...store import StoreError, StoreVanishedError
from ...store.keys import join_path
from ...views.base import BytesView, FileView
from ...views.base import Neighbours as ViewNeighbours
from ..core import Attributes
from ..directories import links
from ..errors import FsError
from . import key_names
from .members import GroupMembers
from .refresh import Refreshes, Stale
from .resolved import ResolvedPaths
from .sizes import chunk_files_key, listed_size

if TYPE_CHECKING:
    from ...format import Array
    from .registry import PendingRegistry

log = logging.getLogger(__name__)
T = TypeVar("T")

GROUP = "group"
ARRAY = "array"
BROKEN = "broken"  # a node whose metadata cannot be opened: a directory that fails with EIO
CHUNK_DIR = "chunkdir"
FILE = "file"
CHUNK = "chunk"
INTERNAL_DIR = "internal"
INTERNAL_FILE = "internalfile"
KEY_DIR = "keydir"  # a directory of the store's keys in an array's (name: its path in it)
KEY = "key"  # one of the store's keys of an array, as stored (key_names.py, store_keys.py)
V2_DIR, V2_FILE, V2_CHUNK = "v2dir", "v2file", "v2chunk"  # /.zarrfs/v2/ (v2tree.py)
_V2_KINDS = {V2_DIR, V2_FILE, V2_CHUNK}

INTERNAL = ".zarrfs"
DATASET_NC = "dataset.nc"  # a group's netCDF view; a child node of that name wins
OME_TIFF = "image.ome.tif"  # an OME-Zarr image group's OME-TIFF; a child node of that name wins
PREVIEW = "preview.png"  # an OME-Zarr image group's picture (and an array's); a child node wins
_DIR_KINDS = {GROUP, ARRAY, BROKEN, CHUNK_DIR, INTERNAL_DIR, KEY_DIR, V2_DIR}


@functools.lru_cache(maxsize=1024)
def directory(nlink: int) -> Attributes:
    """A directory's attributes, one object for all of equal links: the adapter may tell
    equal attributes apart by identity."""
    return Attributes(True, nlink=nlink)


@dataclass(frozen=True)
class Entry:
    kind: str
    node: str = ""  # node path ("" is the root)
    name: str = ""  # file name within the node directory
    coords: tuple[int, ...] = ()  # chunk coordinates (a prefix, for chunk directories)

    @property
    def is_dir(self) -> bool:
        return self.kind in _DIR_KINDS


@dataclass
class NodeState:
    """A node as opened, the time it was opened, and the views built on it."""

    node: Array | Group | None
    error: FormatError | None
    loaded: float
    views: dict = field(default_factory=dict)
    attributes: dict = field(default_factory=dict)  # of its files whose size the node fixes


class NotCached(Exception):
    """Answering would need the store (asked in cached-only mode)."""


class KeyFiles(Protocol):
    """What the store holds at the key paths of arrays (store_keys.py)."""

    def attributes(self, entry: Entry) -> Attributes: ...

    def listing(self, entry: Entry) -> list[tuple[str, Entry, Attributes]]: ...


def split_vpath(vpath: str) -> list[str]:
    return [p for p in vpath.split("/") if p]


class Tree:
    def __init__(
        self,
        hierarchy: AnyHierarchy,
        metadata_ttl: float,
        stats_source,
        pending: PendingRegistry,
        replaced: Callable[[str], None] = lambda path: None,
    ) -> None:
        self.hierarchy = hierarchy
        self.ttl = metadata_ttl
        self.stats_source = stats_source  # callable returning the stats dict
        self.pending = pending
        self.replaced = replaced  # told of a node found changed in the store (not by this mount)
        self.keys: KeyFiles | None = None  # the core's: what key paths hold
        self._local = threading.local()  # cached_only: answer from what is known, or NotCached
        self._nodes: dict[str, NodeState] = {}
        self._children: dict[str, tuple[float, list[str]]] = {}
        self._resolved = ResolvedPaths()
        self.members = GroupMembers(metadata_ttl)  # what groups' views derive from their members
        self._refreshes = Refreshes()  # of what is known, once older than the ttl
        self._lock = threading.Lock()
        # advanced whenever a node's state is dropped or found changed: a view made before
        # may no longer be its entry's (a reader compares it before each read: no lookup)
        self.generation = 0

    # ------------------------------------------------------------------ nodes
    def node_state(self, path: str) -> NodeState:
        now = time.monotonic()
        with self._lock:
            state = self._nodes.get(path)
        if state is not None and now - state.loaded < self.ttl:
            return self._consulted(state)
        if state is None:
            if getattr(self._local, "cached_only", False):
                raise NotCached(path)
            return self._consulted(self._load(path, None))
        # known, and older than the ttl: read again, but not waited for past a moment
        if getattr(self._local, "cached_only", False) and not self._refreshes.overdue():
            raise NotCached(path)  # a worker waits that moment, for the answer it may bring
        try:
            fresh = self._refreshes.run(("node", path), lambda: self._load(path, state))
        except Stale:
            return self._consulted(state)
        return self._consulted(fresh) if fresh is not None else self.node_state(path)

    @overload
    def _load(self, path: str, known: None) -> NodeState: ...
    @overload
    def _load(self, path: str, known: NodeState) -> NodeState | None: ...
    def _load(self, path: str, known: NodeState | None) -> NodeState | None:
        """The node read from the store, kept as its state. A refresh (`known`: the state
        it refreshes) replaces only that state, not one dropped or replaced meanwhile (a
        change through the mount: forget); then it returns None. A refresh that fails on
        the store serves `known`, logged once."""
        now = time.monotonic()
        try:
            node, error = self.hierarchy.open_node(path), None
        except (MetadataError, UnsupportedError) as exc:
            node, error = None, exc
        except StoreError as exc:
            if known is None or isinstance(exc, StoreVanishedError):
                raise
            # the store failed: what was known is served, and asked for again next time
            log.warning("refresh /%s: %s; serving the metadata read before", path, exc)
            return known
        if known is not None and known.node is not None and node is not None and _same_node(known.node, node):
            known.loaded = now  # unchanged: keep the views and their caches
            return known
        if node is not None and not isinstance(node, Group):
            _array_views()
        state = NodeState(node, error, now)
        with self._lock:
            current = self._nodes.get(path)
            if known is not None and current is not known:
                return None
            self._nodes[path] = state
            if current is not None:
                self.generation += 1
        if current is not None:
            self.members.changed(path)
        if current is not None and current.node is not None:
            # changed in the store by others: nothing decoded under the metadata read before
            # may be served under this one (a dtype or chunk shape is not the same bytes); the
            # arrays below a group that stays a group are checked as each is refreshed
            forgotten = node_replaced(self.hierarchy.context, path, current.node, node)
            if forgotten and node is not None and not isinstance(node, Group):
                node.renew()  # (opened before that invalidation, it is the node now)
            self.replaced(path)
        return state

    def _consulted(self, state: NodeState) -> NodeState:
        """While a path is resolved: the entry found is valid no longer than this state."""
        oldest = getattr(self._local, "oldest", None)
        if oldest is not None and state.loaded < oldest:
            self._local.oldest = state.loaded
        return state

    def forget(self, path: str, erased: bool = False) -> None:
        """Drop cached knowledge of a node, its descendants and its parent's listing, and
        the entries of its path and the paths below it. `erased`: the node was erased
        through the mount; its parent's listing then loses its name, not read again (N
        store reads for a group of N)."""
        with self._lock:
            state = self._nodes.get(path) if erased else None
            if state is not None and state.node is not None and not isinstance(state.node, Group):
                del self._nodes[path]  # an erased array: no node below it (a pass over N for one)
            else:
                for p in [p for p in self._nodes if p == path or p.startswith(path + "/") or not path]:
                    del self._nodes[p]
            self.generation += 1
            parent, _, name = path.rpartition("/")
            listed = self._children.pop(parent, None)
            self._children.pop(path, None)
            if erased and path and listed is not None:
                now_names = list(listed[1])  # (a copy, not a pass in Python: N may be 20,000)
                if name in now_names:
                    now_names.remove(name)
                self._children[parent] = (listed[0], now_names)
        if erased and path and listed is not None:
            self.members.removed(path, listed[1], now_names)
        else:
            self.members.forget(path)
        self._resolved.drop(path)
        self.hierarchy.forget_consolidated()

    def node(self, path: str) -> Array | Group:
        state = self.node_state(path)
        if state.error is not None:
            raise state.error
        return state.node

    def array(self, path: str) -> Array:
        """The node of an array's entry; NodeNotFoundError where it has become a group
        since the entry was found (changed in the store)."""
        node = self.node(path)
        if isinstance(node, Group):
            raise NodeNotFoundError(f"/{path} is now a group")
        return node

    def children(self, path: str) -> list[str]:
        now = time.monotonic()
        with self._lock:
            cached = self._children.get(path)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        if cached is None:
            if getattr(self._local, "cached_only", False):
                raise NotCached(path)
            return self._list(path, None)
        # as node_state: read again, served as known where that is slow
        if getattr(self._local, "cached_only", False) and not self._refreshes.overdue():
            raise NotCached(path)
        try:
            names = self._refreshes.run(("children", path), lambda: self._list(path, cached))
        except Stale:
            return cached[1]
        return names if names is not None else self.children(path)

    @overload
    def _list(self, path: str, known: None) -> list[str]: ...
    @overload
    def _list(self, path: str, known: tuple[float, list[str]]) -> list[str] | None: ...
    def _list(self, path: str, known: tuple[float, list[str]] | None) -> list[str] | None:
        """The group's children listed in the store, kept; as _load for a refresh."""
        now = time.monotonic()
        try:
            # read again past the ttl: the names known as nodes are not read again (each is,
            # when asked for, as its own state is refreshed)
            names = self.hierarchy.children(path, known[1] if known is not None else ())
        except StoreError as exc:
            if known is None or isinstance(exc, StoreVanishedError):
                raise
            log.warning("refresh of the listing of /%s: %s; serving the metadata read before", path, exc)
            return known[1]
        with self._lock:
            if known is not None and self._children.get(path) is not known:
                return None
            if known is not None and known[1] == names:
                names = known[1]  # the same list: what the group's views derived from it holds
            self._children[path] = (now, names)
        return names

    # --------------------------------------------------------------- entries
    def cached(self, fn: Callable[..., T], *args) -> T | None:
        """fn(*args) from what is known, without a store call (a node not known, or known
        for longer than the ttl, raises NotCached); None where that is not enough. (For
        the adapter's event loop: it must not wait on a stalled store.)"""
        self._local.cached_only = True
        try:
            return fn(*args)
        except NotCached:
            return None
        finally:
            self._local.cached_only = False

    def answering_from_cache(self) -> bool:
        """Whether this thread is in `cached` (the adapter's event loop, which must not wait)."""
        return getattr(self._local, "cached_only", False)

    def resolve_cached(self, vpath: str) -> Entry | None:
        return self.cached(self.resolve, vpath)

    def view_cached(self, entry: Entry) -> FileView | None:
        return self.cached(self.view, entry)

    def attributes(self, entry: Entry, cached: bool = False) -> Attributes:
        """What the kernel is told of an entry; with `cached`, only from what is known
        (NotCached otherwise: a size that needs a store call)."""
        if entry.kind in _V2_KINDS:
            return _v2tree().attributes(self, entry, cached)
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
        key = entry.name if chunk is None else chunk_files_key(state.node, chunk)
        if chunk is None and _renewed(state, entry.name):
            self.view(entry)  # (made again once older than the ttl: its size with it)
        known = state.attributes.get(key)
        if known is not None and not self._follows_members(state, entry):
            return known
        # most sizes follow from the metadata: the file's view need not be built for them
        size = listed_size(state.node, chunk, entry.name)
        if size is None:
            size = self._size(self.view(entry), cached)
        # what a write can go to (core._writer): chunk files, documents and `data`; the
        # other views show no write permission, as a write to them fails EACCES
        documents = state.node.documents if state.node is not None else {}
        writable = chunk is not None or entry.name == "data" or entry.name in documents
        # blocks for the documents and the one whole view of the data; none for the rest
        derived = chunk is not None or entry.name not in {"data", "data.jsonl", *documents}
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
            if entry.kind == V2_DIR and _v2tree().too_many(self, entry, limit):
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
        if kind in _V2_KINDS:
            return _v2tree().lookup(self, parent, name)
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
            except NodeNotFoundError:
                if name == DATASET_NC and self._netcdf_plan(parent.node) is not None:
                    return Entry(FILE, parent.node, name)
                if name in (OME_TIFF, PREVIEW) and self._ome_image(parent.node) is not None:
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
            if name in self.array_files(array):
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
            if name == "v2":
                return _v2tree().root()
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
        if self.keys is None or getattr(self._local, "cached_only", False):
            raise NotCached(entry.name)
        return self.keys

    def _links(self, entry: Entry) -> int:
        """A directory's links (fs/directories.py): a group's sub-directories are its child
        nodes, as last listed (2 links until it is; DecodedCore.lookup lists it); an
        array's, `chunks/`; a chunk directory's, its row of the grid, unless it holds the
        chunk files themselves."""
        kind = entry.kind
        if kind == GROUP:
            with self._lock:
                listed = self._children.get(entry.node)
            return links(0 if listed is None else len(listed[1]))
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

    @staticmethod
    def array_files(array: Array) -> list[str]:
        names = [*list(array.documents), "info"]
        if array.dtype.variable_length:
            return [*names, "data.jsonl"]
        return [*names, "data", "data.npy", *_array_views().legacy.legacy_views(array)]

    def list_dir(self, entry: Entry) -> Iterable[tuple[str, Entry]]:
        """The entries of a directory, in a stable order."""
        kind = entry.kind
        if kind in _V2_KINDS:
            return _v2tree().list_dir(self, entry)
        if kind == BROKEN:
            raise self.node_state(entry.node).error or FsError(errno.EIO, "unreadable node")
        if kind == INTERNAL_DIR:
            return [(n, Entry(INTERNAL_FILE, name=n)) for n in ("stats", "version")] + [("v2", _v2tree().root())]
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
            if DATASET_NC not in {name for name, _ in out} and self._lists_netcdf(entry.node):
                out.append((DATASET_NC, Entry(FILE, entry.node, DATASET_NC)))
            if self._lists_ome_tiff(entry.node):
                out += [(n, Entry(FILE, entry.node, n)) for n in (OME_TIFF, PREVIEW) if n not in {m for m, _ in out}]
            return out
        if kind == ARRAY:
            array = self.array(entry.node)
            out = [(n, Entry(FILE, entry.node, n)) for n in self.array_files(array)]
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
        if entry.kind in _V2_KINDS:
            return _v2tree().view_of(self, entry)
        state = self.node_state(entry.node)
        if state.error is not None:
            raise state.error
        key = (entry.name, entry.coords)
        made, view = state.views.get(key, (0.0, None))
        # info shows what is stored, so it is rendered again once it is older than the ttl
        # (and so are a group's dataset.nc, image.ome.tif and preview.png, which its arrays make)
        if (
            view is None
            or (_renewed(state, entry.name) and time.monotonic() - made >= self.ttl)
            or (
                self._follows_members(state, entry) and getattr(view, "plan", None) is not self._netcdf_plan(entry.node)
            )
        ):
            if view is not None:  # its size may differ from the view's it replaces
                state.attributes.pop(entry.name, None)
            made, view = time.monotonic(), self._make_view(state.node, entry)
            state.views[key] = (made, view)
        return view

    @staticmethod
    def _follows_members(state: NodeState, entry: Entry) -> bool:
        """Whether the entry is a group's dataset.nc: made anew as soon as the group's
        plan is (one of its arrays changed or went), not only once the ttl passed."""
        return entry.name == DATASET_NC and isinstance(state.node, Group) and DATASET_NC not in state.node.documents

    def view_now(self, entry: Entry, known: FileView, cached: bool = False) -> FileView | None:
        """`known` while it is still the entry's view (its node neither dropped nor found
        changed since, whatever the ttl: no store call), else the entry's view from `view`
        (with `cached`, from `view_cached`: None where that needs a store call)."""
        with self._lock:
            state = self._nodes.get(entry.node)
        if state is not None and state.views.get((entry.name, entry.coords), (0.0, None))[1] is known:
            return known
        return self.view_cached(entry) if cached else self.view(entry)

    def _make_view(self, node: Array | Group, entry: Entry) -> FileView:
        name = entry.name
        if entry.kind != CHUNK and name in node.documents:
            raw = node.documents[name]
            return BytesView(lambda: raw, cheap=True)
        views = _array_views()
        if entry.kind == CHUNK:
            return views.chunk.ChunkView(node, entry.coords, self.pending.of(node))
        if name == "info":
            return views.info.InfoView(node, "/" + entry.node, Neighbours(self, entry.node))
        if name == "data":
            return views.data.DataView(node, self.pending.of(node))
        if name == "data.npy":
            return views.data.NpyView(node, self.pending.of(node))
        if name == "data.jsonl":
            return views.jsonl.jsonl_view(node)
        if isinstance(node, Group) and name == DATASET_NC:
            return views.netcdf.NetcdfView(self._netcdf_plan(entry.node, within_ttl=True), self.pending.of)
        if isinstance(node, Group) and name == OME_TIFF and (image := self._ome_image(entry.node)) is not None:
            return views.ometiff.ome_tiff_view(image, self.pending.of)
        if isinstance(node, Group) and name == PREVIEW and (image := self._ome_image(entry.node)) is not None:
            return views.preview.image_preview(image, node.attributes, self.pending.of)
        legacy = (
            {}
            if isinstance(node, Group)
            else views.legacy.legacy_views(node, self.pending.of(node), Neighbours(self, entry.node))
        )
        if name in legacy:
            return legacy[name]()
        raise FsError(errno.ENOENT, f"no view {name!r}")

    def arrays_of(self, path: str) -> list[tuple[str, Array]]:
        """The arrays among a group's children, by name (those that open): gathered once
        per listing, kept until one of them changes (members.py)."""
        return self.members.arrays(path, self.children(path), lambda names: self._gather_arrays(path, names))

    def _gather_arrays(self, path: str, names: list[str]) -> list[tuple[str, Array]]:
        members = []
        for name in names:
            try:
                node = self.node(join_path(path, name))
            except FormatError:  # an array that cannot be opened is no one's neighbour
                continue
            if not isinstance(node, Group):
                members.append((name, node))
        return members

    def _lists_netcdf(self, path: str) -> bool:
        try:
            return self._netcdf_plan(path) is not None
        except StoreError as exc:  # a child the store fails to give never breaks its parent's listing
            log.debug("listing /%s: dataset.nc left out: %s", path, exc)
            return False

    def _netcdf_plan(self, path: str, within_ttl: bool = False):
        """What the group's dataset.nc holds (views/netcdf.py), from its arrays' metadata;
        None where it would hold no variable (then there is no dataset.nc)."""
        plan = self.group_plan(path, within_ttl)
        return plan if plan is not None and plan.shown else None

    def group_plan(self, path: str, within_ttl: bool = False):
        """The plan of the group's dataset.nc, shown or not; None for a group without
        arrays. Made once per state of the group and its members (members.py); with
        `within_ttl`, its members are read again once it is older than the ttl (for
        dataset.nc itself: `info` and listings take it as kept)."""
        group = self.node(path)
        if not isinstance(group, Group):
            return None
        names = self.children(path)

        def plan():
            members = self.members.arrays(path, names, lambda names: self._gather_arrays(path, names), within_ttl)
            if not members:  # (nor are the array views imported for a group of groups)
                return None
            memo = self.members.memos.setdefault(path, {})
            return _array_views().netcdf.netcdf_plan(group.attributes, members, memo)

        return self.members.derived_value(path, names, plan, within_ttl)

    def _lists_ome_tiff(self, path: str) -> bool:
        try:
            return self._ome_image(path) is not None
        except StoreError as exc:  # a level the store fails to give never breaks its group's listing
            log.debug("listing /%s: %s left out: %s", path, OME_TIFF, exc)
            return False

    def _ome_image(self, path: str):
        """The OME-Zarr image the group holds (views/ngff.py), from its levels' metadata;
        None where it shows none (then there is no image.ome.tif; `info` says why)."""
        group = self.node(path)
        if not isinstance(group, Group) or not any(k in group.attributes for k in ("multiscales", "ome")):
            return None  # (nor are the array views imported for a group of no image)
        image = _array_views().ngff.image_of(group, path, Neighbours(self, path))
        return image if isinstance(image, _array_views().ngff.Image) else None

    def _internal_view(self, name: str) -> FileView:
        if name == "version":
            return BytesView(f"zarrfs {__version__}\n".encode, cheap=True)
        return BytesView(
            lambda: (json.dumps(self.stats_source(), indent=2, sort_keys=True) + "\n").encode(), cheap=True
        )


def _renewed(state: NodeState, name: str) -> bool:
    """Whether the node's file `name` is made again once older than the ttl: info shows
    what is stored (and so do a group's dataset.nc, image.ome.tif and preview.png, which
    its arrays make)."""
    return name in ("info", DATASET_NC, OME_TIFF) or (name == PREVIEW and isinstance(state.node, Group))


class Neighbours(ViewNeighbours):
    """What a view of the array at `path` may consult beside it (views/georef.py): its
    parent group's attributes, its sibling arrays, the nodes of a pyramid it is a level
    of, as this tree knows them."""

    def __init__(self, tree: Tree, path: str) -> None:
        self._tree, self._parent = tree, path.rpartition("/")[0]
        self.path = path

    def node(self, path: str) -> Array | Group | None:
        above, _, name = path.rpartition("/")
        if path and not self._tree.members.has_child(above, self._tree.children(above), name):
            return None  # (a listing kept, and its names as a set: no store call, nor a pass, per name)
        try:
            return self._tree.node(path)
        except FormatError:  # none there, or one that cannot be opened: not consulted
            return None

    def chunks_of(self, array: Array):
        return self._tree.pending.of(array)

    def siblings(self) -> list[tuple[str, Array]]:
        return self._tree.arrays_of(self._parent) if self.path else []

    def netcdf_plan(self):
        return self._tree.group_plan(self._parent) if self.path else None


_views = None  # the package of views, once imported


def _array_views():
    """The package of views with what arrays' views need imported (their modules, numpy,
    the pending writes they read through): by the first array opened (node_state), on a
    worker thread, since the adapter's event loop makes views too and must not wait on an
    import. (Called for every view and listing: the import statements run once.)"""
    global _views
    if _views is None:
        from ... import views
        from ...views import chunk, data, info, jsonl, legacy, netcdf, ngff, ometiff, preview, zarr_v2  # noqa: F401
        from . import pending  # noqa: F401

        _views = views
    return _views


def _v2tree():
    """The module of /.zarrfs/v2/'s entries (it imports this one)."""
    from . import v2tree

    return v2tree


def _same_node(a: Array | Group, b: Array | Group) -> bool:
    """Whether `b`, read now, is `a` (and `a`, an array, still its node: one opened before
    its node was invalidated caches nothing, Array.renew)."""
    return (
        type(a) is type(b)
        and getattr(a, "documents", None) == getattr(b, "documents", None)
        and (isinstance(a, Group) or a.current())
    )
