"""What the views of a node may consult beyond it, as the decoded tree knows it
(views/catalogue.py's Surroundings): where an array's chunks are read from (its pending
writes), its neighbours, and what a group's arrays make together: the plan of its
`dataset.nc` and its OME-Zarr image, each made once per state of the group and its
members and updated as they change (members.py). What is kept of a group's members is
what each decided of its place in the plan (views/netcdf.py's Member: its name, shape,
data type and dimension names), not its parsed array: a variable's array is looked up in
the node cache (bounded by the metadata share) when its values are read."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...format import FormatError, Group
from ...store import StoreError
from ...store.keys import join_path
from ...views.base import Neighbours as ViewNeighbours
from .nodes import Nodes

if TYPE_CHECKING:
    from ...format import Array
    from ...views.netcdf import Member
    from ...views.netcdf_plan import Variable


class TreeSurroundings:
    """Over the nodes as cached. `within_ttl`: a group's members are brought up to date
    once its plan is older than the ttl (for dataset.nc itself; `info` and listings take
    it as kept)."""

    def __init__(self, nodes: Nodes, within_ttl: bool = False) -> None:
        self.nodes = nodes
        self.within_ttl = within_ttl

    def chunks_of(self, array: Array) -> Any:
        return self.nodes.pending.of(array)

    def neighbours(self, path: str) -> Neighbours:
        return Neighbours(self, path)

    def members_of(self, path: str) -> list[tuple[str, Member]]:
        """What each array among a group's children (those that open) decided of its
        place in the group's dataset.nc, by name: gathered once per listing (as last
        listed: Nodes.listed), kept until one of them changes (members.py)."""
        return self.nodes.members.arrays(path, self.nodes.listed(path), lambda names: self._gather_arrays(path, names))

    def _gather_arrays(self, path: str, names: Sequence[str]) -> list[tuple[str, Member]]:
        members = []
        for name in names:
            try:
                node = self.nodes.node(join_path(path, name))
            except FormatError:  # an array that cannot be opened is no one's neighbour
                continue
            if not isinstance(node, Group):
                from ...views.netcdf import member_of  # (imported with the first array: nodes.py)

                members.append((name, member_of(name, node)))
        return members

    def planned_array(self, variable: Variable) -> Array:
        """The array a variable of a group's dataset.nc shows, as the node cache has it
        (as known, whatever its age: the plan holds for as long as a view of it is read;
        opened again where the metadata share dropped it). One found changed since the
        plan in what the file's layout follows is refused, not read in a layout not its."""
        state = self.nodes.known_state(variable.path)
        node = state.node if state is not None and state.node is not None else self.nodes.node(variable.path)
        if isinstance(node, Group) or node.shape != variable.shape or node.dtype.itemsize != variable.read_itemsize:
            raise FormatError(
                f"dataset.nc: /{variable.path} changed since the file was laid out "
                "(it is laid out again after --metadata-ttl)"
            )
        return node

    def netcdf_plan(self, path: str) -> Any:
        """What the group's dataset.nc holds (views/netcdf.py), from its arrays' metadata;
        None where it would hold no variable (then there is no dataset.nc)."""
        plan = self.group_plan(path, self.within_ttl)
        return plan if plan is not None and plan.shown else None

    def group_plan(self, path: str, within_ttl: bool = False) -> Any:
        """The plan of the group's dataset.nc, shown or not; None for a group without
        arrays. Made once per state of the group (its node, its listing) and made again
        from what each array decided before once a member changes (members.py). With
        `within_ttl` (for dataset.nc itself), the group is listed again past the ttl and
        its members' states are brought up to date, in batches (siblings.py): an unchanged
        member is neither parsed nor gathered again, and the plan is kept where none
        changed. What one array's files say of it (`info`) takes the group as last
        listed: no listing of N per ttl a walk lasts."""
        group = self.nodes.node(path)
        if not isinstance(group, Group):
            return None
        if within_ttl:
            names = self.nodes.children(path)
            if self.nodes.members.due(path, names):
                since = time.monotonic()
                self._refresh_members(path, names)
                self.nodes.members.renewed(path, names, since)
        else:
            names = self.nodes.listed(path)

        def plan() -> Any:
            members = self.nodes.members.arrays(path, names, lambda names: self._gather_arrays(path, names))
            if not members:  # (nor are the array views imported for a group of groups)
                return None
            from ...views.netcdf import netcdf_plan

            return netcdf_plan(group.attributes, members, self.planned_array)

        return self.nodes.members.derived_value(path, names, plan)

    def _refresh_members(self, path: str, names: Sequence[str]) -> None:
        """Each member's state as stored now (one found changed marks itself in what the
        group keeps: members.py); those past the ttl are read again with the next ones
        listed, in one batch of store reads each."""
        for name in names:
            try:
                self.nodes.node_state(join_path(path, name))
            except (FormatError, StoreError):  # (its views report it where asked)
                continue

    def ome_image(self, path: str) -> Any:
        """The OME-Zarr image the group holds (views/ngff.py), from its levels' metadata;
        None where it shows none (then there is no image.ome.tif; `info` says why)."""
        group = self.nodes.node(path)
        if not isinstance(group, Group) or not any(k in group.attributes for k in ("multiscales", "ome")):
            return None  # (nor are the array views imported for a group of no image)
        from ...views.ngff import Image, image_of

        image = image_of(group, path, self.neighbours(path))
        return image if isinstance(image, Image) else None


class Neighbours(ViewNeighbours):
    """What a view of the array at `path` may consult beside it (views/georef.py): its
    parent group's attributes, its sibling arrays, the nodes of a pyramid it is a level
    of, as the tree knows them."""

    def __init__(self, around: TreeSurroundings, path: str) -> None:
        self._around, self._tree, self._parent = around, around.nodes, path.rpartition("/")[0]
        self.path = path

    def node(self, path: str) -> Array | Group | None:
        above, _, name = path.rpartition("/")
        if path and not self._tree.members.has_child(above, self._tree.listed(above), name):
            return None  # (a listing kept, and its names as a set: no store call, nor a pass, per name)
        try:
            return self._tree.node(path)
        except FormatError:  # none there, or one that cannot be opened: not consulted
            return None

    def chunks_of(self, array: Array) -> Any:
        return self._tree.pending.of(array)

    def siblings(self) -> list[str]:
        return [name for name, _ in self._around.members_of(self._parent)] if self.path else []

    def netcdf_plan(self) -> Any:
        return self._around.group_plan(self._parent) if self.path else None
