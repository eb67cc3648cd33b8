"""Writes to `data` not yet stored (docs/semantics.md): whole decoded chunks changed in memory,
one set per array path, stored in batches at flush, by write-behind, at unmount. Reads
through every view of the array see them (`read_chunks`). A chunk is read from the store
only if it is needed and not wholly rewritten, so a `cp` over an array decodes nothing."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .array import Array
from .reads import ChunkConsumer


class _PendingChunk:
    """A chunk being rewritten: its values and, until every element has been written, a
    mask of those that were (the others come from the stored chunk when it is needed)."""

    __slots__ = ("count", "values", "written")

    def __init__(self, values: np.ndarray, partial: bool) -> None:
        self.values = values
        self.written = np.zeros(values.shape, dtype=bool) if partial else None
        self.count = 0

    def assign(self, in_chunk: tuple[slice, ...], values: np.ndarray) -> None:
        self.values[in_chunk] = values
        if self.written is not None:
            self.count += int(np.count_nonzero(~self.written[in_chunk]))
            self.written[in_chunk] = True
            if self.count == self.written.size:
                self.written = None

    def complete(self, stored: np.ndarray) -> None:
        assert self.written is not None  # called on partial chunks only
        unwritten = ~self.written
        self.values[unwritten] = stored[unwritten]
        self.written = None


class PendingWrites:
    """Buffered writes to an array: whole chunks (finest grid) changed in memory and not
    yet stored. Writers update them under one lock, so concurrent writers through one
    mount never lose each other's updates; `flush` stores them in one batch and keeps
    them if the store fails, so nothing acknowledged is lost. A chunk is read from the
    store only if it is needed and not wholly rewritten (a `cp` over an array decodes
    nothing)."""

    def __init__(self, array: Array) -> None:
        self.array = array
        self._chunks: dict[tuple[int, ...], _PendingChunk] = {}
        self._partial: set[tuple[int, ...]] = set()  # of _chunks: those not wholly written yet
        # every pending chunk has the chunk shape, so these counts are the sizes (no walk per
        # write); of a rectilinear grid's chunks, the largest shape, a bound of them all
        values_dtype = np.dtype(object) if array.dtype.variable_length else array.dtype.numpy
        self._chunk_nbytes = math.prod(array.chunk_shape) * values_dtype.itemsize
        # complete chunks being stored in the background (write-behind), still readable
        self._storing: dict[tuple[int, ...], np.ndarray] = {}
        self.lock = threading.RLock()  # guards the chunks above; held while they are rewritten
        self._stored = threading.Condition(self.lock)
        # held around every store of this array's chunks, after `lock` where both are
        # taken: shards and partial chunks are read-modify-writes of what is stored
        self._storing_lock = threading.Lock()
        self._epoch = 0  # advanced when pending chunks are thrown away
        self.stores = 0  # stores of chunks so far (by any writer, in the background too)
        self.current = True  # the registry's set for its path (False once replaced or forgotten)
        # advanced (under `lock`) by every change of what the array reads as through this
        # set: a writer that read edge elements before taking the lock merges them again
        self.version = 0
        # told of each write (under `lock`): who must hold the set while writes are pending
        self.on_write: Callable[[PendingWrites], None] | None = None

    def read_chunks(self, coords_list: list[tuple[int, ...]], consume: ChunkConsumer | None = None) -> list[np.ndarray]:
        """Decoded chunks with the writes not yet stored applied (Array.read_chunks, for
        the views of the decoded tree)."""
        if not self:
            return self.array.read_chunks(coords_list, consume)
        pending = [self.get(c) for c in coords_list]
        missing = [i for i, chunk in enumerate(pending) if chunk is None]
        if consume is not None:
            for i, chunk in enumerate(pending):
                if chunk is not None:
                    consume(i, chunk)
        stored = iter(
            self.array.read_chunks(
                [coords_list[i] for i in missing],
                None if consume is None else lambda j, chunk: consume(missing[j], chunk),
            )
        )
        return [next(stored) if chunk is None else chunk for chunk in pending]

    def _store(self, chunks: Mapping[tuple[int, ...], np.ndarray | None]) -> None:
        with self._storing_lock:
            self.array.write_chunks(chunks)

    def __bool__(self) -> bool:
        return bool(self._chunks) or bool(self._storing)

    @property
    def complete_nbytes(self) -> int:
        """Bytes of pending chunks that are wholly written (ready to store)."""
        return (len(self._chunks) - len(self._partial)) * self._chunk_nbytes

    @property
    def nbytes(self) -> int:
        return len(self._chunks) * self._chunk_nbytes

    def _complete(self, coords_list: list[tuple[int, ...]]) -> None:
        partial = [c for c in coords_list if self._chunks[c].written is not None]
        for coords, stored in zip(partial, self.array.read_chunks(partial)):
            self._chunks[coords].complete(stored)
            self._partial.discard(coords)

    def get(self, coords: tuple[int, ...]) -> np.ndarray | None:
        with self.lock:
            if coords not in self._chunks:
                storing = self._storing.get(coords)
                return None if storing is None else storing.copy()
            self._complete([coords])
            return self._chunks[coords].values.copy()

    def write(self, selection: Any, values: Any) -> None:
        """Apply values to a region in memory."""
        array = self.array
        region, values = array.region_values(selection, values)
        dtype = object if array.dtype.variable_length else array.dtype.numpy
        with self.lock:
            self.version += 1
            for coords, in_chunk, in_region in array.chunk_grid.chunks_in(region):
                chunk = self._chunks.get(coords)
                if chunk is None and coords in self._storing:  # rewritten while being stored
                    chunk = self._chunks[coords] = _PendingChunk(self._storing[coords].copy(), False)
                if chunk is None:
                    partial = not array.covers_whole_chunk(coords, in_chunk)
                    shape = array.chunk_shape_of(coords)
                    chunk = self._chunks[coords] = _PendingChunk(np.empty(shape, dtype), partial)
                    if not partial and math.prod(shape) != math.prod(s.stop - s.start for s in in_chunk):
                        # an edge chunk: the part outside the array holds the fill value
                        chunk.values[...] = array.fill_value
                chunk.assign(in_chunk, values[in_region])
                if chunk.written is None:
                    self._partial.discard(coords)
                else:
                    self._partial.add(coords)
            if self.on_write is not None:
                self.on_write(self)

    def _wait_for_stores(self) -> None:
        """With the lock held: let background stores finish, so none overtakes what the
        caller stores next."""
        while self._storing:
            self._stored.wait()

    def replace_chunk(self, coords: tuple[int, ...], chunk: np.ndarray | None) -> None:
        """Store one whole chunk (None: erase it), superseding any pending write to it
        once stored: where the store fails, the pending write (acknowledged) stays."""
        with self.lock:
            self._wait_for_stores()
            self._store({coords: chunk})
            self._chunks.pop(coords, None)
            self._partial.discard(coords)
            self.version += 1

    def discard_all(self) -> None:
        """Forget every pending chunk (the array itself is being erased)."""
        with self.lock:
            self._wait_for_stores()
            self._chunks.clear()
            self._partial.clear()
            self._epoch += 1
            self.version += 1

    def store_complete(self) -> int:
        """Write-behind: store the chunks that are wholly written while writers go on with
        others; returns how many were stored. A chunk that fails to store stays pending
        (unless rewritten meanwhile), so the next flush stores it or reports the error."""
        with self.lock:
            ready = {c: p.values for c, p in self._chunks.items() if p.written is None and c not in self._storing}
            self._storing.update(ready)  # first: lock-free readers must never see neither
            for coords in ready:
                del self._chunks[coords]
            epoch = self._epoch
        if not ready:
            return 0
        try:
            self._store(ready)
        except BaseException:
            with self.lock:
                if epoch == self._epoch:  # not discarded meanwhile
                    for coords, values in ready.items():
                        self._chunks.setdefault(coords, _PendingChunk(values, False))
            raise
        else:
            with self.lock:
                self.stores += 1
        finally:
            with self.lock:
                for coords in ready:
                    del self._storing[coords]
                self._stored.notify_all()
        return len(ready)

    def flush(self) -> int:
        """Store every pending chunk; returns how many were stored."""
        with self.lock:
            self._wait_for_stores()  # what is being stored goes first: stores never overtake
            if not self._chunks:
                return 0
            # completing partial chunks from the store and storing them is one read-modify-write
            with self._storing_lock:
                self._complete(list(self._chunks))
                chunks = {c: p.values for c, p in self._chunks.items()}
                self.array.write_chunks(chunks)
            self._chunks.clear()
            self._partial.clear()
            self.stores += 1
            return len(chunks)
