"""Decode-ahead: chunks ahead of a sequential reader of `data`, `data.npy`, `data.tif` or
`data.csv` are fetched and decoded in the background, so that fetching, decoding and
serving overlap and one `dd` keeps an object store busy.

What a sequential reader is, is the rule both cores share (fs/sequential.py). `data` runs
through the array one chunk row (chunks sharing their first index) after another, reading
all of a row's chunks at once, so the rows ahead are what gets decoded. The window ahead
doubles from AHEAD_FIRST while the run goes on and starts again after a seek; it is
bounded by AHEAD_LARGEST and a share of the decoded-chunk cache (more would evict what is
being read), and by a number of chunks (or, for small chunks, bytes of chunks) in flight
per file: enough to keep dozens of requests in flight on an object store."""

from __future__ import annotations

import itertools
import math
import os
import threading
from typing import TYPE_CHECKING

from ...views.base import FileView
from ..sequential import ReadRuns, Step

if TYPE_CHECKING:
    from ...views.data import DataView

AHEAD_FIRST = 8 << 20
AHEAD_LARGEST = 128 << 20
AHEAD_CACHE_SHARE = 4
AHEAD_CHUNKS = max(32, 8 * (os.cpu_count() or 2))
AHEAD_INFLIGHT_BYTES = 64 << 20
AHEAD_BATCH_BYTES = 8 << 20  # topped up in batches: neighbours in one shard share one read


class DecodeAhead:
    """Per file, shared by its opens (as the kernel's page cache is, whose readahead sends
    the reads that reach the daemon); thread-safe."""

    def __init__(self, view: FileView) -> None:
        self._view = view
        self._runs = ReadRuns(AHEAD_FIRST, AHEAD_LARGEST)
        self._decoded_rows = 0  # chunk rows before this one are decoded or being decoded
        self._lock = threading.Lock()

    def follow(self, offset: int, size: int) -> Step:
        """A read of [offset, offset + size) of the file is being served: decode ahead of
        it if it continues a streaming run."""
        with self._lock:
            step = self._runs.follow(offset, offset + size)
            if not step.continues:
                self._decoded_rows = 0
            if step.ahead:
                span = self._view.data_span(offset, size)
                if span is not None and span[0].can_decode_ahead():
                    self._decode_after(span[0], span[2])
        return step

    def _decode_after(self, data: DataView, end: int) -> None:
        array = data.array
        shape, chunk_shape, grid = array.shape, array.chunk_shape, array.chunk_grid.grid_shape
        if not shape:
            return
        row_bytes = math.prod(grid[1:]) * data.chunk_bytes()
        ahead = min(AHEAD_LARGEST, array.context.cache.capacity // AHEAD_CACHE_SHARE)
        if row_bytes > ahead:
            return  # a row does not fit: reading ahead would evict what is being read
        window = min(ahead, self._runs.grow())
        current = (end // data.itemsize) // (chunk_shape[0] * math.prod(shape[1:]))
        last_row = min(grid[0], current + 1 + max(1, window // row_bytes))
        chunk_bytes = max(1, data.chunk_bytes())
        decoding = data.decoding()
        budget = max(AHEAD_CHUNKS, AHEAD_INFLIGHT_BYTES // chunk_bytes) - decoding
        if decoding and budget * chunk_bytes < AHEAD_BATCH_BYTES:
            return
        wanted = []
        for row in range(max(current, self._decoded_rows), last_row):
            for rest in itertools.product(*(range(n) for n in grid[1:])):
                coords = (row, *rest)
                if not data.needs_decoding(coords):
                    continue
                if budget <= 0:
                    break
                wanted.append(coords)
                budget -= 1
            else:
                self._decoded_rows = row + 1
                continue
            break
        if wanted:
            data.start_decoding(wanted)
