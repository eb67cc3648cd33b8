"""A sequential reader of `data` finds the pages ahead of it in the kernel's page cache,
pushed there from the daemon's notifier thread, and sends no request for them: the bytes
it reads must still be the array's, as zarr-python reads it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for

MiB = 1 << 20
SHAPE = (2048, 3000)  # float32: 23.4 MiB, rows of 12,000 bytes (rows straddle pages)


@pytest.fixture
def store(tmp_path) -> Path:
    root = tmp_path / "store.zarr"
    a = zarr.create_array(root, shape=SHAPE, chunks=(256, 512), dtype="float32")
    a[:] = np.random.default_rng(3).normal(size=SHAPE).astype("float32")
    return root


def stats(m) -> dict:
    return json.loads((m / ".zarrfs" / "stats").read_text())


def settled(m) -> None:
    """Until the pushes queued have been made (their count stops moving)."""
    last = [None]

    def quiet() -> bool:
        seen = stats(m).get("page_cache_pushed_bytes", 0)
        unchanged, last[0] = last[0] == seen, seen
        return unchanged

    wait_for(quiet, timeout=120, interval=0.5)


def test_a_sequential_reader_reads_pushed_pages_without_requests(mount, store):
    m = mount(store, "--cache-size", "256MiB")
    file = m / "data"
    expected = zarr.open_array(store, mode="r")[...].astype("<f4").tobytes()
    assert file.read_bytes() == expected  # every chunk decoded, into bands
    fd = os.open(file, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        before = stats(m)
        first = os.read(fd, MiB)  # a sequential reader's first request: pushes ahead of it
        settled(m)
        reads = stats(m)["fuse_read"]
        rest = b"".join(iter(lambda: os.read(fd, MiB), b""))
        after = stats(m)
    finally:
        os.close(fd)
    assert first + rest == expected
    pushed = after["page_cache_pushed_bytes"] - before["page_cache_pushed_bytes"]
    assert pushed >= len(expected) // 2, pushed
    # the pages before the pushes' start come by requests; the rest were in the page
    # cache (reading the stats file is two requests more, each time)
    assert after["fuse_read"] - reads <= 8, (after["fuse_read"] - reads, len(expected) // MiB)


def test_a_second_pass_is_pushed_ahead_too(mount, store):
    """Each pass is a run of its own: what was queued for the first is no guide."""
    m = mount(store, "--cache-size", "256MiB")
    file = m / "data"
    expected = zarr.open_array(store, mode="r")[...].astype("<f4").tobytes()
    for _ in range(2):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            before = stats(m)["page_cache_pushed_bytes"]
            first = os.read(fd, MiB)
            settled(m)
            assert first + b"".join(iter(lambda: os.read(fd, MiB), b"")) == expected
        finally:
            os.close(fd)
    pushed = stats(m)["page_cache_pushed_bytes"] - before
    assert pushed >= len(expected) // 2, pushed


def test_a_reader_past_several_windows_of_pushes_reads_the_array(mount, tmp_path):
    """A file longer than what is pushed at once (AHEAD): the reader's requests for the
    pages left out, and past the end of what was pushed, queue the next windows; every
    byte read is still the array's, across windows that lack their first page."""
    root = tmp_path / "long.zarr"
    shape = (2048, 10000)  # float32: 78 MiB, rows of 40,000 bytes
    a = zarr.create_array(root, shape=shape, chunks=(256, 2048), dtype="float32")
    a[:] = np.random.default_rng(4).normal(size=shape).astype("float32")
    m = mount(root, "--cache-size", "512MiB")
    file = m / "data"
    expected = zarr.open_array(root, mode="r")[...].astype("<f4").tobytes()
    assert file.read_bytes() == expected  # every chunk decoded, into bands
    for _ in range(2):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            before = stats(m)
            got = b"".join(iter(lambda: os.read(fd, MiB), b""))
            after = stats(m)
        finally:
            os.close(fd)
        assert got == expected
        pushed = after["page_cache_pushed_bytes"] - before["page_cache_pushed_bytes"]
        assert pushed >= len(expected) // 2, pushed
