"""A `.npy` copied over the name of an existing array (`cp x.npy g/x.npy` again, tar's
unlink and create, rsync's rename of `.x.npy.XXXXXX` onto `x.npy`) replaces the array
whole: the new array's document and chunks are written under a hidden name of their own
(npy.replacement_path), then the old array is erased and the new one takes its name. A
failure before the swap leaves the old array as it was; a mount that ends between the
erase and the move leaves the new array whole under its hidden name."""

from __future__ import annotations

import errno
import logging
from typing import TYPE_CHECKING

from ..directories import parent_of
from ..errors import FsError
from .entries import ARRAY, Entry

if TYPE_CHECKING:
    from .node_names import NodesCore

log = logging.getLogger(__name__)


def replaceable(core: NodesCore, array_path: str) -> Entry | None:
    """The array at `array_path` that a `.npy` copied over its name may replace; None
    where the name holds anything else (a group is never replaced by a file)."""
    entry = core._resolve(array_path)
    return entry if entry is not None and entry.kind == ARRAY and entry.node == array_path else None


def swap(core: NodesCore, made: str, array_path: str) -> None:
    """The array `made` (just written from a `.npy`) takes the name of array `array_path`,
    which is erased first. Refused (EBUSY, EEXIST) before anything is erased: then `made`
    is erased too and the old array stays."""
    core.changing(array_path)
    with core._documents.held(subtrees=(made, array_path)):
        try:
            if replaceable(core, array_path) is None:
                raise FsError(errno.EEXIST, f"/{array_path} is no longer an array to replace")
            core.changes.check_not_open_for_writing(array_path)
        except BaseException:
            core.hierarchy.erase_node(made)
            raise
        for pending in core.pending.under(array_path):  # writes to the old array are dropped with it
            pending.discard_all()
        core._touched(array_path)
        core.hierarchy.erase_node(array_path)
        core.pending.forget(array_path)
        core.tree.forget(array_path, erased=True)
        try:
            core.hierarchy.move_node(made, array_path)
        except BaseException:
            log.error("/%s: its replacement from a .npy is kept whole as /%s (the move failed)", array_path, made)
            raise
        core.tree.forget(made)
        core.tree.forget(array_path)
        core._names.removed.forget(array_path)
        core._names.modes.forget(array_path)
    core._dir_times.forget(array_path)
    core._dir_times.touch(parent_of(array_path))
