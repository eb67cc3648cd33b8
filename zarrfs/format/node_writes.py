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
    stale = _outside(array, array.store.list_prefix(array.path + "/" if array.path else ""))
    if stale:
        array.store.erase_values(stale)


def _outside(array: Array, keys: list[str]) -> list[str]:
    """Those of `keys` (all below `array`) that are chunks outside its stored grid."""
    grid = array.stored_grid
    prefix = array.path + "/" if array.path else ""
    encoding = array.metadata.chunk_key_encoding
    stale = []
    for key in keys:
        name = key[len(prefix) :]
        if is_metadata_key(name):
            continue
        coords = encoding.parse_key(name, len(grid.shape))
        if coords is not None and not grid.contains(coords):
            stale.append(key)
    return stale


def stored_outside(old: object, new: object) -> tuple[bool, list[str]]:
    """(whether array `old` holds any chunk, the keys of those stored outside its shape
    where `new` grows it), from one listing of its keys; (False, []) for a group. A
    shrink stores its document, then erases the chunks outside the new shape
    (erase_after_shrink): a kill between leaves them, unseen outside the shape, which a
    grow would show again (stale values where fill values belong), so a grow erases them
    before its document."""
    from .array import Array

    if not isinstance(old, Array):
        return False, []
    prefix = old.path + "/" if old.path else ""
    keys = old.store.list_prefix(prefix)
    held = any(not is_metadata_key(key[len(prefix) :]) for key in keys)
    shape = getattr(new, "shape", None)
    if not held or not isinstance(shape, tuple) or len(shape) != len(old.shape):
        return held, []
    return held, _outside(old, keys) if any(n > o for n, o in zip(shape, old.shape)) else []


def erase_after_shrink(old: object, new: object) -> None:
    """Once array `old`'s new document is stored: the chunks outside `new`'s shape go."""
    from .array import Array

    if isinstance(old, Array) and isinstance(new, Array) and old.shape != new.shape:
        erase_chunks_outside(new, old.shape)


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
