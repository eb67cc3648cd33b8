"""The store's directory listings in passthrough mode, cached for `metadata_ttl`.

Where the store lists a subtree in one go (`Store.lists_trees`: S3, memory), the first
listing of a directory fetches its whole subtree and keeps a listing of every directory
in it; until they expire the subtree's root is *covered*: a directory below it that has no
listing holds nothing. A subtree of more than TREE_KEYS keys is listed directory by
directory instead (and remembered as such), keeping from the partial listing the
sub-directories it saw whole. Elsewhere (local disks) each directory is one listing.

One fetch at a time: whoever needs a directory that a fetch in flight covers waits for
it. A fetch during which the mount changed a directory in its scope keeps neither that
directory's listing nor the subtree's coverage, so a listing never hides the mount's own
writes; `note` records those writes in the cache. What is kept is bounded by names held
(ENTRIES_KEPT): expired listings go first, then the oldest, with any coverage above."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from ...store import Store, TreeListing
from ...store.keys import join_path
from ..core import Attributes

# A subtree listing stops past this many keys (6 pages of 1,000 on S3: the first listing
# of a huge bucket waits for those, then lists its root alone).
TREE_KEYS = 5_000
ENTRIES_KEPT = 100_000  # names in all kept listings together (about 20 MiB)
_TOO_BIG_KEPT = 4096  # directories remembered as too big to list whole


def _within(path: str, root: str) -> bool:
    return root in ("", path) or path.startswith(root + "/")


@dataclass
class Listing:
    """One directory as the store listed it: files with (size, mtime), sub-directories;
    `tree` is the root of the subtree listing it came from, if any; `times`: the (mtime,
    ctime) of the store's own directory, where it keeps directories (Store.prefix_times)."""

    files: dict[str, tuple[int, float | None]]
    dirs: set[str]
    expires: float
    tree: str | None = None
    times: tuple[float, float] | None = None

    def names(self) -> int:
        return 1 + len(self.files) + len(self.dirs)


@dataclass
class _Fetch:
    """A listing in flight: of `directory`, or of its whole subtree when `recursive`; and
    what the mount changed in its scope meanwhile (directories, and whole subtrees)."""

    directory: str
    recursive: bool
    done: Future = field(default_factory=Future)
    changed: set[str] = field(default_factory=set)
    changed_below: set[str] = field(default_factory=set)

    def covers(self, directory: str) -> bool:
        return directory == self.directory or (self.recursive and _within(directory, self.directory))

    def clean(self, directory: str | None = None) -> bool:
        """Whether the mount left `directory` (None: the whole scope) alone meanwhile."""
        if directory is None:
            return not self.changed and not self.changed_below
        return directory not in self.changed and not any(_within(directory, c) for c in self.changed_below)


class Listings:
    """Thread-safe, under the lock it is given (the core's, which guards its own tables too)."""

    def __init__(self, store: Store, ttl: float, lock: threading.RLock) -> None:
        self.store = store
        self.ttl = ttl
        self._lock = lock
        self._listings: dict[str, Listing] = {}  # oldest first
        self._entries = 0  # names held in _listings
        self._trees: dict[str, float] = {}  # covered roots, with when the coverage expires
        self._too_big: dict[str, None] = {}
        self._fetches: list[_Fetch] = []

    # ------------------------------------------------------------------ reading
    def get(self, directory: str) -> Listing:
        """The store's listing of `directory`, from the cache while it is fresh."""
        while True:
            with self._lock:
                listing = self.fresh(directory)
                if listing is not None:
                    return listing
                waiting = next((f for f in self._fetches if f.covers(directory)), None)
                if waiting is None:
                    # with nothing kept (ttl 0) a subtree would be listed for nothing
                    whole = self.store.lists_trees and self.ttl > 0 and directory not in self._too_big
                    fetch = _Fetch(directory, whole)
                    self._fetches.append(fetch)
                    break
            waiting.done.exception()  # wait; the fetcher reports its own failure
        try:
            return self._fetch(fetch)
        finally:
            with self._lock:
                self._fetches.remove(fetch)
            fetch.done.set_result(None)

    def fresh(self, directory: str) -> Listing | None:
        """The listing of `directory` while it is fresh, from the cache alone (never a store
        call); None when the store must be asked."""
        with self._lock:
            now = time.monotonic()
            listing = self._listings.get(directory)
            if listing is not None:
                return listing if listing.expires > now else None
            root = self._covering(directory, now)
            return None if root is None else Listing({}, set(), self._trees[root], root)

    def cached(self, directory: str) -> Listing | None:
        with self._lock:
            return self._listings.get(directory)

    def _fetch(self, fetch: _Fetch) -> Listing:
        directory = fetch.directory
        prefix = directory + "/" if directory else ""
        if fetch.recursive:
            tree = self.store.list_tree_info(prefix, TREE_KEYS)
            expires = time.monotonic() + self.ttl
            with self._lock:
                if tree.complete:
                    listing = self._install(fetch, directory, tree.files, tree.dirs, expires)
                    if fetch.clean(directory):
                        return listing
                else:
                    self._too_big[directory] = None
                    if len(self._too_big) > _TOO_BIG_KEPT:
                        del self._too_big[next(iter(self._too_big))]
                    self._seed(fetch, tree, expires)
        for _ in range(3):
            with self._lock:
                fetch.recursive = False
                fetch.changed.clear()
                fetch.changed_below.clear()
            files, dirs = self.store.list_dir_info(prefix)
            times = self.store.prefix_times(prefix)
            listing = Listing(files, set(dirs), time.monotonic() + self.ttl, times=times)
            with self._lock:
                if fetch.clean():
                    self._keep(directory, listing)
                    break
        return listing

    def _install(self, fetch: _Fetch, root: str, files: dict, markers, expires: float) -> Listing:
        """Keep the listings a complete subtree listing of `root` gives, and cover `root`,
        save what the mount changed meanwhile; the listing of `root`. Callers hold the lock."""
        listings = {root: Listing({}, set(), expires, root)}

        def listing_of(relative: str) -> Listing:
            path = join_path(root, relative) if relative else root
            listing = listings.get(path)
            if listing is None:
                listing = listings[path] = Listing({}, set(), expires, root)
                parent, _, name = relative.rpartition("/")
                listing_of(parent).dirs.add(name)
            return listing

        for name, info in files.items():
            parent, _, base = name.rpartition("/")
            listing_of(parent).files[base] = info
        for name in markers:
            listing_of(name)
        for gone in [d for d in self._listings if _within(d, root) and d not in listings and fetch.clean(d)]:
            self._drop(gone)
        for path, listing in listings.items():
            if fetch.clean(path):
                self._keep(path, listing)
        if fetch.clean() and all(self._listings.get(path) is listing for path, listing in listings.items()):
            self._trees[root] = expires
        return listings[root]

    def _seed(self, fetch: _Fetch, tree: TreeListing, expires: float) -> None:
        """From a subtree listing that stopped early, keep the sub-directories it listed
        whole: those whose keys all sort before the greatest name it reached."""
        names = [*tree.files, *tree.dirs]
        if not names:
            return
        greatest = max(names)
        children: dict[str, tuple[dict, set]] = {}
        for name in names:
            child, sep, rest = name.partition("/")
            if not sep:
                continue
            files, markers = children.setdefault(child, ({}, set()))
            if name in tree.files:
                files[rest] = tree.files[name]
            else:
                markers.add(rest)
        for child, (files, markers) in children.items():
            if greatest > child + "/" and not greatest.startswith(child + "/"):
                self._install(fetch, join_path(fetch.directory, child), files, markers, expires)

    # ------------------------------------------------------------------ the mount's changes
    def put(self, directory: str, files: dict, dirs) -> None:
        """A listing the core fetched itself, afresh."""
        with self._lock:
            self._changed(directory)
            self._keep(directory, Listing(files, set(dirs), time.monotonic() + self.ttl))

    def note(self, path: str, attr: Attributes | None) -> None:
        """Record in the cached listings what the mount's own change left at `path` (None:
        nothing), and that the directories above it exist."""
        parent, _, name = path.rpartition("/")
        with self._lock:
            self._changed(parent)
            listing = self._for_update(parent)
            if listing is not None:
                before = listing.names()
                listing.files.pop(name, None)
                listing.dirs.discard(name)
                if attr is not None and attr.is_dir:
                    listing.dirs.add(name)
                elif attr is not None:
                    listing.files[name] = (attr.size, attr.mtime)
                self._entries += listing.names() - before
            while attr is not None and parent:
                parent, _, name = parent.rpartition("/")
                self._changed(parent)
                above = self._for_update(parent)
                if above is not None and name not in above.dirs:
                    above.dirs.add(name)
                    self._entries += 1

    def forget_below(self, path: str, gone: bool = False) -> None:
        """Drop the listings at and below `path`; `gone`: nothing is there any more (so a
        subtree listing that covers it still tells the truth)."""
        with self._lock:
            for directory in [d for d in self._listings if _within(d, path)]:
                self._drop(directory)
            for root in [r for r in self._trees if _within(r, path) or (not gone and _within(path, r))]:
                del self._trees[root]
            self._changed(path, below=True)

    def _for_update(self, directory: str) -> Listing | None:
        """The cached listing of `directory` to change, made (empty) where a covered
        subtree says it held nothing. Callers hold the lock."""
        listing = self._listings.get(directory)
        if listing is None:
            root = self._covering(directory, time.monotonic())
            if root is not None:
                listing = Listing({}, set(), self._trees[root], root)
                self._keep(directory, listing)
        return listing

    def _changed(self, directory: str, below: bool = False) -> None:
        """Tell the fetches in flight that the mount changed `directory` (`below`: and
        everything below it)."""
        for fetch in self._fetches:
            if below and (fetch.covers(directory) or _within(fetch.directory, directory)):
                fetch.changed_below.add(directory)
            elif fetch.covers(directory):
                fetch.changed.add(directory)

    # ------------------------------------------------------------------ what is kept
    def _covering(self, directory: str, now: float) -> str | None:
        """The covered root at or above `directory` whose coverage is fresh, if any."""
        path = directory
        while True:
            expires = self._trees.get(path)
            if expires is not None and expires > now:
                return path
            if not path:
                return None
            path = path.rpartition("/")[0]

    def _keep(self, directory: str, listing: Listing) -> None:
        self._drop(directory)
        if listing.names() > ENTRIES_KEPT // 2:
            return  # one listing this large is served, not kept: the bound holds whatever it lists
        if self._entries + listing.names() > ENTRIES_KEPT:
            self._evict()
        self._listings[directory] = listing
        self._entries += listing.names()

    def _drop(self, directory: str) -> None:
        listing = self._listings.pop(directory, None)
        if listing is not None:
            self._entries -= listing.names()

    def _evict(self) -> None:
        """Make room: expired listings out first, then the oldest, to three quarters of
        the bound; a covered subtree that loses a listing is no longer covered."""
        now = time.monotonic()
        for root in [r for r, expires in self._trees.items() if expires <= now]:
            del self._trees[root]
        for directory in [d for d, listing in self._listings.items() if listing.expires <= now]:
            self._drop(directory)
        for directory in list(self._listings):
            if self._entries <= ENTRIES_KEPT * 3 // 4:
                break
            self._drop(directory)
            while (root := self._covering(directory, now)) is not None:
                del self._trees[root]
