"""docs/errors.md, Deadlines, on a local store through a real mount: a directory below the
store root on a filesystem that never answers (a FUSE mount, as an NFS mount whose
server went away) fails the reads that need it within the deadline, while other arrays,
`stat`, listings and /.zarrfs/ are served, more stuck keys than the daemon has worker
threads included; the mount unmounts and the daemon exits while the hang lasts, and a
read is served again once the filesystem is back."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for

T = TypeVar("T")
HUNG_FS = Path(__file__).with_name("hung_fs.py")
TIMEOUT = 2  # --timeout
VALUES = np.arange(96 * 96, dtype="<i4").reshape(96, 96)  # 6 x 6 chunks of 16 x 16


def _mount_device(path: Path) -> str | None:
    """The device ("major:minor") of the mount at `path`, from /proc/self/mountinfo (a
    stat of a hung mountpoint would hang)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(path):
                return fields[2]
    return None


@pytest.fixture
def hang():
    """hang(directory): a filesystem that never answers mounted on `directory`; returns
    what ends the hang (also called at teardown, so that nothing stays stuck). Its server
    is stopped at once: its requests stay queued in the kernel, where a thread waiting
    on one can still be killed (one a server has read and never answers cannot be, not
    even at exit, until the connection is aborted)."""
    ends = []

    def hang_at(directory: Path):
        path = Path(os.path.realpath(directory.parent)) / directory.name
        server = subprocess.Popen([sys.executable, str(HUNG_FS), str(path)])
        device = wait_for(lambda: _mount_device(path))
        server.send_signal(signal.SIGSTOP)

        def end() -> None:
            if server.returncode is not None:
                return
            abort = Path(f"/sys/fs/fuse/connections/{int(device.split(':')[1])}/abort")
            if abort.exists():
                abort.write_text("1")
            server.kill()  # its /dev/fuse closed: the connection is aborted
            server.wait()
            subprocess.run(["umount", "-l", str(path)], capture_output=True)

        ends.append(end)
        return end

    yield hang_at
    for end in ends:
        end()


@pytest.fixture
def hung_array(mount, hang, tmp_path):
    """A mount (--timeout 2) of arrays `good` and `bad` (v3, chunk keys c/i/j), with
    `bad/c`, where all of bad's chunks are, on a filesystem that never answers; returns
    (mount, what ends the hang)."""
    root = tmp_path / "store.zarr"
    for name in ("good", "bad"):
        zarr.create_array(str(root / name), shape=VALUES.shape, chunks=(16, 16), dtype="<i4")[...] = VALUES
    zarr.open_group(str(root), mode="a")
    m = mount(root, "--timeout", str(TIMEOUT), "--metadata-ttl", "300")
    assert (m / "good/chunks/0/0").read_bytes() == VALUES[:16, :16].tobytes()
    assert os.listdir(m / "bad/chunks/0")  # known from metadata, no store call
    assert os.stat(m / "bad/data").st_size == VALUES.nbytes and "bad" in os.listdir(m.path)  # known
    return m, hang(root / "bad" / "c")


def _within(seconds: float, fn: Callable[[], T], what: str = "") -> tuple[float, T]:
    """(seconds taken, fn()) where fn() ends within `seconds`; fails if it has not (it
    is left running on a thread, which the hang's end releases)."""
    outcome: list = []

    def run() -> None:
        start = time.monotonic()
        try:
            value: Any = fn()
        except BaseException as exc:
            value = exc
        outcome.append((time.monotonic() - start, value))

    waiter = threading.Thread(target=run, daemon=True)
    waiter.start()
    waiter.join(timeout=seconds)
    assert outcome, f"{what or fn} still waits after {seconds}s"
    if isinstance(outcome[0][1], BaseException):
        raise outcome[0][1]
    return outcome[0]


def _read(path: Path, within: float = 3 * TIMEOUT) -> tuple[float, int | bytes]:
    """(seconds, bytes or errno) of reading `path`, which ends `within` seconds."""

    def read() -> int | bytes:
        try:
            return path.read_bytes()
        except OSError as exc:
            return exc.errno

    return _within(within, read, f"reading {path}")


def _chunk(i: int, j: int) -> bytes:
    return VALUES[16 * i : 16 * (i + 1), 16 * j : 16 * (j + 1)].tobytes()


def test_reads_on_a_hung_directory_fail_within_the_deadline_while_the_rest_is_served(hung_array):
    m, end_hang = hung_array
    results: dict[tuple[int, int], tuple[float, int | bytes]] = {}
    stuck = [(i, j) for i in range(6) for j in range(6)][:20]  # more than the 16 worker threads

    def read(i: int, j: int) -> None:
        with contextlib.suppress(AssertionError):
            results[i, j] = _read(m / f"bad/chunks/{i}/{j}")

    readers = [threading.Thread(target=read, args=c, daemon=True) for c in stuck]
    for reader in readers:
        reader.start()
    # meanwhile: an array beside it (uncached chunks: store calls), stat, listings, /.zarrfs/
    served = []
    for i, j in [(i, j) for i in range(6) for j in range(6)][1:]:
        took, value = _read(m / f"good/chunks/{i}/{j}", within=TIMEOUT + 2)
        assert value == _chunk(i, j), value
        served.append(took)
        assert sum(served) < 2 * TIMEOUT + 1  # the reads' own time: not the checks beside them
        assert _within(1, (m / ".zarrfs/stats").read_text, "/.zarrfs/stats")[1]
        assert _within(1, lambda: os.stat(m / "bad/data"), "stat")[1].st_size == VALUES.nbytes
        assert "bad" in _within(1, lambda: os.listdir(m.path), "ls")[1]
    # (the first reads of good may wait for an I/O thread, until the stuck fetches are
    # left behind at the deadline)
    assert max(served[-10:]) < 1.0, served
    for reader in readers:
        reader.join(timeout=3 * TIMEOUT + 1)
    failed = {c: r for c, r in results.items() if r[1] in (errno.EIO, errno.ETIMEDOUT)}
    assert len(failed) == len(stuck), results
    assert max(took for took, _ in failed.values()) < 2 * TIMEOUT + 2, results
    assert _read(m / "good/data")[1] == VALUES.tobytes()

    end_hang()  # bad/c is a plain directory again: chunks are served again within a deadline
    assert wait_for(lambda: _read(m / "bad/data")[1] == VALUES.tobytes(), timeout=3 * TIMEOUT)
    m.unmount()


def test_the_mount_unmounts_and_its_daemon_exits_while_a_read_hangs(hung_array):
    m, _ = hung_array
    for i in range(3):
        took, result = _read(m / f"bad/chunks/{i}/0")
        assert result in (errno.EIO, errno.ETIMEDOUT) and took < TIMEOUT + 2, (took, result)
    m.unmount()  # checks the daemon exited cleanly
