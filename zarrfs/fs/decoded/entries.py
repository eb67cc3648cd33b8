"""What a path of the decoded tree names (docs/semantics.md): an Entry, of one of the kinds
below, and the node it lies in. The tree (tree.py) resolves paths to entries; the rest of
the decoded core takes them as they come."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol

from ..core import Attributes

GROUP = "group"
ARRAY = "array"
BROKEN = "broken"  # a node whose metadata cannot be opened: a directory that fails with EIO
CHUNK_DIR = "chunkdir"
FILE = "file"
CHUNK = "chunk"
INTERNAL_DIR = "internal"
INTERNAL_FILE = "internalfile"
KEY_DIR = "keydir"  # a directory of the store's keys in an array's (name: its path in it)
KEY = "key"  # one of the store's keys of an array, as stored (key_names.py, store_keys.py)
# in a view of the whole hierarchy under /.zarrfs/ (tree_views.py: /.zarrfs/v2/)
TREE_DIR, TREE_FILE, TREE_CHUNK = "treedir", "treefile", "treechunk"
TREE_KINDS = {TREE_DIR, TREE_FILE, TREE_CHUNK}

INTERNAL = ".zarrfs"
DIR_KINDS = {GROUP, ARRAY, BROKEN, CHUNK_DIR, INTERNAL_DIR, KEY_DIR, TREE_DIR}


@functools.lru_cache(maxsize=1024)
def directory(nlink: int) -> Attributes:
    """A directory's attributes, one object for all of equal links: the adapter may tell
    equal attributes apart by identity."""
    return Attributes(True, nlink=nlink)


@dataclass(frozen=True)
class Entry:
    kind: str
    node: str = ""  # node path ("" is the root)
    name: str = ""  # file name within the node directory
    coords: tuple[int, ...] = ()  # chunk coordinates (a prefix, for chunk directories)
    tree: str = ""  # the view of the whole hierarchy it lies in (TREE_*: its name in the catalogue)

    @property
    def is_dir(self) -> bool:
        return self.kind in DIR_KINDS


class NotCached(Exception):
    """Answering would need the store (asked in cached-only mode)."""


class KeyFiles(Protocol):
    """What the store holds at the key paths of arrays (store_keys.py)."""

    def attributes(self, entry: Entry) -> Attributes: ...

    def listing(self, entry: Entry) -> list[tuple[str, Entry, Attributes]]: ...


def split_vpath(vpath: str) -> list[str]:
    return [p for p in vpath.split("/") if p]
