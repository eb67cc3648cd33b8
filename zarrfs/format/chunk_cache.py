"""Decoded chunks (and shard indexes) kept in memory, bounded in bytes, with the
generations that keep a reader from caching what a write has since replaced."""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..store.keys import ancestors

if TYPE_CHECKING:
    import numpy as np


# what an entry costs beyond its chunk's bytes (the array object, its key, the entry):
# about 360 bytes measured, which for chunks of a few bytes is most of the memory held
ENTRY_OVERHEAD = 384
# node and array paths whose generations are kept one by one (about 150 bytes each): past
# this, the least recently changed are folded into their parents' (_fold), so that a mount
# that writes, erases and moves node after node for weeks keeps a bounded table
GENERATIONS_KEPT = 1 << 12


class ChunkCache:
    """Decoded chunks by (array path, chunk coords), least recently used out first once
    their bytes (each entry's overhead included) pass `capacity`. Thread-safe; cached
    arrays are read-only.

    A reader takes the array's `generation` before it fetches and hands it to `put`: a
    chunk decoded from bytes that a write has since replaced is then not cached.

    Memory being filled for an entry to come (a band, bands.py) is `reserve`d: counted
    against the capacity until `release`, never evicted (nor discarded, nor invalidated).

    An entry put with a `family` replaces the one its family held: a band's key names the
    generation it was made at, and the band made after a write takes the place of the one
    before it, which no reader can find any more (it would be held until evicted)."""

    def __init__(self, capacity: int, max_age: float | None = None) -> None:
        self.capacity = capacity
        self.max_age = max_age  # seconds an entry is served (None: until it is evicted)
        self._entries: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        self._born: dict[tuple[Any, ...], float] = {}  # when each entry was put, where max_age is set
        self._bytes = 0  # the entries' and the reservations'
        self._reserved: dict[object, int] = {}  # token -> bytes (reserve)
        self._generations: dict[str, int] = {}  # array path -> chunk invalidations so far
        # node path -> node invalidations so far: each reaches the node and every array below
        # it, and no other (a write elsewhere in the hierarchy retires none of its chunks)
        self._nodes_changed: dict[str, int] = {}
        self._writing: dict[str, int] = {}  # array path -> writes under way (begin_write)
        self._families: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # family -> its entry's key
        self._family_of: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # key -> its family
        self.evictions = 0  # chunks dropped for room
        self._lock = threading.Lock()

    def generation(self, path: str, born: int | None = None) -> int:
        """The generation of the array at `path`, for a reader to hand to `put`. `born`:
        the reader's node generation when it was opened (`node_generation`); where its node
        was invalidated since (erased, moved, redefined: another node may be there now,
        under other metadata), -1, which no entry is put under."""
        with self._lock:
            generation = self._generation(path)
        return generation if born is None or generation >> 32 == born else -1

    def node_generation(self, path: str) -> int:
        """The node invalidations that reached the node at `path` so far."""
        with self._lock:
            return self._generation(path) >> 32

    def _generation(self, path: str) -> int:
        """The chunk invalidations of the array at `path`, plus (above them) the node
        invalidations of it and of the groups it lies in: both only grow."""
        changed = self._nodes_changed
        nodes = sum(changed.get(p, 0) for p in (path, *ancestors(path))) if changed else 0
        return (nodes << 32) + self._generations.get(path, 0)

    def begin_write(self, path: str) -> None:
        """A write of the array at `path` starts: until end_write, `unchanged` is False for
        every reader, whenever it began (a reader that read an entry, then bytes it
        locates, may have mixed the value before with the value after)."""
        with self._lock:
            self._writing[path] = self._writing.get(path, 0) + 1
            self._count(self._generations, path)

    def end_write(self, path: str) -> None:
        with self._lock:
            self._writing[path] -= 1
            if not self._writing[path]:
                del self._writing[path]
            self._count(self._generations, path)

    def unchanged(self, path: str, generation: int) -> bool:
        """No write of the array at `path` began, ended or is under way since `generation`
        was taken."""
        with self._lock:
            return self._generation(path) == generation and path not in self._writing

    def get(self, key: tuple[Any, ...]) -> np.ndarray | None:
        with self._lock:
            chunk = self._entries.get(key)
            if chunk is not None and self.max_age is not None and time.monotonic() - self._born[key] >= self.max_age:
                self._drop([key])  # as a value read then, it may have changed since
                return None
            if chunk is not None:
                self._entries.move_to_end(key)
            return chunk

    def put(
        self,
        key: tuple[Any, ...],
        chunk: np.ndarray,
        generation: int | None = None,
        family: tuple[Any, ...] | None = None,
    ) -> None:
        size = self._size(chunk)
        if size > self.capacity:
            return
        chunk.flags.writeable = False
        with self._lock:
            if generation is not None and self._generation(key[0]) != generation:
                return  # written since it was fetched
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= self._size(old)
            if family is not None:
                before = self._families.get(family)
                if before is not None and before != key:
                    self._drop([before])
                self._families[family], self._family_of[key] = key, family
            self._entries[key] = chunk
            self._bytes += size
            if self.max_age is not None:
                self._born[key] = time.monotonic()
            self._evict()

    def reserve(self, token: object, nbytes: int) -> None:
        """Count `nbytes` (memory being filled) against the capacity until release(token):
        the least recently used entries make room for it, as for an entry put."""
        with self._lock:
            old = self._reserved.pop(token, None)
            if old is not None:
                self._bytes -= old
            self._reserved[token] = size = nbytes + ENTRY_OVERHEAD
            self._bytes += size
            self._evict()

    def release(self, token: object) -> None:
        """The memory reserved under `token` is no longer held (or is an entry now)."""
        with self._lock:
            self._bytes -= self._reserved.pop(token, 0)

    @property
    def reserved(self) -> int:
        """Bytes reserved now."""
        with self._lock:
            return sum(self._reserved.values())

    def _evict(self) -> None:
        while self._bytes > self.capacity and self._entries:
            evicted_key, evicted = self._entries.popitem(last=False)
            self._bytes -= self._size(evicted)
            self._born.pop(evicted_key, None)
            self._forget_family(evicted_key)
            self.evictions += 1

    def invalidate(self, path: str, coords: Iterable[tuple[Any, ...]] | None = None) -> None:
        """Forget the chunks at `coords` of the array at `path`; without coords, every
        chunk of the node at `path` and of the arrays below it (erased, moved, redefined)."""
        with self._lock:
            if coords is not None:
                self._count(self._generations, path)
                keys = [(path, c) for c in coords]
            else:
                self._count(self._nodes_changed, path)
                prefix = path + "/" if path else ""
                keys = [k for k in self._entries if k[0] == path or k[0].startswith(prefix)]
            self._drop(keys)

    def _count(self, table: dict[str, int], path: str) -> None:
        """One more invalidation of `path` in `table` (its entry moves last: the most recent)."""
        table[path] = table.pop(path, 0) + 1
        if len(table) > GENERATIONS_KEPT:
            self._fold()

    def _fold(self) -> None:
        """Bound the generation tables, keeping every generation growing. An array's chunk
        invalidations are forgotten for one invalidation of its node (its node part, above
        them, grows); a node's are added to its parent's, which every node below it counts
        too: only the parent's other children see a change that was not theirs, and forget
        what they had decoded. The least recently changed go first, half the table at once."""
        keep = GENERATIONS_KEPT // 2
        oldest = [
            p
            for p in itertools.islice(self._generations, max(len(self._generations) - keep, 0))
            if p not in self._writing
        ]
        for path in oldest:
            del self._generations[path]
            self._nodes_changed[path] = self._nodes_changed.pop(path, 0) + 1
        while len(self._nodes_changed) > keep:  # (a pass per level at most: parents come last)
            for path in list(itertools.islice(self._nodes_changed, len(self._nodes_changed) - keep)):
                count = self._nodes_changed.pop(path, 0)
                parent = path.rpartition("/")[0]
                self._nodes_changed[parent] = self._nodes_changed.pop(parent, 0) + count

    def table_sizes(self) -> tuple[int, int]:
        """(arrays, nodes) whose generations are kept one by one."""
        with self._lock:
            return len(self._generations), len(self._nodes_changed)

    def discard(self, keys: Iterable[tuple[Any, ...]]) -> int:
        """Drop these entries, where present, as if evicted (no generation moves: what is
        being fetched for them may still be cached). How many were dropped."""
        with self._lock:
            return self._drop(keys)

    def discard_where(self, path: str, wanted: Callable[[tuple[int, ...]], bool]) -> int:
        """As discard, for the entries of the array at `path` whose coords are `wanted`."""
        with self._lock:
            return self._drop([k for k in self._entries if k[0] == path and wanted(k[1])])

    def entry_count(self) -> int:
        return len(self._entries)

    def _drop(self, keys: Iterable[tuple[Any, ...]]) -> int:
        dropped = 0
        for key in keys:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= self._size(old)
                self._born.pop(key, None)
                self._forget_family(key)
                dropped += 1
        return dropped

    def _forget_family(self, key: tuple[Any, ...]) -> None:
        family = self._family_of.pop(key, None)
        if family is not None and self._families.get(family) == key:
            del self._families[family]

    @staticmethod
    def _size(chunk: np.ndarray) -> int:
        if chunk.ndim and not any(chunk.strides):  # one element broadcast (an absent chunk: constant_array)
            return 64 + ENTRY_OVERHEAD
        return (chunk.nbytes if chunk.dtype.kind != "O" else chunk.size * 64) + ENTRY_OVERHEAD

    @property
    def nbytes(self) -> int:
        return self._bytes
