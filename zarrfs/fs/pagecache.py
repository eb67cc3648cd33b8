"""Handing windows of files that random reads keep returning to over to the kernel's page
cache (FUSE notify_store), from one thread of its own: a push never waits on the trio
loop, and the loop never waits on a push. (While pushes are queued, the loop hands this
thread the GIL after each read it serves from the chunk cache; otherwise a busy loop
would keep the GIL, and the pushes, to itself.)"""

from __future__ import annotations

import logging
import threading
from collections import deque

import pyfuse3

from ..views.base import FileView

log = logging.getLogger("zarrfs")

# windows waiting beyond this many are dropped: the reads they would have served still
# come through as requests
MAX_QUEUED = 1024


class PagePusher:
    """`push` is called on the trio thread and never blocks; the pushing thread is started
    on first use (after the daemon has forked) and stopped by `close`."""

    def __init__(self) -> None:
        self._queue: deque = deque()
        self._queued: set[tuple[int, int]] = set()
        self._busy = 0  # windows queued or being pushed
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.pushed = {"page_cache_pushes": 0, "page_cache_pushed_bytes": 0}

    def push(self, inode: int, view: FileView, windows: list[tuple[int, int]]) -> None:
        with self._ready:
            if self._closed:
                return
            for offset, size in windows:
                if (inode, offset) in self._queued or len(self._queue) >= MAX_QUEUED:
                    continue
                self._queued.add((inode, offset))
                self._queue.append((inode, view, offset, size))
                self._busy += 1
            self._ready.notify()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="zarrfs-pages", daemon=True)
                self._thread.start()

    def busy(self) -> bool:
        """Whether a push is queued or under way."""
        return self._busy > 0

    def close(self) -> None:
        """Drop what is queued and let the thread end. Not waited for: a push under way
        may be waiting on a page that a read holds, and once the session has stopped that
        read is answered only by the unmount that follows."""
        with self._ready:
            self._closed = True
            self._busy -= len(self._queue)
            self._queue.clear()
            self._queued.clear()
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if self._closed:
                    return
                inode, view, offset, size = self._queue.popleft()
                self._queued.discard((inode, offset))
            pushed = 0
            try:
                pushed = store_window(inode, view, offset, size)
            except Exception as exc:  # the reads go on through requests
                log.debug("page cache push, inode %d at %d: %s", inode, offset, exc)
            finally:
                with self._ready:
                    self._busy -= 1
                    if pushed:
                        self.pushed["page_cache_pushes"] += 1
                        self.pushed["page_cache_pushed_bytes"] += pushed


def store_window(inode: int, view: FileView, offset: int, size: int) -> int:
    """Blocking: push a window whose chunks are decoded into the kernel's page cache.
    Windows start on a page boundary and end on one or at the end of the file, so every
    page pushed is whole (a partial page would not be used). A window whose chunks were
    replaced meanwhile has its file's pages dropped again. Returns the bytes pushed."""
    generation = view.generation()
    data = view.peek(offset, size)
    if data is None or len(data) != size:  # a chunk was evicted meanwhile
        return 0
    pyfuse3.notify_store(inode, offset, data)
    log.debug("pushed inode %d [%d, %d) to the page cache", inode, offset, offset + size)
    if view.generation() != generation:
        pyfuse3.invalidate_inode(inode, attr_only=False)
        return 0
    return size
