"""Rules for changing a node's metadata: what an array that holds data may change (only
attributes, shape and dimension_names), and the chunks a shrink leaves outside; and the
attributes of a new v2 node, stored before the document that makes it a node."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..store import KeyExistsError, Store
from .errors import InvalidWriteError
from .metadata import ArrayMetadata, dump_json, is_metadata_key

if TYPE_CHECKING:
    from .array import Array


class MetadataChangeError(InvalidWriteError):
    """A metadata change an array that holds data cannot take (only attributes, shape and
    dimension_names may change)."""


def check_data_compatible(old: ArrayMetadata, new: ArrayMetadata, path: str) -> None:
    same = (
        old.zarr_format == new.zarr_format
        and old.chunk_runs == new.chunk_runs
        # (a rectilinear grid's largest chunk follows the shape: its declared sizes are compared)
        and (old.chunk_runs is not None or old.chunk_shape == new.chunk_shape)
        and old.dtype == new.dtype
        and old.codecs == new.codecs
        and old.filters == new.filters
        and old.compressor == new.compressor
        and old.order == new.order
        and old.chunk_key_encoding == new.chunk_key_encoding
        and _same_fill(old.fill_value, new.fill_value)
    )
    if not same:
        raise MetadataChangeError(f"/{path} holds data: only attributes, shape and dimension_names may change")


def _same_fill(a: Any, b: Any) -> bool:
    import numpy as np

    return np.array(a).tobytes() == np.array(b).tobytes() if not isinstance(a, (str, bytes)) else a == b


def erase_chunks_outside(array: Array, old_shape: tuple[int, ...]) -> None:
    """After a shrink, stored chunks that lie wholly outside the new shape go (as zarr-python
    does on resize). The stored keys are listed, not the old grid enumerated: its chunk
    count is the metadata's to choose (2**40 costs nothing to declare), the keys are not."""
    grid = array.stored_grid
    prefix = array.path + "/" if array.path else ""
    encoding = array.metadata.chunk_key_encoding
    stale = []
    for key in array.store.list_prefix(prefix):
        name = key[len(prefix) :]
        if is_metadata_key(name):
            continue
        coords = encoding.parse_key(name, len(grid.shape))
        if coords is not None and not grid.contains(coords):
            stale.append(key)
    if stale:
        array.store.erase_values(stale)


def erase_outside(old: object, new: object, stored: bool) -> None:
    """The chunks that a resize of array `old` into `new` leaves outside the shape: after
    its document is `stored`, a shrink erases those outside the new shape; before it, a
    grow erases those stored outside the old one. A kill between a shrink's document and
    its erase leaves chunks unseen outside the shape, which a grow would show again,
    stale values where fill values belong. Costs one listing of the array's keys."""
    from .array import Array

    if not (isinstance(old, Array) and isinstance(new, Array)) or old.shape == new.shape:
        return
    if stored:
        erase_chunks_outside(new, old.shape)
    elif len(old.shape) == len(new.shape) and any(n > o for n, o in zip(new.shape, old.shape)):
        erase_chunks_outside(old, old.shape)


def attributes_first(store: Store, prefix: str, attributes: dict[str, Any] | None) -> int:
    """Before a new v2 node's `.zarray` or `.zgroup` is stored under `prefix`: its
    `.zattrs`, so that a kill between leaves a `.zattrs` alone (no node: no listing shows
    it), never the node without its attributes (an array made from a `.npy` without its
    `_ARRAY_DIMENSIONS`, which xarray refuses). Where it has none, a `.zattrs` that such
    a kill left goes (it would be the new node's). Made where none is, as the document
    is: one found is another writer's only where its node is there too (FileExistsError,
    nothing written); else it is a leftover, replaced. The bytes stored."""
    key = prefix + ".zattrs"
    if not attributes:
        if store.exists(key):
            store.erase(key)
        return 0
    raw = dump_json(attributes)
    try:
        store.create(key, raw)
    except KeyExistsError:
        if store.exists(prefix + ".zarray") or store.exists(prefix + ".zgroup"):
            raise FileExistsError(f"/{prefix.rstrip('/')} was created by another writer meanwhile") from None
        store.set(key, raw)
    return len(raw)
