"""Dimension names for an array made from a `.npy` copied into a group whose arrays carry
them (v3 `dimension_names`, v2 xarray's `_ARRAY_DIMENSIONS`): xarray refuses to open a
group where one array lacks them. The rule is in docs/writing.md, "Copying .npy files"."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...format import FormatError, Group
from ...store import StoreError
from ...store.keys import join_path

if TYPE_CHECKING:
    from ...format import AnyHierarchy

log = logging.getLogger(__name__)


def dimension_names_for(hierarchy: AnyHierarchy, array_path: str, shape: tuple[int, ...]) -> list[str] | None:
    """The names the new array at `array_path` gets: None where no sibling array carries
    dimension names (the group is no xarray dataset: none are added)."""
    from ...views.georef import dimension_names

    group, _, name = array_path.rpartition("/")
    named: list[tuple[tuple[Any, ...], tuple[int, ...]]] = []
    try:
        for child in hierarchy.children(group):
            if child == name:
                continue
            try:
                node = hierarchy.open_node(join_path(group, child))
            except FormatError:
                continue
            if isinstance(node, Group):
                continue
            names = dimension_names(node)
            if names is not None and all(isinstance(n, str) for n in names):
                named.append((names, node.shape))
    except StoreError as exc:  # the array is made all the same, without names
        log.warning("/%s: the dimension names of its siblings could not be read: %s", array_path, exc)
        return None
    if not named:
        return None
    return infer_names(shape, named)


def infer_names(shape: tuple[int, ...], named: list[tuple[tuple[Any, ...], tuple[int, ...]]]) -> list[str]:
    """The names of a sibling of the same shape, where all such siblings agree; else, per
    axis, the one dimension of the group of that size, where each axis has exactly one
    and they differ; else `dim_0`, `dim_1`, … (a name the group already uses for another
    size gets the array's shape in front: never a conflict xarray refuses)."""
    same = {names for names, other in named if other == shape}
    if len(same) == 1:
        return list(same.pop())
    sizes: dict[str, int] = {}
    for names, other in named:
        for n, size in zip(names, other):
            sizes.setdefault(n, size)
    per_axis = [[n for n, size in sizes.items() if size == extent] for extent in shape]
    if all(len(c) == 1 for c in per_axis) and len({c[0] for c in per_axis}) == len(shape):
        return [c[0] for c in per_axis]
    out = []
    for i, extent in enumerate(shape):
        fallback = f"dim_{i}"
        if sizes.get(fallback, extent) != extent:
            fallback = f"dim_{i}_{extent}"
        out.append(fallback)
    return out
