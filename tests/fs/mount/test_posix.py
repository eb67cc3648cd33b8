"""POSIX as far as a store allows (docs/posix.md), through real mounts of a local
store and of an S3 bucket (moto) in `--raw` mode, and of the decoded tree where the same
rule applies: what pjdfstest checks, one behaviour per test, with the store looked at
afterwards (nothing made by a refused call, nothing left behind)."""

from __future__ import annotations

import errno
import os
import socket
import stat
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.fs.mount.test_raw import assert_errno
from tests.fs.mount.write_fixtures import store_snapshot

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

LONGEST = "n" * 255  # NAME_MAX bytes: the longest name a local filesystem takes
TOO_LONG = "x" * 256


# ------------------------------------------------------------------- names
def test_names_longer_than_255_bytes_fail_enametoolong_and_make_nothing(raw):
    (raw / "kept").write_bytes(b"kept")
    (raw / "t2").mkdir()
    assert_errno(errno.ENAMETOOLONG, os.open, raw / TOO_LONG, os.O_CREAT | os.O_WRONLY, 0o644)
    assert_errno(errno.ENAMETOOLONG, os.mkdir, raw / TOO_LONG)
    assert_errno(errno.ENAMETOOLONG, os.mkdir, raw / "t2" / TOO_LONG)
    assert_errno(errno.ENAMETOOLONG, os.rename, raw / "kept", raw / TOO_LONG)
    assert_errno(errno.ENAMETOOLONG, os.link, raw / "kept", raw / TOO_LONG)
    assert_errno(errno.ENAMETOOLONG, os.stat, raw / TOO_LONG)
    assert_errno(errno.ENAMETOOLONG, os.unlink, raw / TOO_LONG)
    os.rmdir(raw / "t2")  # nothing was made in it
    assert sorted(os.listdir(raw.mount.path)) == ["kept"]
    assert raw.stored() == {"kept": b"kept"}


def test_names_of_255_bytes_work_end_to_end(raw):
    with open(raw / LONGEST, "wb") as f:
        f.write(b"longest")
    os.mkdir(raw / ("d" * 255))
    os.rename(raw / LONGEST, raw / ("d" * 255) / ("r" * 255))
    assert (raw / ("d" * 255) / ("r" * 255)).read_bytes() == b"longest"
    os.mkdir(raw / ("e" * 255))
    os.rmdir(raw / ("e" * 255))
    assert raw.stored() == {"d" * 255 + "/" + "r" * 255: b"longest"}


def test_names_longer_than_255_bytes_fail_enametoolong_in_the_decoded_tree(mount, store):
    before = store_snapshot(store)
    m = mount(store)
    assert_errno(errno.ENAMETOOLONG, os.mkdir, m / TOO_LONG)
    assert_errno(errno.ENAMETOOLONG, os.rename, m / "img", m / TOO_LONG)
    assert_errno(errno.ENAMETOOLONG, open, m / (TOO_LONG[:-4] + ".npy"), "wb")
    assert sorted(os.listdir(m.path)) == ["img", "legacy", "sharded", "zarr.json"]
    m.unmount()
    assert store_snapshot(store) == before


# ------------------------------------------------------ what a store cannot hold
def test_symlinks_fifos_devices_and_sockets_fail_eperm_and_make_nothing(raw):
    (raw / "kept").write_bytes(b"kept")
    assert_errno(errno.EPERM, os.symlink, "kept", raw / "link")
    assert_errno(errno.EPERM, os.mkfifo, raw / "fifo")
    assert_errno(errno.EPERM, os.mknod, raw / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    assert_errno(errno.EPERM, os.mknod, raw / "block", stat.S_IFBLK | 0o600, os.makedev(7, 0))
    with socket.socket(socket.AF_UNIX) as sock:
        assert_errno(errno.EPERM, sock.bind, str(raw / "sock"))
    assert os.listdir(raw.mount.path) == ["kept"]
    assert raw.stored() == {"kept": b"kept"}


# ------------------------------------------------------- open files unlinked
def test_an_open_file_that_is_unlinked_keeps_its_data_until_the_last_close(raw):
    fd = os.open(raw / "f", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, b"Hello, World!")
        os.unlink(raw / "f")
        info = os.fstat(fd)
        assert (info.st_nlink, info.st_size) == (0, 13)
        assert os.pread(fd, 100, 0) == b"Hello, World!"
        os.write(fd, b" More.")
        os.ftruncate(fd, 18)
        assert os.pread(fd, 100, 0) == b"Hello, World! More"
        assert os.fstat(fd).st_size == 18
        assert not (raw / "f").exists()
    finally:
        os.close(fd)
    assert os.listdir(raw.mount.path) == []
    assert raw.stored() == {}


def test_a_stored_file_open_for_reading_stays_readable_after_unlink(raw):
    (raw / "stored").write_bytes(b"stored value")
    with open(raw / "stored", "rb") as f:
        os.unlink(raw / "stored")
        assert os.fstat(f.fileno()).st_nlink == 0
        assert f.read() == b"stored value"
    assert raw.stored() == {}


def test_a_file_replaced_by_rename_stays_readable_through_its_descriptor(raw):
    (raw / "old").write_bytes(b"replaced")
    (raw / "new").write_bytes(b"replacement")
    with open(raw / "old", "rb") as f:
        os.rename(raw / "new", raw / "old")
        assert os.fstat(f.fileno()).st_nlink == 0
        assert f.read() == b"replaced"
    assert (raw / "old").read_bytes() == b"replacement"
    assert raw.stored() == {"old": b"replacement"}


def test_temporary_files_made_in_the_mount_work_and_leave_nothing(raw):
    import tempfile

    with tempfile.TemporaryFile(dir=raw.mount.path) as f:  # O_TMPFILE, else create + unlink
        f.write(b"scratch" * 1000)
        f.seek(0)
        assert f.read() == b"scratch" * 1000
    assert_errno(errno.EOPNOTSUPP, os.open, raw.mount.path, os.O_TMPFILE | os.O_RDWR, 0o600)
    assert os.listdir(raw.mount.path) == []
    assert raw.stored() == {}


# ------------------------------------------------------------------- sizes
def test_sizes_past_the_largest_file_fail_efbig_and_change_nothing(raw):
    (raw / "f").write_bytes(b"kept")
    assert_errno(errno.EFBIG, os.truncate, raw / "f", 10**15)
    with open(raw / "f", "r+b") as f:
        assert_errno(errno.EFBIG, os.ftruncate, f.fileno(), 10**15)
        assert_errno(errno.EFBIG, os.pwrite, f.fileno(), b"x", 10**15)
    assert (raw / "f").stat().st_size == 4
    assert raw.stored() == {"f": b"kept"}


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs takes root")
def test_a_full_local_store_fails_enospc_and_keeps_the_old_values(mount, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", small], check=True)
    try:
        (small / "store").mkdir()
        (small / "store" / "old").write_bytes(b"kept")
        (tmp_path / "big").write_bytes(os.urandom(3 << 20))
        m = mount(small / "store", "--raw")
        copied = subprocess.run(["cp", tmp_path / "big", m / "new"], capture_output=True, text=True)
        assert copied.returncode != 0 and "No space left on device" in copied.stderr
        written = subprocess.run(
            ["dd", f"if={tmp_path / 'big'}", f"of={m / 'old'}", "bs=1M", "conv=notrunc"], capture_output=True, text=True
        )
        assert "No space left on device" in written.stderr
        assert (m / "old").read_bytes() == b"kept"
        m.unmount()
        assert sorted(os.listdir(small / "store")) == ["old"]
        assert (small / "store" / "old").read_bytes() == b"kept"
        failures = [line for line in m.log_text().splitlines() if "ENOSPC" in line]
        assert [line.split("WARNING ")[1][:10] for line in failures] == ["close /new", "close /old"]
    finally:
        subprocess.run(["umount", "--lazy", small])  # (busy while a failed test still mounts it)


def test_decoded_files_refuse_sizes_past_their_own_with_efbig(mount, store):
    before = store_snapshot(store)
    m = mount(store)
    size = (m / "img/data").stat().st_size
    assert_errno(errno.EFBIG, os.truncate, m / "img/data", 10**15)
    assert_errno(errno.EFBIG, os.truncate, m / "img/chunks/0/0", 10**15)
    assert_errno(errno.EFBIG, os.truncate, m / "img/zarr.json", 10**15)
    assert (m / "img/data").stat().st_size == size
    m.unmount()
    assert store_snapshot(store) == before


# ------------------------------------------------------------- directories
def times(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_mtime_ns, info.st_ctime_ns


def changes_times(path: Path, change: Callable[[], object]) -> bool:
    """Whether `change` moved both mtime and ctime of directory `path`."""
    before = times(path)
    deadline = time.monotonic() + 5
    while time.time_ns() <= max(before) and time.monotonic() < deadline:
        pass  # until the clock has moved past the times the change must exceed
    change()
    after = times(path)
    return after[0] > before[0] and after[1] > before[1]


def test_directory_times_follow_their_entries(raw):
    top, other = raw / "top", raw / "other"
    top.mkdir()
    other.mkdir()
    assert changes_times(top, lambda: (top / "f").write_bytes(b"new"))
    assert changes_times(top, (top / "sub").mkdir)
    assert changes_times(top, lambda: os.rmdir(top / "sub"))
    assert changes_times(other, lambda: os.rename(top / "f", other / "f"))
    assert changes_times(top, lambda: os.rename(other / "f", top / "f"))
    assert changes_times(top, lambda: os.unlink(top / "f"))
    assert changes_times(raw.mount.path, lambda: os.rmdir(other))
    assert raw.stored() == {}


def test_a_directory_links_itself_its_parent_and_each_sub_directory(raw):
    (raw / "a").mkdir()
    assert os.stat(raw / "a").st_nlink == 2
    (raw / "a/f").write_bytes(b"a file is no link")
    (raw / "a/b").mkdir()
    (raw / "a/c").mkdir()
    (raw / "a/c/d").write_bytes(b"a key below makes c a stored prefix")
    assert os.stat(raw / "a").st_nlink == 4
    assert os.stat(raw.mount.path).st_nlink == 3
    os.rename(raw / "a/b", raw / "b")
    assert (os.stat(raw / "a").st_nlink, os.stat(raw.mount.path).st_nlink) == (3, 4)
    os.rmdir(raw / "b")
    assert os.stat(raw.mount.path).st_nlink == 3


def test_decoded_groups_link_their_child_nodes_and_take_the_times_of_changes(mount, store):
    m = mount(store)
    assert os.stat(m / "legacy").st_nlink == 2 + 1  # be
    assert os.stat(m / "img").st_nlink == 3  # chunks/
    assert os.stat(m / "img/chunks").st_nlink == 2 + 3  # a 3 x 3 grid: rows 0, 1, 2
    assert os.stat(m / "img/chunks/0").st_nlink == 2  # chunk files only
    assert changes_times(m.path, (m / "made").mkdir)
    assert os.stat(m.path).st_nlink == 2 + 4  # img, sharded, legacy, made
    assert changes_times(m / "legacy", lambda: os.rename(m / "made", m / "legacy/made"))
    assert (os.stat(m.path).st_nlink, os.stat(m / "legacy").st_nlink) == (2 + 3, 2 + 2)
    assert changes_times(m / "legacy", lambda: os.rmdir(m / "legacy/made"))
    assert os.stat(m / "legacy").st_nlink == 2 + 1


def test_a_group_moved_onto_an_empty_group_replaces_it_and_nothing_else_is_replaced(mount, store):
    m = mount(store)
    (m / "g1/inner").mkdir(parents=True)
    (m / "g2").mkdir()
    os.rename(m / "g1", m / "g2")  # rename(2) onto an empty directory replaces it
    (m / "g3").mkdir()
    subprocess.run(["mv", "-T", m / "g3", m / "g2/inner"], check=True)  # the same, by mv
    before = store_snapshot(store)
    assert_errno(errno.ENOTEMPTY, os.rename, m / "legacy", m / "g2")  # a group with a child
    assert_errno(errno.ENOTEMPTY, os.rename, m / "g2", m / "img")  # an array holds its files
    assert_errno(errno.ENOTDIR, os.rename, m / "g2", m / "img/data")
    assert sorted(os.listdir(m.path)) == ["g2", "img", "legacy", "sharded", "zarr.json"]
    assert sorted(os.listdir(m / "g2")) == ["inner", "zarr.json"]
    m.unmount()
    assert store_snapshot(store) == before
    root = zarr.open_group(store, mode="r")
    assert "g1" not in root and "g3" not in root
    assert list(root["g2"].group_keys()) == ["inner"] and not list(root["g2/inner"].keys())
    np.testing.assert_array_equal(root["img"][...], np.arange(120, dtype="float32").reshape(10, 12))


def test_a_decoded_file_open_while_its_array_is_removed_shows_nlink_0(mount, store):
    m = mount(store)
    size = os.stat(m / "img/data").st_size
    with open(m / "img/data", "rb") as f:
        f.read(16)
        subprocess.run(["rm", "-r", m / "img"], check=True)
        info = os.fstat(f.fileno())
        assert (info.st_nlink, info.st_size) == (0, size)
    assert not (m / "img").exists()
    m.unmount()
    assert not (store / "img").exists()


def test_a_local_store_shows_its_own_directories_times(mount, tmp_path):
    store = tmp_path / "store"
    (store / "old").mkdir(parents=True)
    (store / "old/key").write_bytes(b"value")
    os.utime(store / "old", ns=(10**18, 10**18))  # 2001-09-09
    m = mount(store, "--raw")
    assert os.stat(m / "old").st_mtime_ns == 10**18
    (m / "old/new").write_bytes(b"made through the mount")
    shown, stored = os.stat(m / "old").st_mtime, os.stat(store / "old").st_mtime
    assert abs(shown - stored) < 1 and stored > 10**9


def test_keys_past_what_s3_takes_fail_enametoolong_before_anything_is_made(raw):
    # S3 refuses keys of more than 1,024 bytes (KeyTooLongError, which moto does not
    # check), the mount's prefix ("data/") included; a local store has no such limit
    deep = "/".join(letter * 250 for letter in "abcd")
    os.makedirs(raw / deep)
    room = 1024 - len(f"data/{deep}/")
    (raw / deep / ("f" * room)).write_bytes(b"fits")
    if raw.kind == "s3":
        assert_errno(errno.ENAMETOOLONG, open, raw / deep / ("g" * (room + 1)), "wb")
        assert_errno(errno.ENAMETOOLONG, os.mkdir, raw / deep / ("d" * (room - 1)))
        assert_errno(errno.ENAMETOOLONG, os.rename, raw / deep / ("f" * room), raw / deep / ("h" * (room + 1)))
        assert sorted(os.listdir(raw / deep)) == ["f" * room]
        assert raw.stored() == {f"{deep}/{'f' * room}": b"fits"}
    else:
        (raw / deep / ("g" * (room + 1))).write_bytes(b"longer")
        assert len(raw.stored()) == 2
