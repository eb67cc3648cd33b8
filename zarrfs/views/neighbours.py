"""Neighbours as a hierarchy opened without a mount has them (`zarrfs info`, and the
views' tests): each node opened from the store as asked for, the parent group's
`dataset.nc` planned when asked (views/netcdf.py). The tree's kind
(fs/decoded/surroundings.py) keeps what these open again each time."""

from __future__ import annotations

from typing import Any

from ..format import Array, FormatError, Group
from ..store.keys import join_path
from .base import Neighbours
from .netcdf import netcdf_plan


class HierarchyNeighbours(Neighbours):
    """Thread-safe: nothing is kept."""

    def __init__(self, hierarchy: Any, path: str) -> None:
        self._hierarchy, self.path = hierarchy, path
        self._parent = path.rpartition("/")[0]

    def node(self, path: str) -> Array | Group | None:
        try:
            return self._hierarchy.open_node(path)
        except FormatError:  # none there, or one that cannot be opened: not consulted
            return None

    def chunks_of(self, array: Array) -> Any:
        return None

    def siblings(self) -> list[str]:
        return [name for name, _ in self._sibling_arrays()]

    def _sibling_arrays(self) -> list[tuple[str, Array]]:
        if not self.path:
            return []
        found = ((name, self.node(join_path(self._parent, name))) for name in self._hierarchy.children(self._parent))
        return [(name, node) for name, node in found if isinstance(node, Array)]

    def netcdf_plan(self) -> Any:
        siblings = self._sibling_arrays()  # (held by the plan made: nothing is kept here)
        return netcdf_plan(self.parent_attributes(), siblings) if siblings else None
