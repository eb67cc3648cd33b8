"""`data.jsonl`: arrays of variable-length strings or bytes, one JSON value per element in
C order (bytes as base64 strings). Its length is known only once every element is
rendered, so it is not told: the size is 0, as /proc files show theirs, and the file is
read to its end (direct I/O). A read renders the elements it covers, a block at a time."""

from __future__ import annotations

import base64
import bisect
import json
import math
import threading
from typing import Any

from ..format import Array
from .base import FileView
from .layout import flat_range_boxes

# elements rendered at a time: what a read holds is a block's lines (and the chunks they
# come from), whatever the array's size
BLOCK_ELEMENTS = 4096


def _json_value(value: Any) -> str:
    if isinstance(value, bytes):
        value = base64.standard_b64encode(value).decode()
    return json.dumps(value, ensure_ascii=False)


class JsonLinesView(FileView):
    """Blocks of BLOCK_ELEMENTS elements, C order, rendered when a read reaches them. The
    byte offset at which each block rendered so far ends is kept (8 bytes a block), so a
    read at an offset renders the blocks before it once, and a reader that goes on where
    it stopped renders each block once; the last block rendered is kept for the reads
    that follow it (the kernel asks 128 KiB at a time). Thread-safe: renders under a lock."""

    def __init__(self, array: Array) -> None:
        self.array = array
        self._count = math.prod(array.shape)
        self._blocks = -(-self._count // BLOCK_ELEMENTS)
        self._ends: list[int] = []  # where block i ends in the file, for the blocks rendered so far
        self._kept: tuple[int, bytes] | None = None  # (block, its lines): the last rendered
        self._lock = threading.Lock()

    def size(self) -> int:
        return 0  # unknown until every element is rendered: read to the end

    def read(self, offset: int, size: int) -> bytes:
        with self._lock:
            block = self._block_at(offset)
            parts: list[bytes] = []
            end = offset + size
            while block < self._blocks and (not parts or self._start(block) < end):
                lines = self._lines(block)
                start = self._start(block)
                parts.append(lines[max(0, offset - start) : end - start])
                block += 1
            return b"".join(parts)

    def read_cached(self, offset: int, size: int) -> bytes | None:
        kept = self._kept  # (one tuple: read without the lock)
        if kept is None or size <= 0:
            return None
        block, lines = kept
        start = self._ends[block - 1] if block else 0
        if not start <= offset or offset + size > start + len(lines):
            return None
        return lines[offset - start : offset - start + size]

    # ---------------------------------------------------------------- blocks
    def _start(self, block: int) -> int:
        return self._ends[block - 1] if block else 0

    def _block_at(self, offset: int) -> int:
        """The block holding byte `offset` (the number of blocks past the end), rendering
        the blocks before it that were not yet."""
        while (not self._ends or self._ends[-1] <= offset) and len(self._ends) < self._blocks:
            self._lines(len(self._ends))
        return bisect.bisect_right(self._ends, offset)

    def _lines(self, block: int) -> bytes:
        kept = self._kept
        if kept is not None and kept[0] == block:
            return kept[1]
        first = block * BLOCK_ELEMENTS
        last = min(first + BLOCK_ELEMENTS, self._count)
        if self.array.shape:
            values = [
                v for box in flat_range_boxes(self.array.shape, first, last) for v in self.array.read(box).reshape(-1)
            ]
        else:
            values = [self.array.read(...)[()]]
        lines = "".join(_json_value(v) + "\n" for v in values).encode()
        if block == len(self._ends):
            self._ends.append(self._start(block) + len(lines))
        self._kept = (block, lines)
        return lines


def jsonl_view(array: Array) -> JsonLinesView:
    return JsonLinesView(array)
