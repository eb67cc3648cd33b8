"""Modes, owners and times (store FileMeta) of the passthrough tree, as the store keeps
them: cached for `metadata_ttl` (an lstat on a local store, a HEAD per object on S3,
whose listings carry no user metadata), at most METAS_KEPT of them, oldest out first.
Directories of a store that keeps nothing for them (an object store has no object for a
prefix), and everything of a store that keeps no attributes at all (memory://, gs://),
have theirs in memory, for the life of the mount, as do the root's."""

from __future__ import annotations

import enum
import threading
import time
from collections import OrderedDict
from typing import Final, Literal

from ...store import FileMeta, Store

METAS_KEPT = 100_000


class _Unknown(enum.Enum):
    """What `Metas.cached` answers where the store must be asked."""

    UNKNOWN = enum.auto()


UNKNOWN: Final = _Unknown.UNKNOWN


class Metas:
    """Thread-safe, under its own lock (store calls run outside it)."""

    def __init__(self, store: Store, ttl: float, keeps_meta: bool) -> None:
        self.store = store
        self.ttl = ttl
        self.keeps_meta = keeps_meta  # whether files' attributes are the store's (else in memory)
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, bool], tuple[FileMeta | None, float]] = OrderedDict()
        # attributes the store does not keep, by (path, is a directory)
        self._memory: dict[tuple[str, bool], FileMeta] = {}

    def _asks(self, path: str, directory: bool) -> bool:
        """Whether the store keeps the attributes of `path`."""
        if directory:
            return self.store.keeps_dir_meta and path != ""
        return self.keeps_meta

    def cached(self, path: str, directory: bool) -> FileMeta | Literal[_Unknown.UNKNOWN] | None:
        """The attributes of `path` while known, without a store call; UNKNOWN when the
        store must be asked."""
        with self._lock:
            if not self._asks(path, directory):
                return self._memory.get((path, directory))
            found = self._kept.get((path, directory))
            if found is None or found[1] <= time.monotonic():
                return UNKNOWN
            return found[0]

    def get(self, path: str, directory: bool) -> FileMeta | None:
        known = self.cached(path, directory)
        if known is not UNKNOWN:
            return known
        meta = self.store.get_meta(path, directory=directory)
        self.note(path, directory, meta)
        return meta

    def fill(self, paths: list[str]) -> None:
        """Fetch the attributes of the files `paths` that are not known (in one batch:
        HEADs in parallel on S3)."""
        if not self.keeps_meta:
            return
        missing = [path for path in paths if self.cached(path, False) is UNKNOWN]
        if not missing:
            return
        metas = self.store.get_metas(missing)
        for path in missing:
            self.note(path, False, metas.get(path))

    def note(self, path: str, directory: bool, meta: FileMeta | None) -> None:
        """What the store now keeps for `path` (None: nothing)."""
        with self._lock:
            if not self._asks(path, directory):
                if meta is None:
                    self._memory.pop((path, directory), None)
                else:
                    self._memory[(path, directory)] = meta
                return
            self._kept.pop((path, directory), None)
            self._kept[(path, directory)] = (meta, time.monotonic() + self.ttl)
            while len(self._kept) > METAS_KEPT:
                self._kept.popitem(last=False)

    def forget(self, path: str, below: bool = False) -> None:
        """Ask the store again for `path` (`below`: and everything under it), which the
        mount changed."""
        with self._lock:
            self._kept.pop((path, False), None)
            self._kept.pop((path, True), None)
            if below:
                prefix = path + "/"
                for key in [k for k in self._kept if k[0].startswith(prefix)]:
                    del self._kept[key]

    def removed(self, path: str) -> None:
        """Nothing is at `path` any more, nor below it."""
        self.forget(path, below=True)
        with self._lock:
            prefix = path + "/"
            for key in [k for k in self._memory if k[0] == path or k[0].startswith(prefix)]:
                del self._memory[key]

    def moved(self, old: str, new: str) -> None:
        """What was at `old` is at `new`: attributes kept in memory follow it."""
        self.forget(old, below=True)
        self.forget(new, below=True)
        with self._lock:
            for key in [k for k in self._memory if k[0] == new or k[0].startswith(new + "/")]:
                del self._memory[key]
            for path, directory in [k for k in self._memory if k[0] == old or k[0].startswith(old + "/")]:
                self._memory[(new + path[len(old) :], directory)] = self._memory.pop((path, directory))
