"""The names of nodes changed through the decoded core: mkdir makes a group, rmdir erases
a group or an emptied array, rename moves a node (replacing an empty group), unlink
erases a chunk or takes away a file's name on the way to the rmdir of `rm -r`
(docs/posix.md says what each program sees). The core (core.py) hands these on here."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ...format.metadata import METADATA_NAMES
from ...views import catalogue
from ..core import Attributes
from ..directories import links, parent_of
from ..errors import FsError
from .entries import ARRAY, BROKEN, CHUNK, CHUNK_DIR, FILE, GROUP, KEY, KEY_DIR, Entry, directory
from .tree_views import refuse_in_tree_view

if TYPE_CHECKING:
    from ...format import AnyHierarchy
    from ..directories import DirectoryTimes
    from .changes import MountChanges
    from .documents import DocumentLocks
    from .names import EverydayNames
    from .registry import PendingRegistry
    from .store_keys import StoreKeys
    from .times import NodeTimes
    from .tree import Tree


class NodesCore(Protocol):
    """What the changes of names ask of the decoded core: its tree, hierarchy and tables,
    paths resolved as it resolves them, and what it is told of a change."""

    hierarchy: AnyHierarchy
    tree: Tree
    pending: PendingRegistry
    keys: StoreKeys
    changes: MountChanges
    changed: Callable[..., None]
    _names: EverydayNames
    _documents: DocumentLocks
    _dir_times: DirectoryTimes
    _node_times: NodeTimes

    def _existing(self, path: str) -> Entry: ...

    def _resolve(self, path: str) -> Entry | None: ...

    def _timed(self, path: str, entry: Entry, attributes: Attributes) -> Attributes: ...

    def changing(self, node_path: str) -> None: ...

    def _touched(self, node_path: str, moved: bool = False) -> None: ...


class NodeNames:
    """Thread-safe: the hierarchy's changes under the core's document locks, the tables
    each under its own."""

    def __init__(self, core: NodesCore) -> None:
        self.core = core

    def mkdir(self, path: str) -> Attributes:
        entry = self.core._existing(path.rpartition("/")[0])
        refuse_in_tree_view(entry)
        if entry.kind != GROUP:
            raise FsError(errno.EPERM, "directories can be made only in groups")
        self.core.changing(path)
        with self.core._documents.held((entry.node, path)):  # the group never becomes an array meanwhile
            group = self.core.tree.node(entry.node)
            self.core.hierarchy.create_group(path, zarr_format=group.metadata.zarr_format)
            self.core.tree.forget(path)
        self.core._dir_times.touch(parent_of(path), path)
        self.core._node_times.touch(path)
        return self.core._timed(path, Entry(GROUP, path), directory(links(0)))

    def unlink(self, path: str) -> None:
        """An unlink that answers 0 takes its name away (removed.py): one that left it would
        have tar, cpio and unzip remove and make it again forever."""
        # a group's dataset.nc, image.ome.tif or preview.png, listed to `rm -r` and gone
        # with the group's last array before rm came to it: removed, as rm meant (its
        # group is being emptied: its zarr.json was unlinked first)
        gone_view = path.rpartition("/")[2] in catalogue.GROUP_FILE_NAMES and self.core.changes.emptied(parent_of(path))
        if self.core._names.unlink(path):
            return
        entry = self.core._resolve(path) if gone_view else self.core._existing(path)
        if entry is None:
            return
        refuse_in_tree_view(entry)
        if entry.kind == KEY:
            self.core.keys.unlink(entry)
        elif entry.kind == CHUNK:  # read as the fill value from now on: what removing a chunk means
            again = self.core._names.removed.erased_since(path, self.core.changes.changes_of(entry.node))
            again = again and not self.core.changes.emptied(entry.node)
            if again:  # the name goes too, until the file is made again (tar) or its array written
                self.core._names.removed.hide(path)
                return
            self.core.pending.of(self.core.tree.array(entry.node)).replace_chunk(entry.coords, None)
            self.core._touched(entry.node)
            self.core.changed(entry.node)
            self.core._names.removed.erased(path, self.core.changes.changes_of(entry.node))
        elif entry.is_dir:
            raise FsError(errno.EISDIR, "is a directory")
        elif entry.kind == FILE and entry.name in METADATA_NAMES and not self.core._names.is_alias(path, entry):
            self.core.changes.emptying(entry.node)  # the array is erased by the rmdir that follows (`rm -r`)
            self.core._names.removed.hide(path)
        elif self.core._names.is_alias(path, entry):  # the name goes, the array stays (tar makes it again)
            self.core._names.removed.hide(path)
            self.core._dir_times.touch(parent_of(path))
        else:
            emptied = (
                entry.kind == FILE
                and self.core.changes.emptied(entry.node)
                and not self.core._names.is_alias(path, entry)
            )
            if not emptied:
                raise FsError(
                    errno.EPERM,
                    "a view of its node: it goes with the node (rm -r), or once the node's metadata document is removed",
                )
            self.core._names.removed.hide(path)  # `rm -r` on its way to the rmdir that erases the node

    def rmdir(self, path: str) -> None:
        entry = self.core._existing(path)
        refuse_in_tree_view(entry)
        if entry.kind in (CHUNK_DIR, KEY_DIR):
            return  # chunk and key directories come from the grid: nothing to erase
        if entry.kind not in (GROUP, ARRAY, BROKEN):
            if entry.is_dir:  # /.zarrfs
                raise FsError(errno.EPERM, "only groups and arrays can be removed")
            raise FsError(errno.ENOTDIR, "not a directory")
        self.core.changing(entry.node)
        with self.core._documents.held(subtrees=(entry.node,)):
            if entry.kind == GROUP and self.core.hierarchy.children(entry.node):
                raise FsError(errno.ENOTEMPTY, "the group has children")
            scratch = self.core._names.scratch.any_below(entry.node)
            if scratch is not None:
                raise FsError(errno.ENOTEMPTY, f"/{scratch} is a scratch file in it")
            self.core.changes.check_not_open_for_writing(entry.node)
            emptied = self.core.changes.end_emptying(entry.node)
            if entry.kind == ARRAY and not emptied:
                raise FsError(errno.ENOTEMPTY, "an array is removed with its files (rm -r), not by rmdir alone")
            for pending in self.core.pending.under(entry.node):  # waits for background stores
                pending.discard_all()
            self.core._touched(entry.node)
            self.core.hierarchy.erase_node(entry.node)
            self.core.pending.forget(entry.node)
            self.core.tree.forget(entry.node, erased=True)
            self.core._names.removed.forget(entry.node)
            self.core._names.modes.forget(entry.node)
            self.core._names.modes.forget(entry.node + ".npy")  # (its NAME.npy answered for it)
        self.core._dir_times.forget(path)
        self.core._dir_times.touch(parent_of(path))

    def rename(self, src: str, dst: str, replace: bool = True) -> None:
        if self.core._names.rename(src, dst, replace):
            return
        entry = self.core._existing(src)
        if entry.kind == KEY:
            self.core.keys.rename(entry, self.core._existing(dst.rpartition("/")[0]), dst.rpartition("/")[2], replace)
            return
        target_parent = self.core._existing(dst.rpartition("/")[0])
        refuse_in_tree_view(entry)
        refuse_in_tree_view(target_parent)
        if entry.kind not in (GROUP, ARRAY, BROKEN) or target_parent.kind != GROUP:
            raise FsError(errno.EPERM, "only arrays and groups can be moved, and only into groups")
        if not replace and self.core._resolve(dst) is not None:
            raise FsError(errno.EEXIST, "the destination exists")
        if dst == src or dst.startswith(src + "/"):  # (refused before what it replaces is erased)
            raise FsError(errno.EINVAL, "a node cannot move into itself")
        self.core.changing(entry.node)
        self.core.changing(dst)
        with self.core._documents.held(subtrees=(entry.node, dst)):
            self.core.changes.check_not_open_for_writing(src)
            for pending in self.core.pending.under(src):  # stored under the old name before the node moves
                pending.flush()
            replaced = self._replaced_by_move(dst)
            self.core._touched(src)
            self.core._touched(dst, moved=True)
            if replaced:  # an empty group, as rename(2) replaces an empty directory
                self.core.hierarchy.erase_node(dst)
            self.core.hierarchy.move_node(src, dst)
            self.core.pending.forget(src)
            self.core.tree.forget(src)
            self.core.tree.forget(dst)
            self.core._names.removed.forget(src)
            self.core._names.removed.forget(dst)
            self.core.changes.moved(src, dst)
            self.core._names.scratch.moved(src, dst)
            for suffix in ("", ".npy"):  # the node, and the NAME.npy that answers for an array
                self.core._names.modes.forget(dst + suffix)  # what was set on a group it replaced goes with it
                self.core._names.modes.moved(src + suffix, dst + suffix)
        self.core._dir_times.forget(src)
        self.core._dir_times.touch(parent_of(src), parent_of(dst), dst)

    def _replaced_by_move(self, dst: str) -> bool:
        """(Documents held.) Whether a node moved to `dst` replaces what is there: nothing
        is (False), an empty group is (True); anything else stays, and the move fails."""
        target = self.core._resolve(dst)
        if target is None:
            return False
        if target.kind == GROUP and target.node == dst:
            if self.core.hierarchy.children(dst):
                raise FsError(errno.ENOTEMPTY, "the destination group has children")
            scratch = self.core._names.scratch.any_below(dst)
            if scratch is not None:  # (as rmdir: a group holding a scratch file is not empty)
                raise FsError(errno.ENOTEMPTY, f"/{scratch} is a scratch file in it")
            self.core.changes.check_not_open_for_writing(dst)
            return True
        if target.kind in (ARRAY, BROKEN):
            raise FsError(errno.ENOTEMPTY, "the destination is an array: it is removed with its files (rm -r)")
        if target.is_dir:
            raise FsError(errno.EPERM, "only groups can be replaced by a move")
        raise FsError(errno.ENOTDIR, "the destination is not a directory")
