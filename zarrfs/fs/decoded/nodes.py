"""The nodes of the decoded tree as opened (docs/semantics.md): each node's metadata and
each group's listing, kept for `metadata_ttl` seconds with the views built on them. Past
the ttl a node or listing is read again, and served as known while that is slow
(refresh.py). A thread may ask in cached-only mode (`cached`): then what is not known
raises NotCached instead of waiting on the store.

Every method here may block on the store; the caches are guarded by one lock. The views
of arrays (numpy) are imported with the first array opened: the mount is ready before."""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

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
from ..below import PathsBelow
from . import siblings
from .entries import NotCached
from .erased import ErasedPaths
from .listing import Listing, listing
from .members import GroupMembers
from .refresh import Refreshes, Stale

if TYPE_CHECKING:
    from ...format import Array
    from ..core import Attributes
    from .registry import PendingRegistry

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class NodeState:
    """A node as opened, the time it was opened, and the views built on it."""

    node: Array | Group | None
    error: FormatError | None
    loaded: float
    views: dict[tuple[str, tuple[int, ...]], tuple[Any, ...]] = field(default_factory=dict)
    attributes: dict[str, Attributes] = field(default_factory=dict)  # of its files whose size the node fixes
    cost: int = 0  # bytes it is counted for against the metadata share (state_cost)


# What a node state holds, counted against the metadata share of --memory-target: its
# parsed node and its documents' objects (several times their bytes), and each view built
# on it with its file's size (measured: some 3 KB a small array's state, 2 KB a view)
STATE_BYTES = 1 << 10
DOCUMENT_FACTOR = 4
VIEW_BYTES = 2 << 10
# of the metadata share, what node states may hold; of the rest, a quarter for the
# documents read ahead (FETCHED_SHARE: mostly those of states dropped, read again when
# asked for), an eighth for the entries paths resolved to (resolved.py), and an eighth for
# the kernel's inode numbers (fs/inodes.py: counted, held while the kernel holds them),
# the groups' listings and what their views derive from their members
STATES_SHARE = 0.5
FETCHED_SHARE = 1 / 4
FETCHED_LEAST = 1 << 20  # (a listing of some 800 members' read ahead, whatever the share)


def state_cost(node: Array | Group | None) -> int:
    documents = getattr(node, "documents", None) or {}
    estimated = getattr(documents, "estimated_bytes", None)  # (consolidated metadata's: none rendered)
    size = estimated() if estimated is not None else sum(len(raw) for raw in documents.values() if raw is not None)
    return STATE_BYTES + DOCUMENT_FACTOR * size


class Nodes:
    """The node cache: the tree (tree.py) is made of it."""

    def __init__(
        self,
        hierarchy: AnyHierarchy,
        metadata_ttl: float,
        pending: PendingRegistry,
        replaced: Callable[[str], None] = lambda path: None,
        metadata_limit: int = 128 << 20,
    ) -> None:
        self.hierarchy = hierarchy
        self.ttl = metadata_ttl
        self.pending = pending  # where the views of an array read its chunks
        self.replaced = replaced  # told of a node found changed in the store (not by this mount)
        self._local = threading.local()  # cached_only: answer from what is known, or NotCached
        # in the order they were last consulted, the least recent first (moved to the end
        # by each: what a drop past states_limit takes first, without a pass or a sort)
        self._nodes: OrderedDict[str, NodeState] = OrderedDict()
        self._below = PathsBelow(lambda path: path in self._nodes)  # a forget visits only what is below
        # what the node states kept may cost (the metadata share's part for them): past it
        # the least recently consulted go, but for those of arrays with writes pending
        self.states_limit = int(metadata_limit * STATES_SHARE)
        fetched = getattr(hierarchy, "fetched", None)  # (the documents read ahead: a share too)
        if fetched is not None:
            fetched.most_bytes = max(FETCHED_LEAST, int(metadata_limit * FETCHED_SHARE))
        self.states_bytes = 0
        self.shed = 0  # node states dropped to stay within states_limit
        self._children: dict[str, tuple[float, Sequence[str]]] = {}
        self.members = GroupMembers(metadata_ttl)  # what groups' views derive from their members
        self._refreshes = Refreshes()  # of what is known, once older than the ttl
        self._erased = ErasedPaths(metadata_ttl)  # nodes the mount erased: missing without a store call
        self._lock = threading.Lock()
        # advanced whenever a node's state is dropped or found changed: a view made before
        # may no longer be its entry's (a reader compares it before each read: no lookup)
        self.generation = 0

    def node_state(self, path: str) -> NodeState:
        now = time.monotonic()
        with self._lock:
            state = self._nodes.get(path)
            if state is not None:
                self._nodes.move_to_end(path)  # consulted: the last to go
        if state is not None and now - state.loaded < self.ttl:
            return self._consulted(state)
        if state is None:
            if self._erased.missing(path):
                raise NodeNotFoundError(f"/{path} was removed")
            if getattr(self._local, "cached_only", False):
                raise NotCached(path)
            return self._consulted(self._load(path, None))
        # known, and older than the ttl: read again, but not waited for past a moment
        if getattr(self._local, "cached_only", False) and not self._refreshes.overdue():
            raise NotCached(path)  # a worker waits that moment, for the answer it may bring
        with self._lock:  # its next siblings, refreshed with it (a walk comes to them next)
            listed = self._children.get(path.rpartition("/")[0], (0.0, []))[1]
            along = siblings.following(listed, path, self._nodes, now, self.ttl)
        try:
            fresh = self._refreshes.run(
                ("node", path),
                lambda: siblings.refresh(self.hierarchy, path, state, along, self._load),
                [("node", p) for p, _ in along],
            )
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
            import_array_views()
        state = NodeState(node, error, now, cost=state_cost(node))
        with self._lock:
            current = self._nodes.get(path)
            if known is not None and current is not known:
                return None
            if known is None and current is not None and _same_state(current, state):
                # loaded meanwhile by another thread (both found none: a first look, or
                # one after a drop past states_limit), the same node: not a change found
                # in the store (the decoded chunks kept, the kernel's copies, the times)
                self._nodes.move_to_end(path)
                return current
            self._nodes[path] = state
            self._nodes.move_to_end(path)
            self._below.add(path)
            self.states_bytes += state.cost - (current.cost if current is not None else 0)
            over = self.states_bytes > self.states_limit
            if current is not None:
                self.generation += 1
        if over:
            self._shed()
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

    def forget(self, path: str, erased: bool = False, rewritten: bool = False) -> None:
        """Drop cached knowledge of a node, its descendants and its parent's listing, and
        the entries of its path and the paths below it, visiting only those (not every
        node known: one change in a group of N costs no pass over N). `erased`: the node
        was erased through the mount; its parent's listing then loses its name, not read
        again (N store reads for a group of N). `rewritten`: the node's documents were
        written through the mount, where it is listed: its parent's listing is kept (one
        write is no listing of the N names again)."""
        parent, _, name = path.rpartition("/")
        with self._lock:
            if not path:
                self._nodes.clear()
                self._below.clear()
                self.states_bytes = 0
            else:
                found = self._below.at_and_below(path)
                for p in found:
                    dropped = self._nodes.pop(p, None)
                    if dropped is not None:
                        self.states_bytes -= dropped.cost
                self._below.cut(path, found)
            self.generation += 1
            listed = self._children.get(parent) if path else None
            if not (rewritten and listed is not None and _listed(listed[1], name)):
                self._children.pop(parent, None)
            self._children.pop(path, None)
            if erased and path and listed is not None:
                now_names = listing(listed[1]).without(name)  # (no copy of the N names)
                self._children[parent] = (listed[0], now_names)
        if erased and path:
            self._erased.erased(path)
        else:
            self._erased.made(path)
        if erased and path and listed is not None:
            self.members.removed(path, listed[1], now_names)
        else:
            self.members.forget(path)
        self.hierarchy.forget_consolidated()

    def grown(self, path: str, state: NodeState, cost: int) -> None:
        """The state of the node at `path` holds `cost` bytes more (a view made on it)."""
        with self._lock:
            if self._nodes.get(path) is not state:
                return  # dropped meanwhile: not counted
            state.cost += cost
            self.states_bytes += cost
            over = self.states_bytes > self.states_limit
        if over:
            self._shed()

    def _shed(self) -> None:
        """Drop the least recently consulted node states until those kept cost no more
        than states_limit: each from the front of `_nodes` (O(1) a state, no pass over
        them); not those of arrays with writes pending (moved to the end). A state dropped
        is made again when asked for, from its documents as read (kept with the
        hierarchy's read-ahead) within the ttl of their reading (an open file keeps the
        view it reads)."""
        dropped: list[tuple[str, NodeState]] = []
        with self._lock:
            for _ in range(len(self._nodes)):  # (each kept at most once: those writing stay)
                if self.states_bytes <= self.states_limit:
                    break
                path, state = next(iter(self._nodes.items()))
                if self.pending.writing(path):
                    self._nodes.move_to_end(path)
                    continue
                del self._nodes[path]
                self._below.discard(path)
                self.states_bytes -= state.cost
                self.shed += 1
                dropped.append((path, state))
        for path, state in dropped:  # read again within the ttl: parsed, not asked of the store
            documents = getattr(state.node, "documents", None)
            # (those of consolidated metadata are opened from it again: none rendered here)
            if documents and not hasattr(documents, "estimated_bytes"):
                self.hierarchy.keep_fetched(path, dict(documents), state.loaded)

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

    def children(self, path: str) -> Sequence[str]:
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
    def _list(self, path: str, known: None) -> Sequence[str]: ...
    @overload
    def _list(self, path: str, known: tuple[float, Sequence[str]]) -> Sequence[str] | None: ...
    def _list(self, path: str, known: tuple[float, Sequence[str]] | None) -> Sequence[str] | None:
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

    def cached(self, fn: Callable[..., T], *args: Any) -> T | None:
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

    def known_state(self, path: str) -> NodeState | None:
        """The node's state as kept, whatever its age (no store call); None where none is."""
        with self._lock:
            return self._nodes.get(path)

    def listed(self, path: str) -> Sequence[str]:
        """The group's children as last listed, whatever its age (no store call, no pass
        over them); listed now where it never was. For what one member's views consult
        of its siblings (surroundings.py): the group is listed again when it is listed."""
        with self._lock:
            listed = self._children.get(path)
        return listed[1] if listed is not None else self.children(path)

    def listed_count(self, path: str) -> int:
        """How many children the group's last listing held (0 where it was not listed)."""
        with self._lock:
            listed = self._children.get(path)
        return 0 if listed is None else len(listed[1])


_imported = False  # the views of arrays


def import_array_views() -> None:
    """Import what arrays' views need (their modules, numpy, the pending writes they read
    through): by the first array opened (node_state), on a worker thread, since the
    adapter's event loop makes views too and must not wait on an import."""
    global _imported
    if not _imported:
        from ...format import pending  # noqa: F401
        from ...views import chunk, data, info, jsonl, legacy, netcdf, ngff, npy, ometiff, preview, zarr_v2  # noqa: F401

        _imported = True


def _listed(names: Sequence[str], name: str) -> bool:
    """Whether `name` is in a group's listing (sorted, as the hierarchy lists)."""
    if isinstance(names, Listing):
        return name in names
    at = bisect.bisect_left(names, name)
    return at < len(names) and names[at] == name


def _same_state(a: NodeState, b: NodeState) -> bool:
    """Whether two states of one path, each read from the store, hold the same node (or
    fail alike: the same error)."""
    if a.node is not None and b.node is not None:
        return _same_node(a.node, b.node)
    return a.node is None and b.node is None and type(a.error) is type(b.error) and str(a.error) == str(b.error)


def _same_node(a: Array | Group, b: Array | Group) -> bool:
    """Whether `b`, read now, is `a` (and `a`, an array, still its node: one opened before
    its node was invalidated caches nothing, Array.renew)."""
    return (
        type(a) is type(b)
        and getattr(a, "documents", None) == getattr(b, "documents", None)
        and (isinstance(a, Group) or a.current())
    )
