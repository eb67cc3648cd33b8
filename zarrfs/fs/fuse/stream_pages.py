"""Pages pushed into the kernel's page cache ahead of sequential readers, so that their
bytes are copied into it by the notifier's thread rather than by the FUSE loop.

Every read reply is copied by the kernel into the page cache in the thread that writes
it, the FUSE loop, one at a time: at 1 MiB requests that copy, and the request's round
trip, are most of what the loop does for a sequential reader. Once a file's reads form a
run that streams (`zarrfs/views/ahead/sequential.py`), the windows ahead of the run's furthest
request whose chunks are already decoded are handed to the kernel (`notify_store`, by the
notifier's thread, `pages.py`); the reader then finds them cached and sends no request
for them. One page `REFILL` before the end of what is queued is left out: the reader's
request for it (one page) says where it is, and queues the next windows while `REFILL`
bytes are still pushed ahead of it, so that a reader faster than the pushes rarely runs
out of them. Any request up to the end of what was queued (the reader may have passed
pushes still queued) continues the run and queues the next windows at once. The reply to
a streaming read waits (files.py) until the windows `LEAD` past it are pushed, at most
`LEAD_WAIT`: a reader let go at once copies pages out faster than they are pushed, and
would ask for each one it reached first through the loop. A held reader sends no request,
so decode-ahead follows the pushes too (`OpenFile.pushed`).

Pushes start `GAP` past the furthest request: the kernel's own readahead may already have
asked for (and locked) the pages before that, and a push of a page a read holds waits for
the read's reply and copies the page a second time. A window the reader's requests have
reached by the time its turn comes is skipped for the same reason. A window whose chunks
are not decoded yet is skipped, and queued again by a later request."""

from __future__ import annotations

import mmap
from collections import OrderedDict
from collections.abc import Callable

from ...views.ahead.sequential import ReadRuns
from ..core import NotAtHand, OpenFile
from .pages import KernelNotifier

AHEAD = 64 << 20  # pushed ahead of a sequential reader's furthest request, at most
GAP = 2 << 20  # pushes start this far past the furthest request
PIECE = 1 << 20  # one notify_store
LEAD = 32 << 20  # a streaming reader's reply waits until no window this far past it is still to push ...
LEAD_WAIT = 0.2  # ... or this many seconds (a push may wait on a page another request holds)
REFILL = AHEAD // 2  # new windows are queued once less than this is queued ahead
STREAMS = 64  # files followed at once (the least recently read forgotten)
PAGE = mmap.PAGESIZE


class _Stream:
    """One file's sequential run, as far as pushes go."""

    def __init__(self) -> None:
        self.runs = ReadRuns(PIECE, PIECE)
        self.queued_to = 0  # windows before this are queued (or were skipped)
        self.end: float = float("inf")  # where a push found the file's end


class _Ahead(OpenFile):
    """The file as the notifier sees it for a window pushed ahead: nothing to push once
    the reader's requests reached the window."""

    def __init__(self, file: OpenFile, stream: _Stream) -> None:
        self._file, self._stream = file, stream

    def generation(self) -> int:
        return self._file.generation()

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes | memoryview:
        """The notifier's read of a window (never waiting, never tracked); NotAtHand:
        nothing to push."""
        stream = self._stream
        if stream.runs.furthest > offset or offset >= stream.end:
            raise NotAtHand  # asked for meanwhile (answered by a request), or past the end
        # decoding keeps ahead of the pushes, not only of the reader's requests: a window
        # whose turn came counts as read for decode-ahead, whether decoded yet or not
        self._file.pushed(offset, size)
        try:
            data = self._file.read(offset, size, wait=False, track=False)
        except NotAtHand:
            stream.queued_to = min(stream.queued_to, offset)  # not decoded yet: queued again later
            raise
        if len(data) < size:
            stream.end = offset + len(data)  # (a last window that is not whole is not pushed)
        return data


class StreamPushes:
    """`after_read` is called on the FUSE loop for each read answered; it queues pushes
    and never blocks. `may_push` says whether pushes may start now (no writer)."""

    def __init__(self, notifier: KernelNotifier, may_push: Callable[[], bool]) -> None:
        self._notifier = notifier
        self._may_push = may_push
        self._streams: OrderedDict[int, _Stream] = OrderedDict()

    def after_read(self, inode: int, file: OpenFile, offset: int, size: int) -> bool:
        """Whether the read continued a run that streams (its reply may wait for the
        pushes ahead of it, `LEAD`: decode-ahead follows the pushes, so a reader held on
        a reply does not hold decoding back)."""
        if file.direct_io or type(file).hot_windows is OpenFile.hot_windows:
            return False  # no page cache, or a file that never hands its pages over
        stream = self._streams.get(inode)
        if stream is None:
            stream = self._streams[inode] = _Stream()
            if len(self._streams) > STREAMS:
                self._streams.popitem(last=False)
        else:
            self._streams.move_to_end(inode)
        # the reader reads what was pushed without a request: its next one, anywhere up
        # to the end of what was queued, continues the run (rather than wait for another)
        stream.runs.reach = stream.queued_to
        step = stream.runs.follow(offset, offset + size)
        if not step.continues:  # a new run: what was queued for another is no guide
            stream.queued_to, stream.end = 0, float("inf")
        if not step.ahead or size == 0:
            return False
        furthest = stream.runs.furthest
        start = max(stream.queued_to, furthest + GAP) // PIECE * PIECE
        if start - furthest >= REFILL or not self._may_push():
            return True
        end = (furthest + AHEAD) // PIECE * PIECE  # where the last window ends: the reader may read up to it unseen
        stream.queued_to = end
        # one page REFILL before the end is left out: the reader's request for it (a page)
        # queues the next windows while it still has REFILL bytes pushed ahead of it
        beacon = (end - REFILL) // PIECE * PIECE
        windows = [(at + PAGE, PIECE - PAGE) if at == beacon else (at, PIECE) for at in range(start, end, PIECE)]
        self._notifier.push(inode, _Ahead(file, stream), windows)
        return True
