"""Pages pushed into the kernel's page cache ahead of sequential readers, so that their
bytes are copied into it by the notifier's threads rather than by the FUSE loop.

Every read reply is copied by the kernel into the page cache in the thread that writes
it, the FUSE loop, one at a time: at 1 MiB requests that copy, and the request's round
trip, are most of what the loop does for a sequential reader. Once a file's reads form a
run that streams (`zarrfs/views/ahead/sequential.py`), the windows past the run's furthest
request whose chunks are already decoded are handed to the kernel (`notify_store`, by the
notifier's threads, `pages.py`), `AHEAD` far at first and twice as far each time the
reader comes through them (up to `AHEAD_MOST`); the reader then finds them cached and
sends no request for them. One page half that reach before the end of what is queued is
left out: the reader's request for it (one page) says where it is, and queues the next
windows while half the reach is still pushed ahead of it. Any request up to the end of
what was queued (the reader may have passed pushes still queued) continues the run and
queues the next windows at once. The reply to a streaming read waits (files.py) until
the windows `LEAD` past it are pushed: a reader let go at once copies pages out faster
than they are pushed, and would ask for each one it reached first through the loop.

Pushes start at the first whole window past the request (the reply's own pages are its
own). A window the reader's requests have reached by the time its turn comes is skipped:
a push of a page a read holds waits for the read's reply and copies the page a second
time. A window whose chunks are not decoded yet is skipped, and queued again by a later
request; the last window of each batch is tried first, so that on a cold read, bound by
decoding, the page left out is pushed with the rest where the windows past it are not
decoded yet (its request would queue nothing), and the request where the decoded rows
end goes straight to a worker (`at_hand`)."""

from __future__ import annotations

import mmap
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import overload

from ...views.ahead.sequential import ReadRuns
from ..core import NotAtHand, OpenFile
from .pages import KernelNotifier

AHEAD = 64 << 20  # pushed ahead of a sequential reader's furthest request, at first ...
AHEAD_MOST = 256 << 20  # ... doubling each time the reader comes through them, up to this
PIECE = 1 << 20  # one notify_store
LEAD = 32 << 20  # a streaming reader's reply waits until no window this far past it is still to push ...
LEAD_WAIT = 0.2  # ... or this many seconds (a push may wait on a page another request holds)
STREAMS = 64  # files followed at once (the least recently read forgotten)
PAGE = mmap.PAGESIZE


class _Stream:
    """One file's sequential run, as far as pushes go."""

    def __init__(self) -> None:
        self.runs = ReadRuns(PIECE, PIECE)
        self.queued_to = 0  # windows before this are queued (or were skipped)
        self.end: float = float("inf")  # where a push found the file's end
        self.ahead = AHEAD  # how far past the furthest request the next windows reach
        self.beacon = -1  # the page left out (none: -1)
        self.undecoded: float = float("inf")  # a push found what follows here not decoded yet


class _Windows(Sequence[tuple[int, int]]):
    """The windows [start, end) of a stream, PIECE each, made as they are taken: the one
    at the stream's beacon lacks its first page."""

    def __init__(self, stream: _Stream, start: int, end: int) -> None:
        self._stream, self._start, self._count = stream, start, (end - start) // PIECE

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[int, int]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, int] | Sequence[tuple[int, int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if not 0 <= i < self._count:
            raise IndexError(i)
        at = self._start + i * PIECE
        return (at + PAGE, PIECE - PAGE) if at == self._stream.beacon else (at, PIECE)


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
        try:
            data = self._file.read(offset, size, wait=False, track=False)
        except NotAtHand:
            stream.queued_to = min(stream.queued_to, offset)  # not decoded yet: queued again later
            stream.undecoded = min(stream.undecoded, offset)
            if offset > stream.beacon:
                # (the last window, pushed first) nothing past the page left out can be
                # pushed yet: its request would queue nothing, while the reader's request
                # where the decoded rows end, which waits for the next ones, queues the
                # next windows. So it is pushed with the rest
                stream.beacon = -1
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
        pushes ahead of it: `LEAD`)."""
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
        stream.undecoded = float("inf")  # (found again by the next pushes)
        if not step.continues:  # a new run: what was queued for another is no guide
            stream.queued_to, stream.end, stream.ahead, stream.beacon = 0, float("inf"), AHEAD, -1
        if not step.ahead or size == 0:
            return False
        furthest = stream.runs.furthest
        # (from the first whole window past the request: the reply's pages are its own)
        start = max(stream.queued_to, furthest + PIECE - 1) // PIECE * PIECE
        if start - furthest >= stream.ahead // 2 or not self._may_push():
            return True
        if stream.queued_to > furthest:  # the reader came through pushes: reach further
            stream.ahead = min(2 * stream.ahead, AHEAD_MOST)
        # where the last window ends: the reader may read up to it unseen
        end = (furthest + stream.ahead) // PIECE * PIECE
        stream.queued_to = end
        # one page half the windows' reach before their end is left out: the reader's
        # request for it (a page) queues the next windows while it still has that much
        # pushed ahead of it
        stream.beacon = max(start, (end - stream.ahead // 2) // PIECE * PIECE)
        self._notifier.push(inode, _Ahead(file, stream), _Windows(stream, start, end), probe=True)
        return True

    def at_hand(self, inode: int, offset: int) -> bool:
        """Whether a read at `offset` may be answered from what is decoded: not where a
        push found a sequential reader's next rows still being decoded (the read waits
        for them in a worker; trying it here first costs the loop a failed read)."""
        stream = self._streams.get(inode)
        return stream is None or offset < stream.undecoded
