"""`/.zarrfs/v2/`: the hierarchy as a plain Zarr v2 store (views/zarr_v2.py says what each
document holds). A node's directory there is `/.zarrfs/v2/<its path>`; an array's holds
its chunk files (`0.1.2`, the v2 default separator), each the chunk `chunks/<0>/<1>/<2>`
shows: the same views, the same cache. Read-only: a write there fails EROFS.

The tree (tree.py) hands the entries of kinds V2_* here, with its nodes (nodes.py); their `node` is the node's
path, so node times, the ttl and invalidation are the node's own."""

from __future__ import annotations

import errno
import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING

from ...format import FormatError, Group, NodeNotFoundError
from ...store import StoreError
from ...store.keys import join_path
from ...views import catalogue
from ...views.base import BytesView, FileView
from ..core import Attributes
from ..directories import links
from ..errors import FsError
from .entries import V2_CHUNK, V2_DIR, V2_FILE, Entry, NotCached, directory
from .nodes import Nodes

if TYPE_CHECKING:
    from ...format import Array

log = logging.getLogger(__name__)

_VIEW_KEY = "\0v2"  # the key prefix of its views among its node's (never a file name)


def _v2() -> ModuleType:
    from ...views import zarr_v2

    return zarr_v2


def root() -> Entry:
    return Entry(V2_DIR, "")


def _shown(tree: Nodes, path: str) -> Array | Group:
    """The node at `path` if the view shows it; FsError ENOENT (with the reason) if not."""
    node = tree.node(path)
    if not isinstance(node, Group):
        reason = _v2().left_out(node)
        if reason is not None:
            raise FsError(errno.ENOENT, f"/{path} is not in the v2 view: {reason}", quiet=True)
    return node


def _documents(tree: Nodes, entry: Entry) -> list[str]:
    v2 = _v2()
    node = _shown(tree, entry.node)
    if isinstance(node, Group):
        return [v2.ZGROUP, v2.ZATTRS] + ([v2.ZMETADATA] if entry.node == "" else [])
    return [v2.ZARRAY, v2.ZATTRS]


def lookup(tree: Nodes, parent: Entry, name: str) -> Entry:
    if parent.kind != V2_DIR:
        raise FsError(errno.ENOTDIR, "not a directory")
    if name in _documents(tree, parent):
        return Entry(V2_FILE, parent.node, name)
    node = tree.node(parent.node)
    if isinstance(node, Group):
        if name in (".", "..") or "/" in name or name.startswith(".zarrfs"):
            raise FsError(errno.ENOENT, "no such entry")
        child = join_path(parent.node, name)
        state = tree.node_state(child)  # NodeNotFoundError where there is none
        if state.error is not None:
            raise state.error
        _shown(tree, child)
        return Entry(V2_DIR, child)
    coords = _v2().chunk_coords(name, node.chunk_grid.grid_shape)
    if coords is None:
        raise NodeNotFoundError(f"no chunk {name!r} in the v2 view of /{parent.node}")
    return Entry(V2_CHUNK, parent.node, coords=coords)


def list_dir(tree: Nodes, entry: Entry) -> Iterable[tuple[str, Entry]]:
    if entry.kind != V2_DIR:
        raise FsError(errno.ENOTDIR, "not a directory")
    out = [(name, Entry(V2_FILE, entry.node, name)) for name in _documents(tree, entry)]
    node = tree.node(entry.node)
    if isinstance(node, Group):
        for name in tree.children(entry.node):
            try:
                out.append((name, lookup(tree, entry, name)))
            except (FormatError, FsError, StoreError) as exc:  # left out: the child's info says why
                log.debug("listing the v2 view of /%s: %r left out: %s", entry.node, name, exc)
        return out
    return itertools.chain(out, _chunk_entries(entry.node, node))


def _chunk_entries(path: str, array: Array) -> Iterator[tuple[str, Entry]]:
    """Lazily: a grid of any size lists in constant memory."""
    name = _v2().chunk_name
    if not array.shape:
        yield "0", Entry(V2_CHUNK, path, coords=())
        return
    for coords in itertools.product(*map(range, array.chunk_grid.grid_shape)):
        yield name(coords), Entry(V2_CHUNK, path, coords=coords)


def too_many(tree: Nodes, entry: Entry, limit: int) -> bool:
    """Whether the directory holds more than `limit` chunk files (then it is not listed
    at once, from what is known)."""
    node = tree.node(entry.node)
    return not isinstance(node, Group) and node.chunk_grid.chunk_count > limit


def attributes(tree: Nodes, entry: Entry, cached: bool) -> Attributes:
    if entry.kind == V2_DIR:
        # a group's links count its children as last listed, an array's none: no store call
        # (so neither does a listing of /.zarrfs/)
        return directory(links(tree.listed_count(entry.node)))
    if entry.kind == V2_CHUNK:
        array = tree.array(entry.node)
        return Attributes(False, catalogue.chunk_size(array, entry.coords), writable=False)
    view = view_of(tree, entry)
    size = view.cached_size() if cached else view.size()
    if size is None:
        raise NotCached("size")
    return Attributes(False, size, writable=False)


def view_of(tree: Nodes, entry: Entry) -> FileView:
    state = tree.node_state(entry.node)
    if state.error is not None:
        raise state.error
    key = (_VIEW_KEY + entry.name, entry.coords)
    made, view, generation = state.views.get(key, (0.0, None, None))
    # `.zmetadata` shows the whole hierarchy: made again once older than the ttl, and after
    # any change of a node through the mount (which moves the tree's generation on)
    if view is None or (
        entry.name == _v2().ZMETADATA and (time.monotonic() - made >= tree.ttl or generation != tree.generation)
    ):
        generation = tree.generation  # (read first: a change while it is made makes it again)
        made, view = time.monotonic(), _make_view(tree, entry)
        state.views[key] = (made, view, generation)
    return view


def _make_view(tree: Nodes, entry: Entry) -> FileView:
    v2 = _v2()
    node = _shown(tree, entry.node)
    if entry.kind == V2_CHUNK:
        return catalogue.chunk_view(node, entry.coords, tree.pending.of)
    if entry.name == v2.ZMETADATA:
        return BytesView(lambda: v2.consolidated(_walk(tree, entry.node)))
    document = v2.documents(node)[entry.name]
    return BytesView(lambda: v2.render(document), cheap=True)


def _walk(tree: Nodes, path: str) -> Iterator[tuple[str, Array | Group]]:
    """Every node the view shows at and below `path`, with its path relative to `path`."""
    pending = [path]
    while pending:
        at = pending.pop()
        try:
            node = _shown(tree, at)
        except (FormatError, FsError, StoreError) as exc:
            log.debug("the v2 view's .zmetadata leaves /%s out: %s", at, exc)
            continue
        yield at[len(path) :].lstrip("/"), node
        if isinstance(node, Group):
            pending.extend(join_path(at, name) for name in reversed(tree.children(at)))


def refuse_in_v2(entry: Entry) -> None:
    """The v2 view (/.zarrfs/v2/) shows the hierarchy; nothing there is written."""
    if entry.kind in (V2_DIR, V2_FILE, V2_CHUNK):
        raise FsError(errno.EROFS, "the v2 view (/.zarrfs/v2) is read-only")
