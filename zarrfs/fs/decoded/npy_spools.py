"""The `.npy` files being copied into groups, by path (each spooled by npy.py, which
imports numpy: imported with the first): their names answer lookups, opens, truncates and
unlinks until their last open closes; the close that makes the array tells the tree,
the times and the kernel."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ...format import validate_node_name
from ...store.keys import join_path
from ..core import Attributes
from ..directories import parent_of
from ..errors import FsError, log_failure
from . import npy_replace
from .entries import GROUP, INTERNAL, Entry
from .node_names import NodesCore

if TYPE_CHECKING:
    from ...format import AnyHierarchy
    from ..core import OpenFile
    from ..directories import DirectoryTimes
    from .names import EverydayNames
    from .npy import NpySpool
    from .times import NodeTimes
    from .tree import Tree


class SpoolsCore(NodesCore, Protocol):
    """What the spools ask of the decoded core: its hierarchy and tree, the everyday names
    (the modes held for a spool's name), the times, and what it is told of a change."""

    hierarchy: AnyHierarchy
    tree: Tree
    changed: Callable[..., None]
    _names: EverydayNames
    _dir_times: DirectoryTimes
    _node_times: NodeTimes

    def changing(self, node_path: str) -> None: ...


class NpySpools:
    """Thread-safe: the table under its own lock."""

    def __init__(self, core: SpoolsCore, spool_dir: str | None) -> None:
        self.core = core
        self._spool_dir = spool_dir
        self._lock = threading.Lock()
        self._spools: dict[str, NpySpool] = {}

    def __contains__(self, path: str) -> bool:
        with self._lock:
            return path in self._spools

    def attributes(self, path: str) -> Attributes | None:
        with self._lock:
            spool = self._spools.get(path)
        if spool is None:
            return None
        return Attributes(False, spool.spool.size(), meta=self.core._names.modes.shown(path, None))

    def open(self, path: str) -> OpenFile | None:
        with self._lock:
            spool = self._spools.get(path)
        return None if spool is None else self._opened(spool)

    def truncate(self, path: str, size: int) -> bool:
        with self._lock:
            spool = self._spools.get(path)
        if spool is not None:
            spool.spool.truncate(size)
        return spool is not None

    def unlink(self, path: str) -> bool:
        """The name goes; its opens still make the array at their close."""
        with self._lock:
            return self._spools.pop(path, None) is not None

    def create(self, path: str, entry: Entry) -> OpenFile | None:
        """A file `NAME.npy` made in a group: the spool of array NAME; None for any other."""
        name = path.rpartition("/")[2]
        if entry.kind != GROUP or not name.endswith(".npy") or len(name) <= 4:
            return None
        from .npy import NpySpool

        validate_node_name(name[:-4])
        array_path = join_path(entry.node, name[:-4])
        core = self.core
        if array_path == INTERNAL:  # (/.zarrfs would hide it)
            raise FileExistsError(f"/{array_path} already exists")
        replaces = core.hierarchy.exists(array_path)
        if replaces and npy_replace.replaceable(core, array_path) is None:
            raise FileExistsError(f"/{array_path} already exists")
        if core._names.scratch.get(array_path) is not None:  # (it would hide the array)
            raise FileExistsError(f"/{array_path} is a scratch file")
        group = core.tree.node(entry.node)
        spool = NpySpool(
            core.hierarchy,
            array_path,
            self._spool_dir,
            changing=core.changing,
            zarr_format=group.metadata.zarr_format,
            replace=functools.partial(npy_replace.swap, core) if replaces else None,
        )
        with self._lock:
            self._spools[path] = spool
        return self._opened(spool)

    def _opened(self, spool: NpySpool) -> OpenFile:
        from .npy import NpyFile

        return NpyFile(spool, lambda: self._created(spool), self._closed)

    def _created(self, spool: NpySpool) -> None:
        core = self.core
        core.tree.forget(spool.array_path)
        core._node_times.touch(spool.array_path)
        with self._lock:
            paths = [p for p, s in self._spools.items() if s is spool]
        for path in paths:  # what `cp -p` set on it before the close holds for the array made
            core._names.removed.show(path)  # (tar unlinked it before it made it again)
            core._names.modes.restamp(path, core._node_times.get(spool.array_path))
        core._dir_times.touch(parent_of(spool.array_path))
        core.changed(spool.array_path, names=True)

    def _closed(self, spool: NpySpool) -> None:
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
