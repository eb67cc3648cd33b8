"""Decode-ahead for a reader whose pages are pushed into the kernel's page cache
(fs/fuse/stream_pages.py): it reads most of the file without requests, so decode-ahead
sees a few requests far apart, each where the rows decoded ahead of it end
(views/ahead/sequential.py's `reach`). It is still one reader, and its window grows with
the bytes it went through, not with its requests: as large, request for request, as the
window of a reader that asked for every page (bench/remote.py's `dd` on S3 had few chunks
in flight while its window doubled once per 32 MiB pushed). The bytes are numpy's."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.fs.decoded.view_files import ViewFile
from zarrfs.store import open_store
from zarrfs.views.ahead import policy
from zarrfs.views.ahead.policy import DecodeAhead
from zarrfs.views.data import DataView

MiB = 1 << 20
ROW = 256 << 10  # a chunk row of `data`: chunks of (64, 1024) float32
SHARE = 16 * MiB  # the window's share of a 64 MiB cache


@pytest.fixture
def opened(tmp_path, monkeypatch):
    monkeypatch.setattr(policy, "AHEAD_FIRST", 1 * MiB)  # windows of 1, 2, 4, 8, 16 MiB
    values = np.random.default_rng(3).standard_normal((16384, 1024)).astype("<f4")  # 64 MiB, 256 rows
    zarr.create_array(str(tmp_path / "a"), shape=values.shape, chunks=(64, 1024), dtype="<f4")[...] = values
    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(8) as io_stage:

        def open_file() -> tuple[ViewFile, DecodeAhead]:
            context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(4 * SHARE))
            view = DataView(Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a"))
            ahead = DecodeAhead(view)
            return ViewFile(view, None, direct_io=False, keep_cache=True, ahead=ahead), ahead

        yield open_file, values.tobytes()


def _ahead_of(ahead: DecodeAhead, offset: int) -> int:
    """How far ahead of `offset` decode-ahead has started rows, once they are decoded (as
    the pushes wait for them: the bytes in flight are bounded, the window is the rule here)."""
    view = ahead._view()
    assert isinstance(view, DataView)
    deadline = time.monotonic() + 30
    while view.inflight.decoding():
        assert time.monotonic() < deadline, "decode-ahead never settled"
        time.sleep(0.001)
    (stream,) = ahead._streams
    return stream.decoded_rows * ROW - offset


def test_a_pushed_reader_is_one_reader_with_the_window_of_one_that_asked_for_every_page(opened):
    open_file, expected = opened
    size = 128 << 10  # the kernel's requests
    pushed, ahead = open_file()
    offset, windows = 0, []
    for n in range(4):  # `dd bs=1M`'s first, then each where what was decoded (and pushed) ahead of it ends
        length = MiB if n == 0 else size
        assert pushed.read(offset, length) == expected[offset : offset + length]
        windows.append(_ahead_of(ahead, offset))
        (stream,) = ahead._streams
        offset = stream.runs.reach
    assert len(ahead._streams) == 1 and ahead._streams[0].runs.start == 0  # one reader, one run
    assert offset > 3 * MiB  # (far apart: past every page in between)
    assert windows[-1] >= SHARE  # the whole share ahead by its fourth request (was 4 MiB then)

    every_page, ahead = open_file()  # the same bytes asked for page by page: no larger window
    for at in range(0, offset + size, size):
        assert every_page.read(at, size) == expected[at : at + size]
        _ahead_of(ahead, at)
    assert _ahead_of(ahead, offset) <= windows[-1] + ROW


def test_decoding_keeps_ahead_of_the_pushes_not_only_of_the_requests(opened):
    """A reader whose pages are pushed sends no request for them, and a reply held until
    the pushes past it are done (or a slow reader) sends none for a while: decode-ahead
    goes on past each window pushed (fs/fuse/stream_pages.py tells the file), as past a
    read there. The reader's run stays as its requests left it."""
    open_file, expected = opened
    file, ahead = open_file()
    assert file.read(0, MiB) == expected[:MiB]  # `dd bs=1M`'s first request: streams at once
    _ahead_of(ahead, 0)
    (stream,) = ahead._streams
    decoded = stream.decoded_rows * ROW  # where the rows the request started end
    assert decoded < SHARE  # (far from the end of the file: there is more to decode)
    for at in range(MiB, decoded, MiB):  # the windows pushed, in order, as far as decoded
        file.pushed(at, MiB)
    last = (decoded - 1) // MiB * MiB + MiB  # the end of the last window pushed
    assert _ahead_of(ahead, last) > 0  # rows started past the pushes, with no request
    assert stream.decoded_rows * ROW > decoded
    assert stream.runs.furthest == MiB and len(ahead._streams) == 1  # one reader, its run as it was
    assert file.read(last, MiB) == expected[last : last + MiB]


def test_pushes_behind_the_reader_or_of_a_run_that_does_not_stream_start_nothing(opened):
    open_file, _ = opened
    file, ahead = open_file()
    file.read(8 * MiB, 4096)  # a small read in the middle: a run that does not stream yet
    file.pushed(9 * MiB, MiB)
    (stream,) = ahead._streams
    assert stream.decoded_rows == 0
    file, ahead = open_file()
    file.read(0, MiB)
    _ahead_of(ahead, 0)
    (stream,) = ahead._streams
    rows = stream.decoded_rows
    file.pushed(0, MiB)  # (what the reader has read already)
    assert stream.decoded_rows == rows


def test_pushes_lead_decoding_only_within_the_windows_share_past_the_reader(opened):
    """The rows decoded between the reader and the pushes stay cached until the reader
    passes them: pushes leading decoding without bound would fill the cache with them and
    push other files' chunks out. Past the window's share of the cache beyond the
    reader's furthest request, a push starts no decoding."""
    open_file, _ = opened
    file, ahead = open_file()
    file.read(0, MiB)
    _ahead_of(ahead, 0)
    (stream,) = ahead._streams
    at = 0
    while stream.decoded_rows * ROW < SHARE + MiB:  # the pushes run on as far as decoded
        at = max(at + MiB, (stream.decoded_rows * ROW - 1) // MiB * MiB)
        assert at <= 4 * SHARE, "decoding stopped short of the share"
        file.pushed(at, MiB)
        _ahead_of(ahead, at)
    rows = stream.decoded_rows
    file.pushed(rows * ROW, MiB)  # past the share beyond the reader at 1 MiB
    _ahead_of(ahead, rows * ROW)
    assert stream.decoded_rows == rows
    assert stream.decoded_rows * ROW <= SHARE + 2 * MiB + SHARE  # (bounded near the share)
