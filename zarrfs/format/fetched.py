"""Nodes' metadata documents as read from the store (`read_documents`: many nodes' in
parallel), and those read ahead of their nodes' opening (`FetchedDocuments`: while
listing a parent, or a batch of siblings), kept for the open that follows: each is read
once. What is kept is bounded in bytes: past the bound, the oldest kept go (a walk
comes to what it read ahead next; a document dropped is read again when its node is
opened)."""

from __future__ import annotations

import threading
import time

from ..store import ByteRange, Store, ValueTooLargeError
from .errors import MetadataError
from .nodes import MAX_DOCUMENT_BYTES, V2_NAMES

Documents = dict[str, bytes | None]

# what documents read ahead may hold at most (their bytes; a listing of N reads N)
MOST_FETCHED_BYTES = 32 << 20
_OVERHEAD = 200  # bytes a kept node's entry costs beyond its documents (dicts, tuples)


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
    """Path -> documents read ahead of the node's opening, each for `ttl` seconds and
    taken (dropped) by that opening. Thread-safe."""

    def __init__(self, ttl: float, most_bytes: int = MOST_FETCHED_BYTES) -> None:
        self.ttl = ttl
        self.most_bytes = most_bytes
        self._kept: dict[str, tuple[float, Documents]] = {}  # in the order kept: the oldest first
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        """What the kept documents cost, as counted against `most_bytes`."""
        return self._bytes

    def keep(self, found: dict[str, Documents], read: float | None = None) -> None:
        """Keep the documents of each node in `found` (those with none are not kept), read
        at `read` (a time.monotonic(); None: now)."""
        now = time.monotonic() if read is None else read
        with self._lock:
            for path, docs in found.items():
                if not docs:
                    continue
                old = self._kept.pop(path, None)
                if old is not None:
                    self._bytes -= _cost(old[1])
                self._kept[path] = (now, docs)
                self._bytes += _cost(docs)
            while self._bytes > self.most_bytes and self._kept:
                oldest = next(iter(self._kept))
                self._bytes -= _cost(self._kept.pop(oldest)[1])

    def take(self, path: str) -> Documents | None:
        """The node's documents read ahead within the ttl (no longer kept); None if none."""
        with self._lock:
            fetched = self._kept.pop(path, None)
            if fetched is not None:
                self._bytes -= _cost(fetched[1])
        if fetched is None or time.monotonic() - fetched[0] >= self.ttl:
            return None
        return fetched[1]

    def peek(self, path: str) -> Documents | None:
        """As take, the documents kept (no longer than the ttl)."""
        with self._lock:
            fetched = self._kept.get(path)
        if fetched is None or time.monotonic() - fetched[0] >= self.ttl:
            return None
        return fetched[1]

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0
