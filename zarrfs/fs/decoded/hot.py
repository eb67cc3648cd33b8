"""Which windows of `data` or `data.npy` random readers keep coming back to, so that the
adapter hands them to the kernel's page cache whole and later reads in them never reach
the daemon (much as the kernel's readahead serves a sequential reader of a plain file).

A window counts once reads took HOT_AFTER bytes of it (pushing one costs the daemon about
what serving a few 4 KiB requests does). Once pushed, a window must draw REPUSH_AFTER
more bytes of reads (its pages evicted by the kernel) before it is pushed again."""

from __future__ import annotations

import threading

HOT_WINDOW = 1 << 20
HOT_READ = 64 << 10  # larger reads come from readahead, on behalf of sequential readers
HOT_AFTER = 16 << 10
REPUSH_AFTER = 32 << 10
HOT_WINDOWS_TRACKED = 1 << 16


class HotWindows:
    """Per file (shared by its opens); thread-safe."""

    def __init__(self, file_size: int) -> None:
        self._size = file_size
        self._random_bytes: dict[int, int] = {}  # per window: bytes randomly read (less credit)
        self._hot: list[int] = []
        self._lock = threading.Lock()

    def count(self, offset: int, size: int) -> None:
        """A random read of `size` bytes at `offset` was served."""
        if size > HOT_READ:
            return
        window = offset // HOT_WINDOW * HOT_WINDOW
        with self._lock:
            total = self._random_bytes.get(window, 0) + size
            if total < HOT_AFTER:
                if len(self._random_bytes) >= HOT_WINDOWS_TRACKED:
                    self._random_bytes.clear()
                self._random_bytes[window] = total
            else:
                self._random_bytes[window] = HOT_AFTER - REPUSH_AFTER
                self._hot.append(window)

    def take(self) -> list[tuple[int, int]]:
        """(offset, size) windows that became hot since the last call."""
        if not self._hot:
            return []
        with self._lock:
            hot, self._hot = self._hot, []
        return [(w, min(HOT_WINDOW, self._size - w)) for w in hot]
