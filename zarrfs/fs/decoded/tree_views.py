"""The views of the whole hierarchy in another layout, each a directory of /.zarrfs/
registered in the catalogue (views/catalogue.py, TREES), whose layout module says what
each node shows there: `/.zarrfs/v2/`, the hierarchy as a plain Zarr v2 store
(views/zarr_v2.py). A node's directory there is `/.zarrfs/<view>/<its path>`; an array's
holds its chunk files (in v2: `0.1.2`, the v2 default separator), each the chunk
`chunks/<0>/<1>/<2>` shows: the same views, the same cache. Read-only: a write there
fails EROFS.

The tree (tree.py) hands the entries of kinds TREE_* here, with its nodes (nodes.py);
their `node` is the node's path, so node times, the ttl and invalidation are the node's
own; their `tree` names the view."""

from __future__ import annotations

import errno
import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ...format import FormatError, Group, NodeNotFoundError
from ...store import StoreError
from ...store.keys import join_path
from ...views import catalogue
from ...views.base import BytesView, FileView
from ..core import Attributes
from ..directories import links
from ..errors import FsError
from .entries import TREE_CHUNK, TREE_DIR, TREE_FILE, Entry, NotCached, directory
from .nodes import Nodes

if TYPE_CHECKING:
    from ...format import Array

log = logging.getLogger(__name__)


def _layout(entry: Entry) -> catalogue.TreeLayout:
    kind = catalogue.tree_kind(entry.tree)
    assert kind is not None  # (an entry of a view that the catalogue has)
    return kind.layout()


def root(name: str) -> Entry:
    """The directory of the view `name` (a TreeKind's) in /.zarrfs/."""
    return Entry(TREE_DIR, "", tree=name)


def _shown(tree: Nodes, entry: Entry, path: str) -> Array | Group:
    """The node at `path` if the view shows it; FsError ENOENT (with the reason) if not."""
    node = tree.node(path)
    if not isinstance(node, Group):
        reason = _layout(entry).left_out(node)
        if reason is not None:
            raise FsError(errno.ENOENT, f"/{path} is not in the {entry.tree} view: {reason}", quiet=True)
    return node


def _documents(tree: Nodes, entry: Entry) -> list[str]:
    return _layout(entry).document_names(_shown(tree, entry, entry.node), entry.node == "")


def lookup(tree: Nodes, parent: Entry, name: str) -> Entry:
    if parent.kind != TREE_DIR:
        raise FsError(errno.ENOTDIR, "not a directory")
    if name in _documents(tree, parent):
        return Entry(TREE_FILE, parent.node, name, tree=parent.tree)
    node = tree.node(parent.node)
    if isinstance(node, Group):
        if name in (".", "..") or "/" in name or name.startswith(".zarrfs"):
            raise FsError(errno.ENOENT, "no such entry")
        child = join_path(parent.node, name)
        state = tree.node_state(child)  # NodeNotFoundError where there is none
        if state.error is not None:
            raise state.error
        _shown(tree, parent, child)
        return Entry(TREE_DIR, child, tree=parent.tree)
    coords = _layout(parent).chunk_coords(name, node.chunk_grid.grid_shape)
    if coords is None:
        raise NodeNotFoundError(f"no chunk {name!r} in the {parent.tree} view of /{parent.node}")
    return Entry(TREE_CHUNK, parent.node, coords=coords, tree=parent.tree)


def list_dir(tree: Nodes, entry: Entry) -> Iterable[tuple[str, Entry]]:
    if entry.kind != TREE_DIR:
        raise FsError(errno.ENOTDIR, "not a directory")
    out = [(name, Entry(TREE_FILE, entry.node, name, tree=entry.tree)) for name in _documents(tree, entry)]
    node = tree.node(entry.node)
    if isinstance(node, Group):
        for name in tree.children(entry.node):
            try:
                out.append((name, lookup(tree, entry, name)))
            except (FormatError, FsError, StoreError) as exc:  # left out: the child's info says why
                log.debug("listing the %s view of /%s: %r left out: %s", entry.tree, entry.node, name, exc)
        return out
    return itertools.chain(out, _chunk_entries(entry, node))


def _chunk_entries(entry: Entry, array: Array) -> Iterator[tuple[str, Entry]]:
    """Lazily: a grid of any size lists in constant memory."""
    name, path, tree = _layout(entry).chunk_name, entry.node, entry.tree
    if not array.shape:
        yield "0", Entry(TREE_CHUNK, path, coords=(), tree=tree)
        return
    for coords in itertools.product(*map(range, array.chunk_grid.grid_shape)):
        yield name(coords), Entry(TREE_CHUNK, path, coords=coords, tree=tree)


def too_many(tree: Nodes, entry: Entry, limit: int) -> bool:
    """Whether the directory holds more than `limit` chunk files (then it is not listed
    at once, from what is known)."""
    node = tree.node(entry.node)
    return not isinstance(node, Group) and node.chunk_grid.chunk_count > limit


def attributes(tree: Nodes, entry: Entry, cached: bool) -> Attributes:
    if entry.kind == TREE_DIR:
        # a group's links count its children as last listed, an array's none: no store call
        # (so neither does a listing of /.zarrfs/)
        return directory(links(tree.listed_count(entry.node)))
    if entry.kind == TREE_CHUNK:
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
    key = ("\0" + entry.tree + "\0" + entry.name, entry.coords)  # (never a file name)
    made, view, generation = state.views.get(key, (0.0, None, None))
    # the document of every node (v2: `.zmetadata`) shows the whole hierarchy: made again once older than the ttl, and after
    # any change of a node through the mount (which moves the tree's generation on)
    if view is None or (
        entry.name == _layout(entry).WHOLE and (time.monotonic() - made >= tree.ttl or generation != tree.generation)
    ):
        generation = tree.generation  # (read first: a change while it is made makes it again)
        made, view = time.monotonic(), _make_view(tree, entry)
        state.views[key] = (made, view, generation)
    return view


def _make_view(tree: Nodes, entry: Entry) -> FileView:
    layout = _layout(entry)
    node = _shown(tree, entry, entry.node)
    if entry.kind == TREE_CHUNK:
        return catalogue.chunk_view(node, entry.coords, tree.pending.of)
    if entry.name == layout.WHOLE:
        return BytesView(lambda: layout.consolidated(_walk(tree, entry)))
    document = layout.documents(node)[entry.name]
    return BytesView(lambda: layout.render(document), cheap=True)


def _walk(tree: Nodes, entry: Entry) -> Iterator[tuple[str, Array | Group]]:
    """Every node the view shows at and below the entry's, with its path relative to it."""
    path = entry.node
    pending = [path]
    while pending:
        at = pending.pop()
        try:
            node = _shown(tree, entry, at)
        except (FormatError, FsError, StoreError) as exc:
            log.debug("the %s view's %s leaves /%s out: %s", entry.tree, entry.name, at, exc)
            continue
        yield at[len(path) :].lstrip("/"), node
        if isinstance(node, Group):
            pending.extend(join_path(at, name) for name in reversed(tree.children(at)))


def refuse_in_tree_view(entry: Entry) -> None:
    """A view of the whole hierarchy shows it; nothing there is written."""
    if entry.kind in (TREE_DIR, TREE_FILE, TREE_CHUNK):
        raise FsError(errno.EROFS, f"the {entry.tree} view (/.zarrfs/{entry.tree}) is read-only")
