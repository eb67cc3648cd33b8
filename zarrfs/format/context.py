"""What array reads and writes share across arrays (IOContext): the thread pools that
fetch chunks (the I/O stage) and decode and encode them (the codec stage), the caches
(chunk_cache.py), the counters, and the keys a stalled store did not answer (the store
layer's UnansweredFetches)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..store import DeadlinePool, UnansweredFetches
from .chunk_cache import ChunkCache


class Stats:
    """Thread-safe named counters (requests, bytes fetched, cache hits, errors)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


_codec_thread = threading.local()


def codec_executor(workers: int) -> ThreadPoolExecutor:
    """The codec pool: its threads decode and encode, and never wait on one another."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="zarrfs-codec", initializer=_mark_codec_thread)


def io_executor(workers: int) -> DeadlinePool:
    """The I/O stage: its threads wait on store requests (one each), never on other work.
    A DeadlinePool: a local store's calls run on them directly, and one stuck past its
    deadline fails its task and leaves the thread behind (store/deadlines.py)."""
    return DeadlinePool(workers, "zarrfs-io")


def _mark_codec_thread() -> None:
    _codec_thread.active = True


def on_codec_thread() -> bool:
    """Whether the caller is a codec pool thread (which must not wait on codec work)."""
    return getattr(_codec_thread, "active", False)


@dataclass
class IOContext:
    """Shared by all arrays of one hierarchy. `executor` (the codec pool) and
    `io_executor` None mean work inline; `shard_indexes` None means no index cache.
    `outputs_ahead`: while a chunk is fetched, the codec pool makes the memory it will be
    decoded into (the kernel's first touch of fresh pages costs about half as long again
    as decompressing into them, after the fetch where it is not done ahead): for stores
    whose fetches take far longer than that. `unanswered` None: every fetch asks the
    store (a store without a deadline)."""

    executor: Executor | None = None
    cache: ChunkCache | None = None
    stats: Stats = field(default_factory=Stats)
    io_executor: Executor | None = None
    shard_indexes: ChunkCache | None = None
    outputs_ahead: bool = False
    unanswered: UnansweredFetches | None = None

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        if self.executor is None or len(items) < 2 or on_codec_thread():
            return [fn(i) for i in items]
        return list(self.executor.map(fn, items))

    def invalidate(
        self,
        path: str,
        chunks: Iterable[tuple[Any, ...]] | None = None,
        shards: Iterable[tuple[Any, ...]] | None = None,
    ) -> None:
        """Forget what the caches hold of chunks (finest grid) and shards of the array at
        `path`; with neither, everything of the node at `path` and below it."""
        if self.cache is not None and (chunks is not None or shards is None):
            self.cache.invalidate(path, chunks)
        if self.shard_indexes is not None and (shards is not None or chunks is None):
            self.shard_indexes.invalidate(path, shards)
