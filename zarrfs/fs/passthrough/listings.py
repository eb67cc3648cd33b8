"""The store's directory listings in passthrough mode, cached for `metadata_ttl`: one fetch
at a time per directory, which other askers wait for. A listing fetched while the mount
changed that directory is fetched again (a generation counter per directory), so a
listing never hides the mount's own writes; `note` records those writes in the cache."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

from ...store import Store
from ..core import Attributes

_LISTINGS_KEPT = 4096


@dataclass
class Listing:
    """One directory as the store listed it: files with (size, mtime), sub-directories."""

    files: dict[str, tuple[int, float | None]]
    dirs: set[str]
    expires: float


class Listings:
    """Thread-safe, under the lock it is given (the core's, which guards its own tables too)."""

    def __init__(self, store: Store, ttl: float, lock: threading.RLock) -> None:
        self.store = store
        self.ttl = ttl
        self._lock = lock
        self._listings: dict[str, Listing] = {}
        self._fetching: dict[str, Future] = {}
        self._generations: dict[str, int] = {}

    def get(self, directory: str) -> Listing:
        """The store's listing of `directory`, from the cache while it is fresh."""
        while True:
            with self._lock:
                listing = self._listings.get(directory)
                if listing is not None and listing.expires > time.monotonic():
                    return listing
                waiting = self._fetching.get(directory)
                if waiting is None:
                    done = self._fetching[directory] = Future()
                    break
            waiting.exception()  # wait; the fetcher reports its own failure
        prefix = directory + "/" if directory else ""
        try:
            for _ in range(3):
                with self._lock:
                    generation = self._generations.get(directory, 0)
                files, dirs = self.store.list_dir_info(prefix)
                listing = Listing(files, set(dirs), time.monotonic() + self.ttl)
                with self._lock:
                    if self._generations.get(directory, 0) == generation:
                        self._keep(directory, listing)
                        break
            return listing
        finally:
            with self._lock:
                del self._fetching[directory]
            done.set_result(None)

    def cached(self, directory: str) -> Listing | None:
        with self._lock:
            return self._listings.get(directory)

    def put(self, directory: str, files: dict, dirs) -> None:
        """A listing the core fetched itself, afresh."""
        with self._lock:
            self._changed(directory)
            self._keep(directory, Listing(files, set(dirs), time.monotonic() + self.ttl))

    def note(self, path: str, attr: Attributes | None) -> None:
        """Record in the cached listing of the parent what the mount's own change left at
        `path` (None: nothing)."""
        parent, _, name = path.rpartition("/")
        with self._lock:
            self._changed(parent)
            listing = self._listings.get(parent)
            if listing is None:
                return
            listing.files.pop(name, None)
            listing.dirs.discard(name)
            if attr is not None and attr.is_dir:
                listing.dirs.add(name)
            elif attr is not None:
                listing.files[name] = (attr.size, attr.mtime)

    def forget_below(self, path: str) -> None:
        with self._lock:
            for directory in [d for d in self._listings if d == path or d.startswith(path + "/")]:
                del self._listings[directory]
                self._changed(directory)

    def _changed(self, directory: str) -> None:
        self._generations[directory] = self._generations.get(directory, 0) + 1

    def _keep(self, directory: str, listing: Listing) -> None:
        if len(self._listings) > _LISTINGS_KEPT:
            now = time.monotonic()
            for stale in [d for d, entry in self._listings.items() if entry.expires <= now]:
                del self._listings[stale]
        self._listings[directory] = listing
