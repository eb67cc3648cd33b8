"""Nodes' metadata documents as read from the store (`read_documents`: many nodes' in
parallel), and those read ahead of their nodes' opening (`FetchedDocuments`: while
listing a parent, or a batch of siblings), kept for the open that follows: each is read
once. What is kept is bounded in bytes: past the bound, the oldest kept go (a walk
comes to what it read ahead next; a document dropped is read again when its node is
opened). A document is kept until its node is opened, whatever its age, but served only
within `--metadata-ttl` of its reading: one found older is read again, and with it the
next of its siblings kept and as old (up to AHEAD, in one batch of parallel reads), so a
walk of a group that outlasts the ttl reads the rest again in batches, not one by one."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from ..store import ByteRange, Store, StoreError, ValueTooLargeError
from .errors import MetadataError
from .nodes import MAX_DOCUMENT_BYTES, V2_NAMES

Documents = dict[str, bytes | None]

# what documents read ahead may hold at most (their bytes; a listing of N reads N), where
# the mount does not set it from its metadata share (fs/decoded/nodes.py: a quarter of it)
MOST_FETCHED_BYTES = 32 << 20
_OVERHEAD = 320  # bytes a kept node's entry costs beyond its documents (dicts, tuples; measured)
AHEAD = 64  # siblings kept past the ttl read again with one found so (as fs/decoded/siblings.py)


def read_documents(store: Store, paths: list[str]) -> dict[str, Documents]:
    """The metadata documents of the nodes at `paths`, read in parallel: each one's
    zarr.json, and the v2 documents of those that have none. Raises StoreError,
    MetadataError (a document over MAX_DOCUMENT_BYTES)."""

    def get(requests: list[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        try:
            return store.get_partial_values(requests, max_size=MAX_DOCUMENT_BYTES)
        except ValueTooLargeError as exc:
            raise MetadataError(f"{exc.key}: metadata document of more than {MAX_DOCUMENT_BYTES} bytes") from None

    prefixes = {p: p + "/" if p else "" for p in paths}
    docs: dict[str, Documents] = {
        p: {"zarr.json": raw} for p, raw in zip(paths, get([(prefixes[p] + "zarr.json", None) for p in paths]))
    }
    v2 = [p for p in paths if docs[p]["zarr.json"] is None]
    values = get([(prefixes[p] + n, None) for p in v2 for n in V2_NAMES]) if v2 else []
    for i, p in enumerate(v2):
        docs[p].update(zip(V2_NAMES, values[i * len(V2_NAMES) : (i + 1) * len(V2_NAMES)]))
    return docs


def _cost(docs: Documents) -> int:
    return _OVERHEAD + sum(len(raw) for raw in docs.values() if raw is not None)


class FetchedDocuments:
    """Path -> documents read ahead of the node's opening, taken (dropped) by that
    opening; served within `ttl` seconds of their reading (past it, read again with their
    siblings by `read`, where given). Thread-safe."""

    def __init__(
        self,
        ttl: float,
        most_bytes: int = MOST_FETCHED_BYTES,
        read: Callable[[list[str]], dict[str, Documents]] | None = None,
    ) -> None:
        self.ttl = ttl
        self.most_bytes = most_bytes
        self._read = read
        self._kept: dict[str, tuple[float, Documents]] = {}  # in the order kept: the oldest first
        # the same paths by parent, in the order kept: a node's next siblings (a walk's next)
        self._by_parent: dict[str, dict[str, None]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """What the kept documents cost, as counted against `most_bytes`."""
        return self._bytes

    def _pop(self, path: str) -> tuple[float, Documents] | None:
        """(With the lock held.)"""
        fetched = self._kept.pop(path, None)
        if fetched is not None:
            self._bytes -= _cost(fetched[1])
            parent = path.rpartition("/")[0]
            siblings = self._by_parent.get(parent)
            if siblings is not None:
                siblings.pop(path, None)
                if not siblings:
                    del self._by_parent[parent]
        return fetched

    def keep(self, found: dict[str, Documents], read: float | None = None) -> None:
        """Keep the documents of each node in `found` (those with none are not kept), read
        at `read` (a time.monotonic(); None: now)."""
        with self._lock:
            self._keep(found, time.monotonic() if read is None else read)

    def _keep(self, found: dict[str, Documents], now: float) -> None:
        """(With the lock held.)"""
        for path, docs in found.items():
            if not docs:
                continue
            self._pop(path)
            self._kept[path] = (now, docs)
            self._by_parent.setdefault(path.rpartition("/")[0], {})[path] = None
            self._bytes += _cost(docs)
        while self._bytes > self.most_bytes and self._kept:
            self._pop(next(iter(self._kept)))

    def take(self, path: str) -> Documents | None:
        """The node's documents read ahead (no longer kept), read again where older than
        the ttl (with up to AHEAD of its siblings kept and as old); None if none."""
        now = time.monotonic()
        with self._lock:
            fetched = self._pop(path)
            if fetched is None:
                return None
            if now - fetched[0] < self.ttl:
                return fetched[1]
            if self._read is None:
                return None
            parent = path.rpartition("/")[0]
            along: list[str] = []
            # in the order kept, the walk's next first: a bounded look, no pass over the group
            for sibling in itertools.islice(self._by_parent.get(parent, ()), 4 * AHEAD):
                if len(along) >= AHEAD - 1:
                    break
                if now - self._kept[sibling][0] >= self.ttl / 2:
                    along.append(sibling)
        try:
            found = self._read([path, *along])
        except (MetadataError, StoreError):  # each node reads its own, and reports its own error
            with self._lock:
                for sibling in along:
                    self._pop(sibling)
            return None
        with self._lock:  # those still kept (not taken meanwhile) are kept as read now
            self._keep({p: found[p] for p in along if p in self._kept}, now)
        return found[path] or None

    def peek(self, path: str) -> Documents | None:
        """The documents kept (read no longer than the ttl ago), left kept."""
        with self._lock:
            fetched = self._kept.get(path)
        if fetched is None or time.monotonic() - fetched[0] >= self.ttl:
            return None
        return fetched[1]

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._by_parent.clear()
            self._bytes = 0
