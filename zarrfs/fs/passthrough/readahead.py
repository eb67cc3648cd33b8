"""Reads of a stored value as ranged gets (passthrough mode, docs/semantics.md): runs of
reads (views/ahead/sequential.py) fetch segments that grow, and streaming runs get segments
fetched ahead, within the mount's read-ahead share of its memory budget."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Protocol

from ...store import KeyNotFoundError
from ...views.ahead.sequential import SLACK, ReadRuns

# A run of reads (views/ahead/sequential.py) starts with a get of READAHEAD_FIRST bytes (at least):
# the kernel splits larger reads into 128 KiB requests (plus a page when unaligned), which
# then share it. Streaming runs get segments fetched ahead of them, doubling up to the
# largest, so that throughput on object stores is not bound by per-request latency.
# (Large segments also suit stores whose cost is per request rather than per byte, as
# moto's is.)
READAHEAD_FIRST = 512 << 10
READAHEAD_LARGEST = 32 << 20
READAHEAD_SEGMENTS = 2  # segments in flight ahead of a sequential reader


class StoredValue(Protocol):
    """What is read: the value at `key`, of `stored_size` bytes as stored."""

    key: str
    stored_size: int | None

    def get(self, key: str, start: int, end: int) -> bytes | None: ...


class ReadaheadBudget:
    """The bytes that all readers of a mount together may hold ahead of their readers."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, nbytes: int, force: bool = False) -> bool:
        with self._lock:
            if not force and self.used + nbytes > self.limit:
                return False
            self.used += nbytes
            return True

    def give(self, nbytes: int) -> None:
        with self._lock:
            self.used -= nbytes


@dataclass
class _Segment:
    start: int
    end: int
    data: Future[bytes]


class RangeReader:
    """One handle's reads of a stored value, as runs (views/ahead/sequential.py): a read that starts
    a new run drops the old run's segments. Reads are served from segments, ranged gets of
    READAHEAD_FIRST bytes at first, doubling up to READAHEAD_LARGEST. Once a run streams,
    READAHEAD_SEGMENTS segments are fetched ahead of it in the background, within the
    mount's ReadaheadBudget.

    Safe for concurrent reads (the kernel sends a file's readahead requests in parallel):
    segments are futures, fetched once and waited on by every read that needs them.
    """

    def __init__(self, file: StoredValue, executor: Executor, budget: ReadaheadBudget) -> None:
        self._file = file
        self._executor = executor
        self._budget = budget
        self._lock = threading.Lock()
        self._segments: list[_Segment] = []  # sorted by start; their bytes are budgeted
        self._runs = ReadRuns(READAHEAD_FIRST, READAHEAD_LARGEST)

    def read(self, offset: int, size: int) -> bytes:
        end = offset + size
        pieces: list[tuple[int, _Segment]] = []
        fetch_now: _Segment | None = None
        with self._lock:
            step = self._runs.follow(offset, end)
            if not step.continues:
                self._drop(lambda segment: True)
            position = offset
            for segment in self._segments:
                if position >= end:
                    break
                if segment.start <= position < segment.end:
                    pieces.append((position, segment))
                    position = segment.end
            if position < end:  # what no segment covers is fetched now, in this thread
                stop = max(end, min(position + self._runs.grow(), self._limit()))
                fetch_now = _Segment(position, stop, Future())
                pieces.append((position, fetch_now))
                self._add(fetch_now)
            self._drop(lambda s: s.end + SLACK <= offset)
            if step.ahead:
                self._prefetch(end)
            key = self._file.key
        if fetch_now is not None:
            self._fetch(fetch_now, key)
        return self._assemble(pieces, offset, end)

    def close(self) -> None:
        with self._lock:
            self._drop(lambda segment: True)

    def _limit(self) -> int:
        return self._file.stored_size or 0

    def _prefetch(self, end: int) -> None:
        """Keep READAHEAD_SEGMENTS segments in flight ahead of a sequential reader."""
        ahead = sum(1 for s in self._segments if s.end > end)
        last = max([end] + [s.end for s in self._segments])
        limit = self._limit()
        while ahead < READAHEAD_SEGMENTS and last < limit:
            stop = min(last + self._runs.window, limit)
            if not self._budget.take(stop - last):
                return
            self._runs.grow()
            segment = _Segment(last, stop, self._executor.submit(self._get, self._file.key, last, stop))
            self._add(segment, budgeted=True)
            ahead += 1
            last = stop

    def _add(self, segment: _Segment, budgeted: bool = False) -> None:
        if not budgeted:  # needed now: taken even beyond the limit
            self._budget.take(segment.end - segment.start, force=True)
        self._segments.append(segment)
        self._segments.sort(key=lambda s: s.start)

    def _drop(self, condition: Callable[[_Segment], bool]) -> None:
        keep = []
        for segment in self._segments:
            if condition(segment) or (segment.data.done() and segment.data.exception()):
                self._budget.give(segment.end - segment.start)
            else:
                keep.append(segment)
        self._segments = keep

    def _fetch(self, segment: _Segment, key: str) -> None:
        try:
            segment.data.set_result(self._get(key, segment.start, segment.end))
        except BaseException as exc:
            segment.data.set_exception(exc)

    def _get(self, key: str, start: int, end: int) -> bytes:
        value = self._file.get(key, start, end)
        if value is None:
            raise KeyNotFoundError("no such key", key)
        return value

    @staticmethod
    def _assemble(pieces: list[tuple[int, _Segment]], offset: int, end: int) -> bytes:
        out = []
        for position, segment in pieces:
            data = segment.data.result()
            chunk = memoryview(data)[position - segment.start : end - segment.start]
            out.append(chunk)
            if segment.start + len(data) < min(segment.end, end):
                break  # the value ends inside this segment
        return b"".join(out)
