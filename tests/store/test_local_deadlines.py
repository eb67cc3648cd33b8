"""docs/errors.md, Deadlines, on a local store, without a kernel: a file operation that never
returns (a key on a hung NFS or FUSE mount below the root, here an Event never set)
fails its call at the deadline, its thread is left behind without holding a pool's
place, threads left behind are bounded, and the store serves again once it returns."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for
from zarrfs.format.context import io_executor
from zarrfs.store import LocalStore, StoreUnavailableError, local_files, local_writes, open_store
from zarrfs.store.deadlines import reached

TIMEOUT = 0.5
SLACK = 0.5


@pytest.fixture
def hung(monkeypatch):
    """Keys whose name starts with "hung" block on open until the event is set (set at
    teardown, so that no thread is left stuck)."""
    release = threading.Event()
    real_open = local_files.open_regular
    real_open_dir = local_files._open_dir
    real_write = local_writes.write_atomic

    def open_regular(directory: int, name: str):
        if name.startswith("hung"):
            release.wait()
        return real_open(directory, name)

    def open_dir(parent: int, name: str, path: str) -> int:
        if name.startswith("hung"):
            release.wait()
        return real_open_dir(parent, name, path)

    def write_atomic(root: str, parts: list[str], value: bytes) -> None:
        if parts[-1].startswith("hung"):
            reached("/".join(parts))  # as the walk to its directory would have
            release.wait()
        real_write(root, parts, value)

    monkeypatch.setattr(local_files, "open_regular", open_regular)
    monkeypatch.setattr(local_writes, "write_atomic", write_atomic)
    monkeypatch.setattr(local_files, "_open_dir", open_dir)
    yield release
    release.set()


def _store(tmp_path: Path) -> LocalStore:
    (tmp_path / "ok").write_bytes(b"fine")
    (tmp_path / "a").mkdir()
    for i in range(3):
        (tmp_path / "a" / f"hung{i}").write_bytes(b"never read")
    (tmp_path / "d" / "hungdir").mkdir(parents=True)
    (tmp_path / "d" / "ok").write_bytes(b"fine")
    for i in range(3):
        (tmp_path / "d" / "hungdir" / str(i)).write_bytes(b"never read")
    store = open_store(str(tmp_path), timeout=TIMEOUT)
    assert isinstance(store, LocalStore)
    return store


def _timed(fn) -> tuple[float, BaseException | None]:
    start = time.monotonic()
    try:
        fn()
    except Exception as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


def test_a_call_that_never_returns_fails_at_the_deadline(tmp_path, hung):
    store = _store(tmp_path)
    took, error = _timed(lambda: store.get("a/hung0"))
    assert isinstance(error, StoreUnavailableError) and "no answer within 0.5s" in str(error)
    assert TIMEOUT <= took < TIMEOUT + SLACK
    assert store.get("ok") == b"fine"


def test_a_key_left_running_fails_at_once_until_it_returns(tmp_path, hung):
    store = _store(tmp_path)
    with pytest.raises(StoreUnavailableError):
        store.get("a/hung0")
    took, error = _timed(lambda: store.get("a/hung0"))
    assert isinstance(error, StoreUnavailableError) and "has not returned" in str(error)
    assert took < TIMEOUT / 2  # at once, not after a deadline
    hung.set()
    wait_for(lambda: store.deadlines.stuck() == 0, timeout=30)
    assert store.get("a/hung0") == b"never read"


def test_calls_through_the_directory_a_call_is_stuck_in_fail_at_once(tmp_path, hung):
    store = _store(tmp_path)
    with pytest.raises(StoreUnavailableError):
        store.get("d/hungdir/0")
    for call in (
        lambda: store.get("d/hungdir/1"),
        lambda: store.list_dir("d/hungdir/"),
        lambda: store.set("d/hungdir/2", b"x"),
    ):
        took, error = _timed(call)
        assert isinstance(error, StoreUnavailableError) and "stuck at 'd/hungdir'" in str(error)
        assert took < TIMEOUT / 2  # at once, not after a deadline
    assert store.get("d/ok") == b"fine"
    assert store.list_dir("d/") == (["ok"], ["hungdir"])
    hung.set()
    wait_for(lambda: store.deadlines.stuck() == 0, timeout=30)
    assert store.get("d/hungdir/1") == b"never read"


def test_an_io_stage_thread_left_behind_is_replaced(tmp_path, hung):
    store = _store(tmp_path)
    io = io_executor(1)
    try:
        stuck = io.submit(store.get, "a/hung0")
        later = io.submit(store.get, "ok")  # queued behind the stuck call on the one thread
        with pytest.raises(StoreUnavailableError):
            stuck.result(timeout=TIMEOUT + SLACK)
        assert later.result(timeout=SLACK) == b"fine"
        assert io.submit(store.get, "ok").result(timeout=SLACK) == b"fine"
    finally:
        hung.set()
        io.shutdown(wait=True)


def test_threads_left_behind_are_bounded(tmp_path, hung):
    store = _store(tmp_path)
    store.deadlines.max_stuck = 2
    for i in range(2):
        with pytest.raises(StoreUnavailableError):
            store.get(f"a/hung{i}")
    took, error = _timed(lambda: store.get("ok"))
    assert isinstance(error, StoreUnavailableError) and "2 calls have not returned" in str(error)
    assert took < TIMEOUT / 2  # at once, not after a deadline
    hung.set()
    wait_for(lambda: store.deadlines.stuck() == 0, timeout=30)
    assert store.get("ok") == b"fine"


def test_a_write_past_its_deadline_fails_even_if_it_lands_later(tmp_path, hung):
    store = _store(tmp_path)
    took, error = _timed(lambda: store.set("b/hung", b"new"))
    assert isinstance(error, StoreUnavailableError)
    assert TIMEOUT <= took < TIMEOUT + SLACK
    assert not (tmp_path / "b" / "hung").exists()  # not half-written: absent until the rename
    hung.set()
    wait_for(lambda: store.deadlines.stuck() == 0, timeout=30)
    assert store.get("b/hung") == b"new"  # the late write landed, as docs/semantics.md says


def test_each_call_of_a_batch_has_its_own_deadline(tmp_path, monkeypatch):
    """A flush of many chunks is many calls: together they may take longer than one
    deadline, each within it."""
    store = open_store(str(tmp_path), timeout=TIMEOUT)
    real_write = local_writes.write_atomic

    def slow_write(root: str, parts: list[str], value: bytes) -> None:
        time.sleep(TIMEOUT / 3)
        real_write(root, parts, value)

    monkeypatch.setattr(local_writes, "write_atomic", slow_write)
    store.set_values({f"c/{i}": bytes([i]) for i in range(6)})  # 6 * TIMEOUT / 3 in all
    assert store.get("c/5") == b"\x05"
