"""The sizes of files that a listing shows, from the metadata alone. A listing tells the
kernel every file's size; most follow from an array's shape and data type, so that a
`find` or `ls -l` of an array directory builds none of its views. Each size here is
computed by the very function the view's own `size` calls, so a later read returns
exactly that many bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...format import Array, Group

# the key of the chunk files' attributes in a node's state: all have one size, the chunk's
FIXED_SIZE = "chunks/*"
_by_name: dict[str, Callable[[Array], int | None]] | None = None


def chunk_files_key(array: Array, coords: tuple[int, ...]) -> str:
    """The key of a chunk file's attributes in its node's state: one for all chunk files
    of a regular grid, one per chunk shape of a rectilinear grid."""
    grid = array.chunk_grid
    return FIXED_SIZE if grid.regular else f"chunks/{grid.chunk_shape_of(coords)}"


def listed_size(node: Array | Group, chunk: tuple[int, ...] | None, name: str) -> int | None:
    """The size of the chunk file at coords `chunk` or else the file `name` of `node`, when
    the metadata alone gives it without building the view; else None (the view is asked)."""
    if chunk is not None:
        from ...views.chunk import chunk_size

        return chunk_size(node, chunk)
    if name in node.documents:
        return len(node.documents[name])
    size = _size_functions().get(name)
    return None if size is None else size(node)


def _size_functions() -> dict[str, Callable[[Array], int | None]]:
    """By file name: imported once, with the first array's file (numpy is in by then)."""
    global _by_name
    if _by_name is None:
        from ...views import data
        from ...views.legacy import csv
        from ...views.preview import preview_size

        # (not data.tif: its georeferencing tags depend on the array's neighbours too)
        _by_name = {"data": data.data_size, "data.npy": data.npy_size, "data.csv": csv.csv_size}
        _by_name["preview.png"] = preview_size  # (a group's, an OME-Zarr image's, asks its view)
    return _by_name
