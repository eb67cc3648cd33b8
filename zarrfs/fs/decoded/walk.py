"""Read-ahead across chunk files: a reader that opens the chunk files of one array one after
another (`cp -r chunks`, `tar`, `cat chunks/3/*`) has the chunks past the last one it
opened, in C order over the grid, fetched and decoded into the cache in the background, so
that a walk keeps an object store busy instead of waiting on one GET per file.

A walk is the span of chunks its opens have covered. An open of another chunk within the
window's reach of that span continues it (a shell glob opens `10` before `2`); any other
open starts a new walk, and the same chunk opened again is no step at all. The window
starts at AHEAD_REQUESTS chunks and doubles with each open that continues the walk,
bounded as decode-ahead's is (views/ahead/policy.py): by bytes, at most AHEAD_LARGEST and a share of
the decoded-chunk cache, and by chunks and requests in flight; where each shard of a
sharded array is a run of inner chunks in C order, it ends at a shard's end, so that
shards are asked for whole. A chunk file whose chunk is on its way waits for it rather
than fetching it again (and fails as that fetch did where the store did not answer)."""

from __future__ import annotations

import functools
import math
import threading
import weakref
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any

from ...store import StoreUnavailableError
from ...views.ahead.policy import AHEAD_REQUESTS, chunks_per_request, inflight_chunks, window_bytes

if TYPE_CHECKING:
    from ...format import Array


class ChunkWalk:
    """Per array, shared by the opens of its chunk files for reading; thread-safe. It holds
    its array weakly: the core keeps walks by array, as long as the array lives."""

    def __init__(self, array: Array) -> None:
        self._array = weakref.ref(array)
        self._grid = array.chunk_grid.grid_shape
        self._chunks = math.prod(self._grid)
        self._chunk_bytes = max(1, math.prod(array.chunk_shape) * max(1, array.dtype.itemsize))
        self._low = self._high = -1  # the span of flat chunk indices opened (none yet)
        self._last = -1  # the flat index of the chunk opened last
        self._window = 0  # chunks past the span to have fetched
        self._asked = -1  # chunks up to this flat index were asked for (or found cached)
        self._inflight: dict[tuple[int, ...], Future[Any]] = {}
        self._lock = threading.Lock()
        # inner chunks per shard where each shard is a run of them in C order (it spans the
        # grid past its first dimension): windows then end at a shard's end
        self._context = array.context
        sharding = array.sharding
        per_shard = 0
        if (
            sharding is not None
            and array.stored_grid.regular
            and all(p >= n for p, n in zip(sharding.chunks_per_shard[1:], self._grid[1:]))
        ):
            per_shard = sharding.chunks_per_shard[0] * math.prod(self._grid[1:])
        self._per_shard = per_shard
        self._per_request = chunks_per_request(array)

    def opened(self, coords: tuple[int, ...]) -> None:
        """The chunk file at `coords` was opened for reading: fetch ahead of the walk it
        continues, or start a new one."""
        context, array = self._context, self._array()
        if array is None or context.cache is None or context.executor is None or context.io_executor is None:
            return
        flat = 0
        for c, n in zip(coords, self._grid):
            flat = flat * n + c
        with self._lock:
            if flat == self._last:  # the same file again: no step of a walk
                return
            self._last = flat
            reach = max(self._window, 1)
            if self._high < 0 or not self._low - reach <= flat <= self._high + reach:
                self._low = self._high = self._asked = flat
                self._window = 0
                return
            self._low, self._high = min(self._low, flat), max(self._high, flat)
            self._window = min(self._largest(), max(AHEAD_REQUESTS, 2 * self._window))
            wanted = self._wanted(array)
            if not wanted:
                return
            futures = array.start_reads(wanted)
            self._inflight.update(zip(wanted, futures))
        context.stats.add("chunk_files_read_ahead", len(wanted))
        for c, future in zip(wanted, futures):  # one already done calls back at once: not under the lock
            future.add_done_callback(functools.partial(self._done, c))

    def wait(self, coords: tuple[int, ...]) -> None:
        """Until the chunk at `coords` is in the cache, if the walk is fetching it. Where
        the store did not answer that fetch (its retries and deadline spent), the reader
        fails with it rather than wait as long again; other errors are the reader's own to
        meet: it reads the chunk after this."""
        with self._lock:
            future = self._inflight.get(coords)
        if future is not None:
            wait([future])
            error = future.exception()
            if isinstance(error, StoreUnavailableError):
                raise error

    def _largest(self) -> int:
        cache = self._context.cache
        return int(window_bytes(cache) // self._chunk_bytes)

    def _wanted(self, array: Array) -> list[tuple[int, ...]]:
        """The chunks of the window not yet asked for, nor at hand (cached, or in a band)
        (under the lock)."""
        budget = inflight_chunks(self._chunk_bytes, self._per_request) - len(self._inflight)
        wanted: list[tuple[int, tuple[int, ...]]] = []
        end = self._high + self._window + 1
        if self._per_shard:  # a shard asked for whole is one GET, in pieces one each
            whole = -(-end // self._per_shard) * self._per_shard
            if whole - self._high - 1 <= self._largest():
                end = whole
        end = min(self._chunks, end)
        first = flat = max(self._asked, self._high) + 1
        while flat < end and len(wanted) < budget:
            coords = self._coords(flat)
            if coords not in self._inflight and array.cached_chunk(coords) is None:
                wanted.append((flat, coords))
            flat += 1
        if self._per_shard and flat < end:  # the budget ran out within a shard: not that shard
            cut = flat // self._per_shard * self._per_shard
            if cut > first:
                wanted, flat = [(f, c) for f, c in wanted if f < cut], cut
        self._asked = flat - 1
        return [coords for _, coords in wanted]

    def _coords(self, flat: int) -> tuple[int, ...]:
        out = []
        for n in reversed(self._grid):
            flat, c = divmod(flat, n)
            out.append(c)
        return tuple(reversed(out))

    def _done(self, coords: tuple[int, ...], future: Future[Any]) -> None:
        with self._lock:
            if self._inflight.get(coords) is future:
                del self._inflight[coords]
