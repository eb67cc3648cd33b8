"""docs/errors.md through a real mount, where the FUSE layer is what must hold: a stalled
endpoint (a proxy that takes the bytes and answers nothing) fails reads within the
deadline while requests that need no store call are answered, and the mount recovers;
a grid of 2**42 chunks lists lazily."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for, zarrfs
from tests.conftest_s3 import proxy, s3_bucket, s3_endpoint, s3_filesystem  # noqa: F401 (fixtures)


def _timed(fn) -> float:
    start = time.monotonic()
    fn()
    return time.monotonic() - start


VALUES = np.arange(64 * 64, dtype="<i4").reshape(64, 64)
# The mounts' --timeout. What needs no store call must answer well within half of it,
# and what meets the stalled store must fail before a second deadline could pass: the
# margins hold on a loaded machine.
DEADLINE = 5


@pytest.fixture
def behind_proxy(mount, s3_filesystem, s3_bucket, proxy, tmp_path):
    """A mount of an S3 array (written by zarr-python) through the fault proxy, with a
    DEADLINE s deadline; its metadata and chunk 0/0 are cached."""
    local = tmp_path / "x.zarr"
    zarr.create_array(str(local / "a"), shape=VALUES.shape, chunks=(16, 16), dtype="<i4")[...] = VALUES
    zarr.open_group(str(local), mode="a")
    s3_filesystem.put(str(local), f"{s3_bucket}/x.zarr", recursive=True)
    m = mount(
        f"s3://{s3_bucket}/x.zarr",
        "--storage-option",
        f"endpoint_url={proxy.endpoint}",
        "--timeout",
        str(DEADLINE),
        "--metadata-ttl",
        "300",
    )
    assert (m / "a/chunks/0/0").read_bytes() == VALUES[:16, :16].tobytes()
    return m


def test_a_stalled_endpoint_fails_within_the_deadline_while_cached_requests_answer(behind_proxy, proxy):
    m, values = behind_proxy, VALUES
    warm = (m / "a/chunks/0/0").read_bytes()
    assert warm == values[:16, :16].tobytes()

    listed = sorted(os.listdir(m.path))
    proxy.freeze()
    failure: list = []
    took: list = []

    def cold_read() -> None:
        start = time.monotonic()
        try:
            (m / "a/chunks/3/3").read_bytes()
        except OSError as exc:
            failure.append(exc.errno)
        took.append(time.monotonic() - start)

    reader = threading.Thread(target=cold_read)
    reader.start()
    checks = 0
    while reader.is_alive():  # all the while the cold read waits on the frozen endpoint
        assert _timed(lambda: (m / "a/chunks/0/0").read_bytes() == warm) < DEADLINE / 2
        assert _timed(lambda: os.stat(m / "a/data.npy")) < DEADLINE / 2
        assert _timed((m / ".zarrfs/version").read_text) < DEADLINE / 2
        assert _timed(lambda: sorted(os.listdir(m.path)) == listed) < DEADLINE / 2  # listings known, or
        assert _timed(lambda: "data.npy" in os.listdir(m / "a")) < DEADLINE / 2  # known from metadata
        assert _timed(lambda: os.listdir(m / "a/chunks/1")) < DEADLINE / 2
        checks += 1
        reader.join(timeout=0.1)
    assert checks >= 2  # rounds while the read waited (a loaded machine may run few in a deadline)
    assert failure == [errno.EIO] and took[0] < 1.8 * DEADLINE, (failure, took)

    proxy.thaw()  # the chunk is asked for again once its deadline has passed since it failed
    assert wait_for(lambda: _read_or_none(m / "a/chunks/3/3"), timeout=30) == values[48:, 48:].tobytes()
    m.unmount()


def test_dd_of_data_on_a_stalled_endpoint_ends_within_about_one_deadline(behind_proxy, proxy):
    """The kernel asks again for the pages of a read that failed (its readahead, then the
    page the reader waits on), and each ask met the stalled store anew: `dd`, and a
    reader's Ctrl-C, waited two or three deadlines. A chunk the store did not answer
    fails at once for one deadline."""
    _dd_fails_within_one_deadline_then_recovers(behind_proxy / "a/data", proxy, VALUES.tobytes())
    behind_proxy.unmount()


def test_raw_dd_on_a_stalled_endpoint_ends_within_about_one_deadline(mount, s3_filesystem, s3_bucket, proxy):
    """--raw too: a value the store did not answer fails at once for one deadline, so
    the kernel's second ask for the failed read's pages does not wait another."""
    value = np.random.default_rng(1).integers(0, 255, 4 << 20, dtype="u1").tobytes()
    s3_filesystem.pipe(f"{s3_bucket}/raw/blob", value)
    m = mount(
        f"s3://{s3_bucket}/raw",
        "--raw",
        "--storage-option",
        f"endpoint_url={proxy.endpoint}",
        "--timeout",
        str(DEADLINE),
        "--metadata-ttl",
        "300",
    )
    assert os.stat(m / "blob").st_size == len(value)
    _dd_fails_within_one_deadline_then_recovers(m / "blob", proxy, value)
    m.unmount()


def _dd_fails_within_one_deadline_then_recovers(path, proxy, expected: bytes) -> None:
    """`dd` of `path` with the endpoint frozen fails with EIO within about one deadline
    (the mount's --timeout is DEADLINE), not two; once thawed, `path` reads `expected`."""
    proxy.freeze()
    started = time.monotonic()
    copied = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M"], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert copied.returncode != 0 and "Input/output error" in copied.stderr, copied.stderr
    assert took < 1.8 * DEADLINE, took
    proxy.thaw()
    assert wait_for(lambda: _read_or_none(path), timeout=30) == expected


def _read_or_none(path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError as exc:
        assert exc.errno == errno.EIO  # noqa: PT017 (a read may fail; then with EIO)
        return None


@pytest.mark.parametrize("fault", ["status 503", "responses cut short", "connections reset"])
def test_an_endpoint_that_fails_gives_eio_then_recovers(behind_proxy, proxy, fault):
    m = behind_proxy
    if fault == "status 503":
        proxy.status = 503
    elif fault == "responses cut short":
        proxy.truncate_after = 300
    else:
        proxy.reset = True
    with pytest.raises(OSError) as info:
        (m / "a/chunks/2/1").read_bytes()
    assert info.value.errno == errno.EIO
    assert (m / "a/chunks/0/0").read_bytes() == VALUES[:16, :16].tobytes()  # cached: still served
    proxy.status, proxy.truncate_after, proxy.reset = None, None, False
    assert (m / "a/chunks/2/1").read_bytes() == VALUES[32:48, 16:32].tobytes()
    m.unmount()
    assert "EIO" in m.log_text()


def test_a_grid_of_2_to_the_42_chunks_lists_lazily(mount, tmp_path):
    root = tmp_path / "huge.zarr"
    zarr.create_array(str(root), shape=(2**42,), chunks=(1,), dtype="u1", fill_value=7)
    m = mount(root)
    rss_before = _rss_kib(m.pid)
    # a program that reads a directory as it goes (ls and find read it all first, to sort)
    lister = "import itertools, os, sys; print(*(e.name for e in itertools.islice(os.scandir(sys.argv[1]), 6)))"
    out = subprocess.run(
        [sys.executable, "-c", lister, str(m / "chunks")], capture_output=True, text=True, timeout=30
    ).stdout.split()  # listing 2**42 names would outlast the 30 s (and the memory check)
    assert out in ([".", "..", "0", "1", "2", "3"], ["0", "1", "2", "3", "4", "5"])
    assert _rss_kib(m.pid) - rss_before < 50 << 10
    assert (m / "chunks/4398046511103").read_bytes() == b"\x07"


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping the kernel's caches takes root")
def test_the_inode_table_holds_what_the_kernel_holds_not_every_path_ever_listed(mount, tmp_path):
    """Each chunk file listed is an inode the kernel holds until it drops its caches and
    forgets it; then the mount forgets it too (it held every path ever listed: hundreds of
    bytes each, and a scan of them at every change)."""
    root = tmp_path / "many.zarr"
    zarr.create_array(str(root), shape=(20_000,), chunks=(1,), dtype="u1", fill_value=0)
    m = mount(root)
    assert len(os.listdir(m / "chunks")) == 20_000
    assert _stats(m)["inodes"] >= 20_000
    os.sync()

    def forgotten() -> bool:
        # dentries and inodes: the kernel sends FORGET for each inode it drops (dropped
        # again at each look: one pass may leave some, and FORGETs queue on a busy machine)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
        return _stats(m)["inodes"] < 100

    wait_for(forgotten, timeout=120, interval=0.5)
    assert (m / "chunks/19999").read_bytes() == b"\x00"  # looked up again, a new number


def _stats(m) -> dict:
    return json.loads(zarrfs("stats", m.path).stdout)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_after_the_metadata_ttl_a_frozen_endpoint_still_leaves_known_metadata_served_at_once(
    mount, s3_filesystem, s3_bucket, proxy, tmp_path
):
    """Stale-while-revalidate (docs/errors.md, Deadlines): once --metadata-ttl has passed with
    the endpoint silent, a refresh that does not come back promptly leaves `stat`, `ls`
    and reads of cached chunks answered from the metadata known; an uncached chunk waits
    for the store, up to --timeout, then fails with EIO. Once the store answers again,
    another writer's change shows."""
    local = tmp_path / "x.zarr"
    zarr.create_array(str(local / "a"), shape=VALUES.shape, chunks=(16, 16), dtype="<i4")[...] = VALUES
    zarr.open_group(str(local), mode="a")
    s3_filesystem.put(str(local), f"{s3_bucket}/x.zarr", recursive=True)
    timeout, ttl = 4, 2
    m = mount(
        f"s3://{s3_bucket}/x.zarr",
        "--storage-option",
        f"endpoint_url={proxy.endpoint}",
        "--timeout",
        str(timeout),
        "--metadata-ttl",
        str(ttl),
    )
    warm = (m / "a/chunks/0/0").read_bytes()
    assert warm == VALUES[:16, :16].tobytes()
    size = os.stat(m / "a/data").st_size
    listed, listed_a = sorted(os.listdir(m.path)), sorted(os.listdir(m / "a"))

    proxy.freeze()
    time.sleep(ttl + 0.5)  # what the mount and the kernel knew has expired
    for _ in range(3):
        assert _timed(lambda: os.stat(m / "a/data").st_size == size) < timeout / 2
        assert _timed(lambda: sorted(os.listdir(m.path)) == listed) < timeout / 2
        assert _timed(lambda: sorted(os.listdir(m / "a")) == listed_a) < timeout / 2
        assert _timed(lambda: (m / "a/chunks/0/0").read_bytes() == warm) < timeout / 2
        assert _timed(lambda: (m / ".zarrfs/version").read_text().startswith("zarrfs")) < timeout / 2
        time.sleep(ttl / 2)  # a product time: the rounds spread over the refresh's wait on the frozen store (--timeout)
    assert os.stat(m / "a/data").st_size == size and (m / "a/chunks/0/0").read_bytes() == warm
    started = time.monotonic()
    with pytest.raises(OSError) as failed:
        (m / "a/chunks/3/3").read_bytes()
    assert failed.value.errno == errno.EIO
    assert time.monotonic() - started < 1.8 * timeout

    proxy.thaw()
    zarr.open_group(
        f"s3://{s3_bucket}/x.zarr",
        mode="a",
        storage_options={"endpoint_url": proxy.endpoint, "key": "testing", "secret": "testing"},
    ).attrs["units"] = "K"
    assert wait_for(
        lambda: "zarr.json" in os.listdir(m.path) and b"units" in (m / "zarr.json").read_bytes(),
        timeout=3 * ttl + timeout,
    )
    m.unmount()
    # each failed refresh is logged once (the root's, `a`'s, the root's listing), not once per request
    assert 1 <= m.log_text().count("serving the metadata read before") <= 2 * 3
