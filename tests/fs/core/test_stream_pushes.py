"""Pushes ahead of a sequential reader (fs/fuse/stream_pages.py, fs/fuse/pages.py) without a
kernel: which windows are queued as the reader's requests come, and how many threads push
them. The bytes pushed must be the file's own (numpy's, here)."""

from __future__ import annotations

import itertools
import sys
import threading
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.fs.core import OpenFile
from zarrfs.fs.decoded.view_files import ViewFile
from zarrfs.fs.fuse import pages
from zarrfs.fs.fuse.pages import KernelNotifier
from zarrfs.fs.fuse.stream_pages import AHEAD, GAP, PAGE, PIECE, REFILL, StreamPushes
from zarrfs.fs.inodes import InodeTable
from zarrfs.store import open_store
from zarrfs.views.ahead.policy import DecodeAhead
from zarrfs.views.ahead.sequential import SLACK
from zarrfs.views.data import DataView

MiB = 1 << 20


class Content(OpenFile):
    """A file whose bytes are all at hand (every chunk decoded)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes:
        return self.data[offset : offset + size]

    def hot_windows(self) -> list[tuple[int, int]]:
        return []


class Queued:
    """A notifier that records the windows queued, and pushes nothing."""

    def __init__(self) -> None:
        self.windows: list[tuple[int, int]] = []

    def push(self, inode: int, file: OpenFile, windows: list[tuple[int, int]]) -> None:
        self.windows += windows


def offsets(windows: list[tuple[int, int]]) -> list[int]:
    return [offset for offset, _ in windows]


def test_a_request_past_the_pages_pushed_queues_the_next_ones_at_once():
    """The reader read the pushed pages without a request: its next one lands at the end
    of what was queued, far past its last request, and still continues its run."""
    notifier = Queued()
    streams = StreamPushes(notifier, lambda: True)  # type: ignore[arg-type]
    file = Content(bytes(4 * AHEAD))
    streams.after_read(2, file, 0, MiB)
    assert offsets(notifier.windows)[0] == MiB + GAP
    assert sum(size for _, size in notifier.windows) == AHEAD - GAP - PAGE  # (the beacon page)
    notifier.windows.clear()
    # the pages up to the end of what was queued were read out of the page cache: the
    # next request asks for the first page past them
    streams.after_read(2, file, MiB + AHEAD, MiB)
    assert notifier.windows, "the request past the pushed pages queued nothing"
    assert offsets(notifier.windows)[0] == MiB + AHEAD + MiB + GAP
    assert offsets(notifier.windows)[-1] == MiB + AHEAD + MiB + AHEAD - PIECE
    # a read far behind (another reader, a seek) starts a run of its own: nothing queued
    notifier.windows.clear()
    streams.after_read(2, file, 5 * MiB, 4096)
    assert notifier.windows == []


def test_one_page_left_out_queues_the_next_windows_before_the_reader_runs_out():
    """One page REFILL before the end of what is queued is not pushed: the reader asks for
    it alone (one page), and that request queues the next windows while REFILL bytes are
    still pushed ahead of it. Every other byte up to the end is pushed, once."""
    notifier = Queued()
    streams = StreamPushes(notifier, lambda: True)  # type: ignore[arg-type]
    file = Content(bytes(4 * AHEAD))
    streams.after_read(2, file, 0, MiB)
    queued = dict(notifier.windows)
    end = MiB + AHEAD
    beacon = end - REFILL
    assert beacon not in queued and queued[beacon + PAGE] == PIECE - PAGE
    covered = sorted((offset, offset + size) for offset, size in queued.items())
    assert covered[0][0] == MiB + GAP and covered[-1][1] == end
    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered) if a[1] != beacon)
    notifier.windows.clear()
    streams.after_read(2, file, beacon, PAGE)  # the kernel asks for the page left out
    assert notifier.windows, "the page left out queued nothing"
    # what follows what was queued, no gap: its first page is the next one left out,
    # REFILL before the new end
    new_end = (beacon + PAGE + AHEAD) // PIECE * PIECE
    assert new_end - REFILL == end
    assert notifier.windows[0] == (end + PAGE, PIECE - PAGE)
    assert offsets(notifier.windows)[-1] + PIECE == new_end


@pytest.fixture
def fake_pyfuse3(monkeypatch):
    """pyfuse3's notify_store, as the kernel would take it: the bytes by inode and offset."""
    module = types.SimpleNamespace(stored={}, notify_store=None, invalidate_inode=lambda *a, **k: None)
    monkeypatch.setitem(sys.modules, "pyfuse3", module)
    return module


def test_several_threads_push_at_once(fake_pyfuse3):
    """One pushing thread copies slower than a reader copies out: while windows wait,
    PUSHERS threads push them (two at least), each notify_store on its own."""
    assert pages.PUSHERS >= 2
    data = np.random.default_rng(5).integers(0, 255, 16 * MiB, dtype=np.uint8).tobytes()
    meet = threading.Barrier(2, timeout=10)  # passed only by two pushes under way at once
    lock, busy, most = threading.Lock(), [0], [0]

    def notify_store(inode: int, offset: int, buffer: bytes) -> None:
        with lock:
            busy[0] += 1
            most[0] = max(most[0], busy[0])
        if offset < 2 * MiB:
            meet.wait()
        fake_pyfuse3.stored[offset] = bytes(buffer)
        with lock:
            busy[0] -= 1

    fake_pyfuse3.notify_store = notify_store
    notifier = KernelNotifier(InodeTable())
    try:
        notifier.push(2, Content(data), [(at, MiB) for at in range(0, len(data), MiB)])
        for _ in range(200):
            if not notifier.busy():
                break
            threading.Event().wait(0.05)
        assert not notifier.busy()
    finally:
        notifier.close()
    assert most[0] >= 2, most[0]
    assert notifier.pushed["page_cache_pushes"] == 16, notifier.pushed
    assert notifier.pushers() >= 2
    assert b"".join(fake_pyfuse3.stored[at] for at in sorted(fake_pyfuse3.stored)) == data


def test_decode_ahead_follows_a_reader_past_pages_it_read_without_requests(tmp_path):
    """Decode-ahead sees only requests: a reader that read pushed pages without any comes
    back far past its last request, inside the rows decoded ahead of it. That continues its
    run (its window is not started again, and no new reader is followed); the bytes are the
    array's."""
    values = np.arange(4096 * 1024, dtype="<f4").reshape(4096, 1024)  # 16 MiB, chunk rows of 64 KiB
    zarr.create_array(str(tmp_path / "a"), shape=values.shape, chunks=(16, 1024), dtype="<f4")[...] = values
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(8) as io_stage:
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(64 << 20))
        node = Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a")
        view = DataView(node)
        ahead = DecodeAhead(view)
        file = ViewFile(view, None, direct_io=False, keep_cache=True, ahead=ahead)
        expected = values.tobytes()
        for offset in range(0, MiB, 128 << 10):
            assert file.read(offset, 128 << 10) == expected[offset : offset + (128 << 10)]
        (stream,) = ahead._streams
        decoded = stream.decoded_rows
        jump = decoded * 64 * 1024 - MiB  # in the last MiB of the rows decoded ahead
        assert jump > MiB + SLACK  # past the plain rule's slack
        assert file.read(jump, 128 << 10) == expected[jump : jump + (128 << 10)]
        assert len(ahead._streams) == 1 and ahead._streams[0] is stream  # the same run
        assert stream.runs.start == 0 and stream.decoded_rows >= decoded


def test_a_reply_waits_for_the_windows_past_it(fake_pyfuse3):
    """A streaming reader's reply waits until the windows queued just past it are pushed
    (else it would pass the pushes and ask for their pages through the loop): the waiter
    is woken once the last of them is, not while one is being pushed; with none queued
    there (or only another file's), nothing waits."""
    gate, entered = threading.Event(), threading.Event()

    def notify_store(inode: int, offset: int, buffer: bytes) -> None:
        if offset >= 2 * MiB:
            entered.set()
            gate.wait(10)
        fake_pyfuse3.stored[offset] = bytes(buffer)

    fake_pyfuse3.notify_store = notify_store
    notifier = KernelNotifier(InodeTable())
    data = bytes(range(256)) * (32 * MiB // 256)
    woken = threading.Event()
    try:
        assert notifier.when_pushed(2, 0, 8 * MiB, woken.set) is None  # nothing queued
        notifier.push(2, Content(data), [(at, MiB) for at in range(MiB, 6 * MiB, MiB)])
        waiter = notifier.when_pushed(2, MiB, 4 * MiB, woken.set)
        assert waiter is not None
        assert notifier.when_pushed(3, MiB, 4 * MiB, woken.set) is None  # another file's
        assert entered.wait(10)
        assert not woken.is_set(), "woken while a window it waits for was being pushed"
        gate.set()
        assert woken.wait(10)
        for _ in range(400):
            if not notifier.busy():
                break
            threading.Event().wait(0.05)
        assert sorted(fake_pyfuse3.stored) == list(range(MiB, 6 * MiB, MiB))
        assert all(fake_pyfuse3.stored[at] == data[at : at + MiB] for at in fake_pyfuse3.stored)
    finally:
        gate.set()
        notifier.close()


def test_a_streaming_read_says_its_reply_may_wait():
    """after_read says whether the read continued a run that streams (its reply then waits
    for the pushes past it); a first small read in the middle does not."""
    streams = StreamPushes(Queued(), lambda: True)  # type: ignore[arg-type]
    file = Content(bytes(256 * MiB))
    assert not streams.after_read(2, file, 100 * MiB, 4096)
    assert streams.after_read(3, file, 0, MiB)
    assert streams.after_read(3, file, MiB, MiB)
