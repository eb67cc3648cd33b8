"""Telling the kernel about content, from one thread of its own: windows of files that
random reads keep returning to are handed to its page cache (notify_store), and files
that changed are dropped from it (invalidate_inode). Either call can wait on a page
that a read in flight holds, so neither is ever made on the trio thread, and the trio
thread never waits on them. (While pushes are queued, the loop hands this thread the
GIL after each read it serves at once; a busy loop would otherwise keep it.) pyfuse3 is
imported by that thread: the notifier is made before the daemon has imported it.

Pushes ahead of a sequential reader (stream_pages.py) are copied by the kernel at about
half the speed the reader copies them out (a page cache page found or made for each, on
a thread that shares the cores with the decoding): one thread pushing falls behind the
reader, which then asks for the pages the push has not reached, through the FUSE loop.
So while several windows are queued, up to PUSHERS threads push them at once (the FUSE
device takes writes from several threads); forgets stay with the first one, in order."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ..core import NotAtHand
from ..inodes import InodeTable

if TYPE_CHECKING:
    from ..core import OpenFile

log = logging.getLogger(__name__)

# windows waiting beyond this many are dropped: the reads they would have served still
# come through as requests
MAX_QUEUED = 1024
# threads pushing windows at once: a second keeps pushes ahead of a reader on 2 cores;
# more on more cores (each copies on a core of its own)
PUSHERS = max(2, min(4, (os.cpu_count() or 2) // 4))


class KernelNotifier:
    """`push` and `forget_path` never block; the threads are started on first use (after
    the daemon has forked; a second one once two windows wait) and stopped by `close`."""

    def __init__(self, inodes: InodeTable) -> None:
        self._inodes = inodes
        self._pushes: deque[tuple[int, OpenFile, int, int]] = deque()
        self._queued: set[tuple[int, int]] = set()
        self._pushing: list[tuple[int, int]] = []  # (inode, offset) of the windows being pushed
        self._waiters: list[_Waiter] = []
        self._forgets: deque[tuple[list[int], tuple[int, str] | None]] = deque()
        self._busy = 0  # windows queued or being pushed
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.pushed = {"page_cache_pushes": 0, "page_cache_pushed_bytes": 0}

    def push(self, inode: int, file: OpenFile, windows: list[tuple[int, int]]) -> None:
        with self._ready:
            if self._closed:
                return
            for offset, size in windows:
                if (inode, offset) in self._queued or len(self._pushes) >= MAX_QUEUED:
                    continue
                self._queued.add((inode, offset))
                self._pushes.append((inode, file, offset, size))
                self._busy += 1
            self._wake()

    def forget_path(self, path: str, names: bool = False) -> None:
        """The files at and below `path` changed: the kernel drops their pages and
        attributes; with `names`, also what it knows of the name `path` in its parent
        (a node appeared there that the mount did not make by that name)."""
        inodes = self._inodes.under(path)
        parent = None
        if names and path:
            directory, _, name = path.rpartition("/")
            known = self._inodes.known(directory)  # a directory the kernel does not know caches no name
            parent = None if known is None else (known, name)
        if not inodes and parent is None:
            return
        with self._ready:
            if self._closed:
                return
            self._forgets.append((inodes, parent))
            self._wake()

    def when_pushed(self, inode: int, start: int, end: int, wake: Callable[[], None]) -> _Waiter | None:
        """Call `wake` (on a pushing thread) once no window of `inode` starting in [start,
        end) is queued or being pushed; None where none is now (nothing to wait for).
        Otherwise the waiter, for `unwait` once it is no longer waited for."""
        with self._ready:
            if not self._pending(inode, start, end):
                return None
            waiter = _Waiter(inode, start, end, wake)
            self._waiters.append(waiter)
            return waiter

    def unwait(self, waiter: _Waiter) -> None:
        with self._ready, contextlib.suppress(ValueError):
            self._waiters.remove(waiter)

    def _pending(self, inode: int, start: int, end: int) -> bool:
        """(Under _ready.) Whether a window of `inode` starting in [start, end) is queued
        or being pushed."""
        return any(at == inode and start <= offset < end for at, offset in self._queued) or any(
            at == inode and start <= offset < end for at, offset in self._pushing
        )

    def busy(self) -> bool:
        """Whether a push is queued or under way."""
        return self._busy > 0

    def close(self) -> None:
        """Drop what is queued and let the thread end. Not waited for: a call under way
        may be waiting on a page that a read holds, and once the session has stopped that
        read is answered only by the unmount that follows."""
        with self._ready:
            self._closed = True
            self._busy -= len(self._pushes)
            self._pushes.clear()
            self._queued.clear()
            self._forgets.clear()
            waiters, self._waiters = self._waiters, []
            self._ready.notify_all()
        for waiter in waiters:
            waiter.wake()

    def _wake(self) -> None:
        """(Under _ready.) Wake a thread; start one where none runs, and more pushers
        (up to PUSHERS) while more windows wait than there are threads."""
        self._ready.notify()
        while not self._threads or PUSHERS > len(self._threads) < len(self._pushes):
            started = len(self._threads)
            name = "zarrfs-kernel" if not started else f"zarrfs-kernel_{started}"
            thread = threading.Thread(target=self._run, args=(not started,), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()

    def pushers(self) -> int:
        """The threads started (the first one's forgets included)."""
        return len(self._threads)

    def _run(self, forgets: bool) -> None:
        while True:
            with self._ready:
                while not self._pushes and not (forgets and self._forgets) and not self._closed:
                    self._ready.wait()
                if self._closed:
                    return
                forget = self._forgets.popleft() if forgets and self._forgets else None
                if forget is None:
                    inode, file, offset, size = self._pushes.popleft()
                    self._queued.discard((inode, offset))
                    self._pushing.append((inode, offset))
            if forget is not None:
                _forget(*forget)
                continue
            pushed, woken = 0, []
            try:
                pushed = _store_window(inode, file, offset, size)
            except Exception as exc:  # the reads go on through requests
                log.debug("page cache push, inode %d at %d: %s", inode, offset, exc)
            finally:
                with self._ready:
                    self._busy -= 1
                    if pushed:
                        self.pushed["page_cache_pushes"] += 1
                        self.pushed["page_cache_pushed_bytes"] += pushed
                    self._pushing.remove((inode, offset))
                    if self._waiters:
                        woken = [
                            w for w in self._waiters if w.inode == inode and not self._pending(inode, w.start, w.end)
                        ]
                        for waiter in woken:
                            self._waiters.remove(waiter)
                for waiter in woken:
                    waiter.wake()


class _Waiter:
    """Who waits for the windows of `inode` starting in [start, end) to be pushed."""

    __slots__ = ("end", "inode", "start", "wake")

    def __init__(self, inode: int, start: int, end: int, wake: Callable[[], None]) -> None:
        self.inode, self.start, self.end, self.wake = inode, start, end, wake


def _forget(inodes: list[int], parent: tuple[int, str] | None) -> None:
    import pyfuse3

    for inode in inodes:
        with contextlib.suppress(OSError):  # the kernel does not know this inode (any more)
            pyfuse3.invalidate_inode(inode, attr_only=False)
    if parent is not None:
        with contextlib.suppress(OSError):
            pyfuse3.invalidate_entry_async(parent[0], parent[1].encode(), ignore_enoent=True)


def _store_window(inode: int, file: OpenFile, offset: int, size: int) -> int:
    """Push a window whose chunks are decoded into the kernel's page cache. Windows start
    on a page boundary and end on one or at the end of the file, so every page pushed is
    whole (a partial page would not be used). A window whose content was replaced
    meanwhile has its file's pages dropped again. Returns the bytes pushed."""
    import pyfuse3

    generation = file.generation()
    try:
        data = file.read(offset, size, wait=False, track=False)
    except NotAtHand:  # a chunk was evicted meanwhile (or nothing is left to push)
        return 0
    if len(data) != size:
        return 0
    # pyfuse3 takes any buffer (PyObject_GetBuffer); its stub says bytes
    pyfuse3.notify_store(inode, offset, cast(bytes, data))
    log.debug("pushed inode %d [%d, %d) to the page cache", inode, offset, offset + size)
    if file.generation() != generation:
        pyfuse3.invalidate_inode(inode, attr_only=False)
        return 0
    return size
