"""Decode-ahead: chunks ahead of a sequential reader of `data`, `data.npy`, `data.tif` or
`data.csv` are fetched and decoded in the background, so that fetching, decoding and
serving overlap and one `dd` keeps an object store busy.

What a sequential reader is, is the rule both cores share (sequential.py). `data` runs
through the array one chunk row (chunks sharing their first index) after another, reading
all of a row's chunks at once, so the rows ahead are what gets decoded, from the row of
the read at hand (its own chunks are then fetched with their neighbours). The window
ahead doubles from AHEAD_FIRST (or AHEAD_REQUESTS chunks, when larger: that many requests
in flight from the first read, and a chunk for each core to decode) while the run goes on
and starts again after a seek; for a sharded array it ends at the end of a shard row,
past the next one, so that each shard is fetched whole in one GET as tensorstore fetches
it (a piece of a shard costs a round trip, and its index another). It is bounded by
AHEAD_LARGEST and a share of the decoded-chunk cache (more would evict what is being
read), and by the bytes in flight per file (inflight_bytes): a chunk row per core, so
every core decodes, and enough to keep dozens of requests in flight on an object store,
up to a number of requests (the chunks of a row laid out in a band, format/bands.py, are
started together, each decoded into the band; inflight.py keeps them). Behind a reader of
a file larger than the cache, the chunk rows it has passed leave the cache (the kernel's
page cache has them).

Several readers of one file (each on its own part, as a parallel reader's threads read)
are followed each on its own, up to AHEAD_STREAMS of them: a read continues the run it is
near (a small read only the latest one's), else starts one in place of the least
recently read; a read in the rows decoded ahead of a reader continues its run (the reader
may have read the rows between without a request: sequential.py's `reach`). The
sequential ones share the bound above, each reading at least a chunk
row ahead, and rows are dropped behind a reader only while it is the file's one reader."""

from __future__ import annotations

import itertools
import math
import os
import threading
import weakref
from typing import Any, NamedTuple

from ..base import DecodedData, FileView
from .sequential import KERNEL_READ, KERNEL_READS, ReadRuns, Step

AHEAD_FIRST = 8 << 20
AHEAD_LARGEST = 128 << 20
AHEAD_CACHE_SHARE = 4
CORES = max(2, os.cpu_count() or 2)  # the codec pool's threads (fs/mount.py): chunks decoding at once
AHEAD_CHUNKS = max(32, 8 * CORES)
AHEAD_INFLIGHT_BYTES = 128 << 20
AHEAD_MOST_REQUESTS = 4 * AHEAD_CHUNKS  # fetches in flight ahead of one reader, whatever the chunk size
AHEAD_BATCH_BYTES = 8 << 20  # topped up in batches: neighbours in one shard share one read
AHEAD_REQUESTS = max(8, CORES)  # the window spans at least this many chunks (requests), from the first: one a core
AHEAD_STREAMS = 8  # readers of one file followed at once, each with its own window


def window_bytes(cache: Any) -> int:
    """The most bytes a window ahead may span: more would evict what is being read."""
    return min(AHEAD_LARGEST, int(cache.capacity) // AHEAD_CACHE_SHARE)


def inflight_chunks(chunk_bytes: int, per_request: int = 1) -> int:
    """The most chunks of this size a window may have in flight: enough to keep dozens of
    requests in flight on an object store, for small chunks a number of bytes' worth, but
    never more than AHEAD_MOST_REQUESTS requests (`per_request` chunks each: a shard's
    inner chunks share one), since every other read's fetches queue behind them."""
    return min(max(AHEAD_CHUNKS, AHEAD_INFLIGHT_BYTES // chunk_bytes), AHEAD_MOST_REQUESTS * per_request)


def inflight_bytes(chunk_bytes: int, row_bytes: int, share: int) -> int:
    """The most bytes a reader's window may have being fetched and decoded at once: a chunk
    row (a band) per core, so that every core decodes while the next rows are fetched, and
    at least AHEAD_INFLIGHT_BYTES or AHEAD_CHUNKS chunks, so that an object store has
    dozens of requests in flight; never more than the window's share of the cache
    (window_bytes), else decoding ahead evicts what is being read."""
    return min(share, max(CORES * row_bytes, AHEAD_INFLIGHT_BYTES, AHEAD_CHUNKS * chunk_bytes))


def chunks_per_request(array: Any) -> int:
    """How many of the array's chunks (its finest grid) one fetch can bring: a shard's."""
    return math.prod(array.sharding.chunks_per_shard) if array.sharding is not None else 1


class _Layout(NamedTuple):
    """A view of `data` as decode-ahead sees it (DecodeAhead._layout_of)."""

    rows: int  # chunk rows (the grid's first dimension)
    row_bytes: int  # a chunk row's chunks, their full size
    chunk_bytes: int
    per_shard: int  # chunk rows per shard row, for a regular sharded array (else 0)
    per_request: int  # chunks one fetch can bring (chunks_per_request)


class _Stream:
    """One reader of a file: its run, and how far ahead of it chunks are decoded."""

    __slots__ = ("decoded_rows", "passed_rows", "row_end", "runs")

    def __init__(self) -> None:
        self.runs = ReadRuns(AHEAD_FIRST, AHEAD_LARGEST)
        self.decoded_rows = 0  # chunk rows before this one are decoded or being decoded
        self.passed_rows: int | None = None  # the run dropped its chunk rows before this one
        self.row_end = (-1, 0)  # (decoded_rows, where that row begins in data): asked once per row


class DecodeAhead:
    """Per file, shared by its opens (as the kernel's page cache is, whose readahead sends
    the reads that reach the daemon); thread-safe. It holds its view weakly: the core keeps
    it by view, as long as the view lives."""

    def __init__(self, view: FileView) -> None:
        self._view = weakref.ref(view)
        self._streams: list[_Stream] = []  # the readers followed, least recently read first
        self._lock = threading.Lock()
        self._layout: tuple[weakref.ref[Any], _Layout | None] | None = None  # (of what, _layout_of's)

    def follow(self, offset: int, size: int) -> Step:
        """A read of [offset, offset + size) of the file is being served: decode ahead of
        it if it continues a streaming run."""
        with self._lock:
            streams = self._streams
            latest = streams[-1] if streams else None
            if latest is not None and latest.runs.continues(offset, offset + size):
                stream = latest  # the latest reader goes on: the usual read
                before = stream.runs.furthest
                step = stream.runs.continued(offset, offset + size)
                advanced = stream.runs.furthest - before
            else:
                stream, step, advanced = self._other_stream(offset, size)
            view = self._view() if step.ahead else None
            if view is not None:
                span = view.data_span(offset, size)
                if span is not None and span[0].can_decode_ahead():
                    self._decode_after(stream, *span, advanced=advanced)
                    self._reach(stream, view, offset, size, *span)
                    if len(self._streams) == 1:
                        self._drop_behind(stream, view, *span)
        return step

    def pushed(self, offset: int, size: int) -> None:
        """Bytes [offset, offset + size) are being handed to the kernel's page cache ahead
        of the latest reader (fs/fuse/stream_pages.py), which will read them without a
        request: decode ahead of them as of a read there, so that decoding keeps ahead of
        the pushes and not only of the reader's requests (a reader that finds its pages
        cached sends few). The reader's run is left as it is (its requests still follow
        it); nothing is dropped behind the pushes (the reader has not passed them), so the
        pushes lead decoding only within a window's share of the cache past the reader's
        furthest request: further, the rows decoded between them would push other files'
        chunks out of the cache (and the pushes, decoded or not, wait for the reader)."""
        with self._lock:
            stream = self._streams[-1] if self._streams else None
            if stream is None or not stream.runs.streams or offset + size <= stream.runs.furthest:
                return
            view = self._view()
            span = view.data_span(offset, size) if view is not None else None
            if view is not None and span is not None and span[0].can_decode_ahead():
                if offset - stream.runs.furthest > window_bytes(span[0].array.context.cache):
                    return
                self._decode_after(stream, *span, advanced=size)
                self._reach(stream, view, offset, size, *span)

    def _other_stream(self, offset: int, size: int) -> tuple[_Stream, Step, int]:
        """(Under _lock.) The reader a read that does not continue the latest one's run
        belongs to (_stream_of), the read's step in its run, how far it advanced the run."""
        count = len(self._streams)
        stream = self._stream_of(offset, offset + size)
        before = stream.runs.furthest
        step = stream.runs.follow(offset, offset + size)
        if not step.continues:  # counted (`ahead_readers`): one `dd` should be one reader
            self._count_reader(offset, size, replaced=len(self._streams) == count)
        if step.first and len(self._streams) > 1:
            step = step._replace(first=False)  # the first of a reader, not of the file
        if not step.continues:
            stream.decoded_rows, stream.passed_rows = 0, None
        return stream, step, stream.runs.furthest - before if step.continues else 0

    def _count_reader(self, offset: int, size: int, replaced: bool) -> None:
        view = self._view()
        span = view.data_span(offset, size) if view is not None else None
        if span is not None:
            stats = span[0].array.context.stats
            stats.add("ahead_readers")
            if replaced:
                stats.add("ahead_readers_replaced")

    def _stream_of(self, offset: int, end: int) -> _Stream:
        """The reader a read continues (made the most recently read), else a new one in
        place of the least recently read. Only a large read (the kernel's readahead, a
        parallel reader's block) may continue a reader other than the latest: small reads
        jumping about stay random reads, whatever their neighbours (HotWindows)."""
        latest = len(self._streams) - 1
        for i in range(latest, -1, -1):
            runs = self._streams[i].runs
            if (i == latest or end - offset >= KERNEL_READ) and runs.continues(offset, end):
                stream = self._streams.pop(i)
                break
        else:
            if len(self._streams) >= AHEAD_STREAMS:
                self._streams.pop(0)
            stream = _Stream()
        self._streams.append(stream)
        return stream

    def _reach(
        self, stream: _Stream, view: FileView, offset: int, size: int, data: DecodedData, start: int, end: int
    ) -> None:
        """The reader may read the rows decoded ahead of it without a request (their pages
        pushed into the kernel's, fs/fuse/stream_pages.py): its next request, anywhere in
        them, continues its run. Where the file shows `data`'s bytes as they are (`data`,
        past `data.npy`'s header), at a fixed distance; other views keep the plain rule."""
        if end - start != min(offset + size, view.size()) - offset:
            return
        rows, at = stream.row_end
        if rows != stream.decoded_rows:
            rows, at = stream.decoded_rows, data.row_offset(stream.decoded_rows)
            stream.row_end = rows, at
        stream.runs.reach = offset - start + at

    def _drop_behind(self, stream: _Stream, view: FileView, data: DecodedData, start: int, end: int) -> None:
        """A run through a file larger than the cache would only evict what it read before
        to make room for what it reads next (and every other file's chunks with them), and
        keep a cache's worth of memory doing so: the chunk rows it has passed (KERNEL_READS
        reads behind it, the slack for the kernel's reads out of order, at most the share
        of the cache a window ahead gets) leave the cache at once. The kernel's page cache
        holds what was read of them; a file that fits in the cache stays in it, for
        re-reads after the kernel dropped its pages."""
        array = data.array
        if not array.shape or data.size() <= array.context.cache.capacity:
            return
        slack = min(KERNEL_READS * (end - start), array.context.cache.capacity // AHEAD_CACHE_SHARE)
        kept = data.chunk_row_at(max(0, start - slack))
        if stream.passed_rows is None:  # not before the run's start (its first read came before this one)
            assert stream.runs.start is not None  # set by the follow() of this read
            span = view.data_span(stream.runs.start, 1 << 62)  # from there on (past a header)
            stream.passed_rows = data.chunk_row_at(min(start, span[1] if span else start))
        if kept <= stream.passed_rows:
            return
        data.inflight.release_rows(stream.passed_rows, kept)
        stream.passed_rows = kept

    def _decode_after(self, stream: _Stream, data: DecodedData, start: int, end: int, advanced: int = 0) -> None:
        """Start decoding the window's chunks that are not yet: from the row of the read's
        first byte (the read then waits for them, rather than fetching its chunks on its
        own, apart from their neighbours in a shard) to the window's end. The window
        doubles with each read, and once more for each window's worth of bytes the run
        `advanced` past the one before: a reader of pages pushed to it (sequential.py's
        `reach`) asks for a few far apart, and would otherwise stay on a small window
        (few chunks in flight) for most of the file."""
        layout = self._layout_of(data)
        if layout is None:
            return  # (0-d, or empty: nothing to decode)
        rows, row_bytes, chunk_bytes, per_shard, per_request = layout
        array = data.array
        share = window_bytes(array.context.cache)
        if row_bytes > share:
            return  # a row does not fit: reading ahead would evict what is being read
        grown = stream.runs.grow()
        while advanced > grown and stream.runs.window > grown:
            advanced -= grown
            grown = stream.runs.grow()
        unshared = max(grown, AHEAD_REQUESTS * chunk_bytes)  # the window, before the readers share it
        first, current = data.chunk_row_at(start), data.chunk_row_at(end)
        start_row = max(first, stream.decoded_rows)
        if not per_shard and start_row >= min(rows, current + 1 + max(1, unshared // row_bytes)):
            return  # every row up to the window's end is decoded or being decoded: the usual read
        # the sequential readers share it, each reading at least a row ahead
        ahead = max(row_bytes, share // max(1, sum(s.runs.streams for s in self._streams)))
        if per_shard:
            # and, where the share holds them, two shard rows (the one at hand and the next):
            # one `dd` is often followed as several readers (the kernel's reads ahead of it
            # land out of order), and a window short of a shard row asks for each shard in
            # pieces, a round trip each and its index's (whole_shard_rows); the bytes in
            # flight stay bounded below (`most`), whatever the readers
            ahead = max(ahead, min(share, 2 * per_shard * row_bytes))
        last_row = min(rows, current + 1 + max(1, min(ahead, unshared) // row_bytes))
        if per_shard:  # (rectilinear shards: rows as they come)
            last_row = whole_shard_rows(per_shard, rows, current, last_row, ahead // row_bytes)
        if start_row >= last_row:
            return  # (as above, the window's end as shared and, for shards, at a shard row's end)
        chunk_bytes, inflight = max(1, chunk_bytes), data.inflight
        decoding = inflight.decoding()
        most = min(
            inflight_chunks(chunk_bytes, per_request),
            inflight_bytes(chunk_bytes, row_bytes, share) // chunk_bytes,
        )
        budget = max(1, most) - decoding
        own_end = self._own_shard_rows_end(data, start, end)
        if decoding and budget * chunk_bytes < AHEAD_BATCH_BYTES:
            last_row = min(last_row, own_end)  # the read's own shard rows alone, if not started yet
        wanted: list[tuple[int, ...]] = []
        banded = inflight.banded()
        grid = array.chunk_grid.grid_shape
        for row in range(start_row, last_row):
            in_row = [
                coords
                for rest in itertools.product(*(range(n) for n in grid[1:]))
                if inflight.needs_decoding(coords := (row, *rest))
            ]
            # a banded row is started whole (its band is filled by one batch), past the
            # budget where nothing else is being decoded; the read's own shard rows past it too
            if row < own_end or len(in_row) <= budget or (banded and not wanted and not decoding):
                wanted += in_row
                budget -= len(in_row)
                stream.decoded_rows = row + 1
                continue
            if not banded:
                wanted += in_row[: max(0, budget)]
            if per_shard and decoding:
                wanted = self._whole_shard_rows_only(stream, wanted, row, start_row, per_shard)
            break
        if wanted:
            inflight.start_decoding(wanted)

    def _layout_of(self, data: DecodedData) -> _Layout | None:
        """What _decode_after needs of `data`'s layout (None for a 0-d or empty array),
        worked out once per view of `data` (an array's metadata never changes; a view shows
        one array) rather than at every read."""
        known = self._layout
        if known is not None and known[0]() is data:
            return known[1]
        array = data.array
        shape, grid = array.shape, array.chunk_grid.grid_shape
        layout = None
        if shape and math.prod(shape):
            chunk_bytes = data.chunk_bytes()
            sharded = array.sharding is not None and array.stored_grid.regular
            layout = _Layout(
                grid[0],
                math.prod(grid[1:]) * chunk_bytes,
                chunk_bytes,
                array.sharding.chunks_per_shard[0] if sharded else 0,
                chunks_per_request(array),
            )
        self._layout = (weakref.ref(data), layout)
        return layout

    @staticmethod
    def _own_shard_rows_end(data: DecodedData, start: int, end: int) -> int:
        """Where the shard rows that bytes [start, end) of a sharded array lie in end (0 for
        an array that is not sharded): decode-ahead starts them whatever the budget, since
        the read would otherwise fetch its chunks itself, a shard in pieces (its index,
        then a ranged GET each), where decode-ahead asks for the shard whole."""
        array = data.array
        if array.sharding is None or not array.stored_grid.regular or end <= start:
            return 0
        per_shard = array.sharding.chunks_per_shard[0]
        last = data.chunk_row_at(end - 1)
        return int(min(array.chunk_grid.grid_shape[0], (last // per_shard + 1) * per_shard))

    def _whole_shard_rows_only(
        self, stream: _Stream, wanted: list[Any], cut_row: int, start_row: int, per_shard: int
    ) -> list[Any]:
        """The budget ran out in chunk row `cut_row` while others are being decoded: leave
        the shard row it cuts to a later top-up, when the whole of it fits (a shard asked
        for in part costs a read of its index, then ranged reads of its pieces)."""
        boundary = max(start_row, cut_row // per_shard * per_shard)
        stream.decoded_rows = min(stream.decoded_rows, boundary)
        return [coords for coords in wanted if coords[0] < boundary]


def whole_shard_rows(per_shard: int, rows: int, current: int, last_row: int, most: int) -> int:
    """Where a window of chunk rows [current, last_row) ahead of a reader of a sharded array
    ends: at the end of a shard row, so that each shard is asked for whole (one GET when
    its index is not known yet, as tensorstore reads it) rather than in pieces, each piece
    a round trip (the index's too). It reaches at least to the end of the next shard row:
    the reader does not wait on a round trip where it enters a shard. At most `most` rows
    ahead of `current`: a window that cannot reach the end of the shard row it ends in
    stops at that row's start instead (sliding row by row, it would ask for each shard a
    piece at a time), unless that is not past `current` (shard rows larger than the
    window, which can only be read in pieces): then it is kept as it is."""
    ends = (max(-(-last_row // per_shard), current // per_shard + 2) * per_shard, -(-last_row // per_shard) * per_shard)
    for end in ends:
        end = min(end, rows)
        if end - current <= most:
            return max(end, last_row)
    start = last_row // per_shard * per_shard
    return start if start > current else last_row
