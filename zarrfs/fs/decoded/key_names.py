"""Which names in an array's directory are the store's own keys for that array (its chunk
or shard keys, by the array's chunk key encoding), beside the views. Pure name rules, no
store call: whether a key is stored is the store's to say (store_keys.py).

A key directory (`c/`, `c/0/`; a v2 array's `0/` with dimension separator "/") is one the
grid can have; any name in it is a key as `--raw` would show it (`0.<uuid>.partial`,
the temporary zarr-python writes before renaming it onto its key, included).

An array directory lists its views only: the keys are opened by name, and a key directory
lists what the store holds in it. Listed among the views, `c/` would be a second copy of
every array for `find`, `du`, `tar` and `rsync`, and a walk of it a store listing per
directory (docs/semantics.md, "Opening the mount with zarr-python or xarray")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...store.keys import join_path

if TYPE_CHECKING:
    from ...format import Array

KEY_DIR = "dir"
KEY = "key"


def keys_shown(array: Array) -> bool:
    """Whether the array's keys lie in its own directory (the drafts keep chunks under a
    data prefix elsewhere: they are not shown)."""
    encoding = array.metadata.chunk_key_encoding
    first = (0,) * len(array.stored_grid.grid_shape)
    return encoding.name in ("default", "v2") and array.stored_key(first) == join_path(
        array.path, encoding.chunk_key(first)
    )


def _coordinate(name: str) -> int | None:
    if name.isdigit() and name.isascii() and (len(name) == 1 or name[0] != "0"):
        return int(name)
    return None


def name_kind(array: Array, prefix: str, name: str) -> str | None:
    """What `name` is in key directory `prefix` of the array ("": the array directory
    itself): KEY_DIR, KEY, or None (no key: at the array level, a view or nothing)."""
    if not keys_shown(array):
        return None
    encoding = array.metadata.chunk_key_encoding
    grid = array.stored_grid.grid_shape
    ndim = len(grid)
    if not prefix:
        if encoding.separator != "/":  # every key lies at the array level
            return KEY if encoding.parse_key(name, ndim) is not None else None
        if encoding.name == "default":
            if name != "c":
                return None
            return KEY if ndim == 0 else KEY_DIR
        index = _coordinate(name)
        if ndim == 0:
            return KEY if name == "0" else None
        if index is None:
            return None
        if ndim == 1:
            return KEY
        return KEY_DIR if index < grid[0] else None
    depth = len(prefix.split("/")) - (1 if encoding.name == "default" else 0)
    index = _coordinate(name)
    if index is not None and depth + 1 < ndim and index < grid[depth]:
        return KEY_DIR
    return KEY
