"""Windows of `data` and `data.npy` that random reads keep returning to are handed to the
kernel's page cache: what the kernel then serves must be the array's bytes, and a write
through the mount, or a node erased and made again, must never leave old bytes behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for
from zarrfs.cli import is_mounted

WINDOW = 1 << 20
SHAPE = (600, 1500)  # float32 rows of 6000 bytes: rows and chunks straddle pages


@pytest.fixture
def store(tmp_path) -> Path:
    root = tmp_path / "store.zarr"
    g = zarr.open_group(root, mode="w")
    a = g.create_array("grid", shape=SHAPE, chunks=(100, 256), dtype="float32", fill_value=-1.0)
    a[:] = np.random.default_rng(1).normal(size=SHAPE).astype("float32")
    b = g.create_group("grp").create_array("arr", shape=(300, 400), chunks=(64, 64), dtype="int32", fill_value=7)
    b[:] = np.arange(120000, dtype="int32").reshape(300, 400)
    return root


def stats(m) -> dict:
    return json.loads((m / ".zarrfs" / "stats").read_text())


def expected_bytes(store: Path, path: str, npy: bool) -> bytes:
    values = zarr.open_array(store / path, mode="r")[...]
    if not npy:
        return values.astype(values.dtype.newbyteorder("<")).tobytes()
    import io

    buf = io.BytesIO()
    np.save(buf, values)
    return buf.getvalue()


def read_randomly_until_pushed(file: Path, m) -> None:
    """Decode every chunk, drop the file's pages, then read scattered 4 KiB blocks until
    the daemon has pushed every window of the file (the mount logs at DEBUG: each push)."""
    file.read_bytes()
    size = file.stat().st_size
    windows = -(-size // WINDOW)
    fd = os.open(file, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        logged = len(m.log_text())
        for start in range(0, size, WINDOW):
            span = min(WINDOW, size - start)
            for k in range(8):  # 32 KiB of each window, in blocks far apart
                os.pread(fd, 4096, start + k * span // 8 // 4096 * 4096)
        # each window pushed since (the daemon logs each push at DEBUG), not merely as many
        # pushes as windows: one queued by the first read may count for a window twice
        wait_for(lambda: len(_pushed_windows(m.log_text()[logged:])) >= windows, timeout=120)
        pushes_settled(m)
    finally:
        os.close(fd)


def _pushed_windows(log: str) -> set[int]:
    return {int(match) for match in re.findall(r"pushed inode \d+ \[(\d+), \d+\) to the page cache", log)}


def pushes_settled(m) -> None:
    """Wait until no push has been made for a while (the pusher's queue is empty)."""
    last = [None]

    def quiet() -> bool:
        seen = stats(m).get("page_cache_pushes", 0)
        unchanged_since = last[0] == seen
        last[0] = seen
        return unchanged_since

    wait_for(quiet, timeout=120, interval=1.0)


def read_in_pages(file: Path) -> bytes:
    fd = os.open(file, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        size = os.fstat(fd).st_size
        return b"".join(os.pread(fd, 4096, offset) for offset in range(0, size, 4096))
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", ["data", "data.npy"])
def test_pushed_windows_hold_the_arrays_bytes(mount, store, name):
    m = mount(store, "--log-level", "DEBUG")
    file = m / "grid" / name
    read_randomly_until_pushed(file, m)
    hits = stats(m)["cache_hits"]
    assert read_in_pages(file) == expected_bytes(store, "grid", name.endswith(".npy"))
    # the pages came from the kernel's page cache, filled by the pushes: a read that reached
    # the daemon costs at least one chunk lookup, and without pushes every page would. (A
    # few pages may miss when a push races with the reads; once seen in CI.)
    pages = -(-file.stat().st_size // 4096)
    pushes = [line for line in m.log_text().splitlines() if "page cache" in line]
    assert stats(m)["cache_hits"] - hits < pages // 4, "\n".join(pushes)


def test_a_write_after_pushes_reads_back_new_bytes_in_every_view(mount, store):
    m = mount(store, "--log-level", "DEBUG")
    data, npy = m / "grid" / "data", m / "grid" / "data.npy"
    read_randomly_until_pushed(data, m)
    read_randomly_until_pushed(npy, m)
    new = np.full(3000, 42.5, dtype="<f4").tobytes()
    with open(data, "r+b") as f:
        f.seek(5 * 4096 + 100)
        f.write(new)
    truth = expected_bytes(store, "grid", npy=False)
    assert truth[5 * 4096 + 100 : 5 * 4096 + 100 + len(new)] == new  # stored
    assert read_in_pages(data) == truth
    wait_for(lambda: read_in_pages(npy) == expected_bytes(store, "grid", npy=True), timeout=30)


@pytest.mark.parametrize("name", ["data", "data.npy"])
def test_a_reader_open_across_a_resize_leaves_the_resized_array_in_the_page_cache(mount, store, name):
    """The kernel keeps a file's pages between opens: a reader opened before a resize
    through zarr.json, reading after it, must read (and so cache) the resized array,
    which every later open then reads too, however long the metadata is kept."""
    m = mount(store, "--metadata-ttl", "600")
    file = m / "grp" / "arr" / name
    with open(file, "rb") as reader:
        doc = json.loads((m / "grp/arr/zarr.json").read_text())
        doc["shape"] = [300, 300]  # rows of 300 elements instead of 400
        (m / "grp/arr/zarr.json").write_text(json.dumps(doc))
        expected = expected_bytes(store, "grp/arr", name.endswith(".npy"))
        # attributes are kept 600 s: the new size shows once the kernel dropped the file's pages
        wait_for(lambda: file.stat().st_size == len(expected))
        assert reader.read() == expected
    assert file.read_bytes() == expected


def test_a_node_erased_and_made_again_shows_none_of_its_old_chunks(mount, store):
    m = mount(store, "--log-level", "DEBUG")
    data = m / "grp" / "arr" / "data"
    read_randomly_until_pushed(data, m)
    document = (m / "grp" / "arr" / "zarr.json").read_bytes()
    shutil.rmtree(m / "grp")
    (m / "grp").mkdir()
    (m / "grp" / "arr").mkdir()
    (m / "grp" / "arr" / "zarr.json").write_bytes(document)
    assert read_in_pages(data) == np.full((300, 400), 7, dtype="<i4").tobytes()


def test_a_group_moved_to_where_another_was_shows_its_own_chunks(mount, store):
    other = zarr.open_group(store / "other", mode="w").create_array(
        "arr", shape=(300, 400), chunks=(64, 64), dtype="int32", fill_value=7
    )
    other[:] = -np.arange(120000, dtype="int32").reshape(300, 400)
    m = mount(store, "--log-level", "DEBUG")
    data = m / "grp" / "arr" / "data"
    read_randomly_until_pushed(data, m)
    (m / "grp").rename(m / "away")
    (m / "other").rename(m / "grp")
    assert read_in_pages(data) == (-np.arange(120000, dtype="<i4")).tobytes()
    assert read_in_pages(m / "away" / "arr" / "data") == np.arange(120000, dtype="<i4").tobytes()


def test_sigterm_while_random_readers_make_pushes_ends_the_daemon_cleanly(mount, store):
    m = mount(store)
    data = m / "grid" / "data"
    data.read_bytes()
    size = data.stat().st_size
    stop = threading.Event()

    def read_randomly(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            fd = os.open(data, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            while not stop.is_set():
                os.pread(fd, 4096, int(rng.integers(0, size // 4096)) * 4096)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # keep the pushes coming
        except OSError:
            pass  # the mount went away

    readers = [threading.Thread(target=read_randomly, args=(i,), daemon=True) for i in range(3)]
    for t in readers:
        t.start()
    try:
        wait_for(lambda: stats(m).get("page_cache_pushes", 0) >= 3)
        os.kill(m.pid, signal.SIGTERM)
        wait_for(lambda: not os.path.exists(f"/proc/{m.pid}"), timeout=30)
    finally:
        stop.set()
    assert not is_mounted(str(m.path))
    assert "unmounted" in m.log_text() and "Traceback" not in m.log_text()
