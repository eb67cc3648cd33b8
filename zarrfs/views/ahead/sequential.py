"""The one rule for "this read continues a sequential run", shared by both cores: the
decoded core reads and decodes chunks ahead of `data`, `data.npy` and the legacy views,
passthrough fetches ranges ahead of a raw file.

A read continues the current run when it starts near the run's furthest end, a little
before or after it. How near depends on who sent it: the kernel sends a file's readahead
as large requests, up to a dozen at once, so they arrive out of order and one may lag
behind or overtake the others by several of its sizes (ahead, at most `SLACK`); a small
read is a program's own, sent one at a time, so a few of its sizes suffice. Any other
read starts a new run, one far behind the frontier included (a random reader after a
whole pass is random again). A run *streams* once it began at offset 0 or
has read `STREAMING` bytes; only then is anything read ahead of it. The first read of a
run continues nothing, so nothing is read ahead of it, except a large one at offset 0:
the kernel sends `FIRST_STREAMING` bytes at once only for a program that reads that
much at a time from the start (`dd bs=1M`, a copy, a library's whole-file read), and
waiting for its reply before reading ahead costs a round trip to the store. The window
ahead doubles, from a first size to a largest, each time it is used, and starts again
with each run.

A run's owner may make bytes ahead of it readable without any request (pages pushed into
the kernel's page cache, fs/fuse/stream_pages.py): the reader then reads past them unseen,
and its next request lands far past the furthest end. Reads up to `reach` (where those
bytes end) continue the run."""

from __future__ import annotations

from typing import NamedTuple

SLACK = 2 << 20  # at most this far past a run's furthest end, a read still continues it
KERNEL_READ = 64 << 10  # reads at least this large may be the kernel's readahead ...
KERNEL_READS = 16  # ... and continue a run within this many of their size of its end
PROGRAM_READS = 4  # smaller reads within this many
STREAMING = 1 << 20  # a run that has read this much (or began at offset 0) streams
FIRST_STREAMING = 512 << 10  # a first read this large at offset 0 is read ahead of at once


class Step(NamedTuple):
    """What one read was."""

    first: bool  # the file's first read: where a reader starts says nothing of how it goes on
    continues: bool  # it continued the run before it
    ahead: bool  # it continued a run that streams, or began one: read ahead of `end`


class ReadRuns:
    """One file's reads as runs. Not thread-safe: the caller holds its own lock (it
    usually guards what was read ahead too)."""

    def __init__(self, first_window: int, largest_window: int) -> None:
        self.first_window = first_window
        self.largest_window = largest_window
        self.window = first_window  # how far ahead to read next
        self.start: int | None = None  # where the current run began
        self.furthest = 0  # where the furthest read of the run ended
        self.reach = 0  # reads starting up to here continue the run too (see above; the owner's)
        self._bytes = 0  # bytes read in the run (not its span: random reads may land close)

    def continues(self, offset: int, end: int) -> bool:
        """Whether a read of [offset, end) would continue the current run."""
        size = end - offset
        near = (KERNEL_READS if size >= KERNEL_READ else PROGRAM_READS) * size
        return self.start is not None and self.furthest - near <= offset <= max(
            self.furthest + min(SLACK, near), self.reach
        )

    @property
    def streams(self) -> bool:
        """The run began at offset 0 or has read STREAMING bytes: it is read ahead of."""
        return self.start == 0 or self._bytes >= STREAMING

    def follow(self, offset: int, end: int) -> Step:
        """Track the read of [offset, end)."""
        if self.continues(offset, end):
            return self.continued(offset, end)
        first = self.start is None
        self.start, self.furthest, self._bytes, self.reach = offset, end, end - offset, 0
        self.window = self.first_window
        return Step(first, False, offset == 0 and end - offset >= FIRST_STREAMING)

    def continued(self, offset: int, end: int) -> Step:
        """Track the read of [offset, end), which continues the run (`continues` said so:
        the caller asked it, under the same lock)."""
        self._bytes += end - offset
        self.furthest = max(self.furthest, end)
        if self.start == 0 or self._bytes >= STREAMING or (offset == 0 and end - offset >= FIRST_STREAMING):
            return _ON_AHEAD
        return _ON

    def grow(self) -> int:
        """The window, doubled for next time (up to the largest)."""
        window = self.window
        self.window = min(2 * window, self.largest_window)
        return window


_ON_AHEAD = Step(False, True, True)  # a read that continues its run (made once: every read is one)
_ON = Step(False, True, False)
