"""The listing half of the Store interface: public calls that validate their prefix
and count themselves, and the primitives implementations fill in (StoreListing, which
Store derives from)."""

from __future__ import annotations

import builtins
import threading
from abc import ABC, abstractmethod
from collections import defaultdict

from .counting import counted
from .keys import validate_prefix
from .records import TreeListing


class StoreListing(ABC):
    """Listing keys, directories and trees of a store (see Store)."""

    _counts: defaultdict[str, float]
    _counts_lock: threading.Lock

    @counted("list")
    def list(self) -> builtins.list[str]:
        """Every key in the store, sorted."""
        return self._list_prefix("")

    @counted("list")
    def list_prefix(self, prefix: str) -> builtins.list[str]:
        """Every key under `prefix` (full keys), sorted."""
        return self._list_prefix(validate_prefix(prefix))

    @counted("list")
    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        """Every key under `prefix` with its size: from the listing itself where the store
        returns sizes there (one request per listing page on S3, not one per key)."""
        return self._list_prefix_sizes(validate_prefix(prefix))

    @counted("list")
    def list_dir(self, prefix: str) -> tuple[builtins.list[str], builtins.list[str]]:
        """(keys, prefixes) directly under `prefix`, as sorted names relative to it."""
        return self._list_dir(validate_prefix(prefix))

    @counted("list")
    def list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], builtins.list[str]]:
        """Like list_dir, with each key's (size, mtime) as get_info gives them: from the
        listing itself where the store returns them there, not one request per key."""
        return self._list_dir_info(validate_prefix(prefix))

    def prefix_times(self, prefix: str) -> tuple[float, float] | None:
        """(mtime, ctime) of the directory `prefix` is, where the store keeps directories
        of its own (a local store); None elsewhere, and where there is none."""
        return self._prefix_times(validate_prefix(prefix))

    @counted("list")
    def list_tree_info(self, prefix: str, max_keys: int) -> TreeListing:
        """Every key below `prefix` with its (size, mtime), in one recursive listing
        (S3: ListObjectsV2 without a delimiter, 1,000 keys a page). It stops once more
        than `max_keys` keys were seen, and says so (`complete` False). Only where
        `lists_trees`; elsewhere NotImplementedError."""
        if max_keys < 0:
            raise ValueError(f"max_keys must not be negative, not {max_keys}")
        return self._list_tree_info(validate_prefix(prefix), max_keys)

    # Primitives for implementations: arguments are already validated.

    @abstractmethod
    def _get_info(self, key: str) -> tuple[int, float | None] | None: ...

    @abstractmethod
    def _list_prefix(self, prefix: str) -> builtins.list[str]: ...

    @abstractmethod
    def _list_dir(self, prefix: str) -> tuple[builtins.list[str], builtins.list[str]]: ...

    def _list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], builtins.list[str]]:
        keys, prefixes = self._list_dir(prefix)
        infos = {name: self._get_info(prefix + name) for name in keys}
        return {name: info for name, info in infos.items() if info is not None}, prefixes

    def _prefix_times(self, prefix: str) -> tuple[float, float] | None:
        return None

    def _list_tree_info(self, prefix: str, max_keys: int) -> TreeListing:
        raise NotImplementedError(f"{type(self).__name__} does not list trees")

    def _list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        infos = {key: self._get_info(key) for key in self._list_prefix(prefix)}
        return {key: info[0] for key, info in infos.items() if info is not None}
