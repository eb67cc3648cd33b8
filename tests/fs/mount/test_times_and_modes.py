"""Times, modes and owners through `--raw` mounts (docs/times-and-modes.md):
what chmod, chown, touch, cp -p and rsync -a set is kept by the store, on a local file
itself and on S3 as object metadata in rclone's and s3fs-fuse's names, so that a second
`rsync -a` sends nothing, across an unmount and a remount too. The decoded tree holds
what they set for the life of the mount, and stores none of it."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem, s3_storage_options  # noqa: F401
from tests.fs.mount.test_raw import run
from tests.fs.mount.test_raw_s3 import PREFIX, s3_mount  # noqa: F401 (a fixture)

OLD = 1_000_000_000_123_456_789  # 2001-09-09, with nanoseconds


def source_tree(root: Path) -> Path:
    """Files and directories of several modes and old times, as a user's tree."""
    (root / "sub" / "deeper").mkdir(parents=True)
    for i, (name, mode) in enumerate(
        [("a.txt", 0o644), ("run.sh", 0o755), ("secret", 0o600), ("sub/b.bin", 0o640), ("sub/deeper/c", 0o444)]
    ):
        path = root / name
        path.write_bytes(os.urandom(1000 + 777 * i))
        path.chmod(mode)
        os.utime(path, ns=(OLD + i, OLD + i * 1_000_000_001))
    (root / "sub").chmod(0o750)
    return root


def rsync(source: Path, target: Path) -> int:
    """rsync -a source/ target/; the number of regular files it sent."""
    done = run("rsync", "-a", "--stats", f"{source}/", f"{target}/")
    assert done.returncode == 0, done.stderr
    found = re.search(r"Number of regular files transferred: ([\d,]+)", done.stdout)
    assert found, done.stdout
    return int(found.group(1).replace(",", ""))


def attributes(root: Path) -> dict[str, tuple[int, int, int]]:
    """(mode, mtime in ns, size) of every file and directory below `root`."""
    found = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            info = path.stat()
            is_file = name in files
            found[str(path.relative_to(root))] = (
                info.st_mode,
                info.st_mtime_ns if is_file else 0,
                info.st_size if is_file else 0,
            )
    return found


def test_chmod_chown_touch_are_kept_on_the_local_file_and_across_a_remount(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "f").write_bytes(b"data")
    m = mount(store, "--raw")
    f = m / "f"
    f.chmod(0o751)
    os.chown(f, 1234, 4321)
    run("touch", "-d", "2001-09-09 01:46:40.123456789 UTC", f)
    (m / "d").mkdir(mode=0o700)
    os.utime(m / "d", ns=(OLD, OLD))
    info = f.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, info.st_mtime_ns) == (0o751, 1234, 4321, OLD)
    on_disk = (store / "f").stat()
    assert (stat.S_IMODE(on_disk.st_mode), on_disk.st_uid, on_disk.st_gid, on_disk.st_mtime_ns) == (
        0o751,
        1234,
        4321,
        OLD,
    )
    assert stat.S_IMODE((store / "d").stat().st_mode) == 0o700
    assert (store / "d").stat().st_mtime_ns == OLD
    m.unmount()
    m = mount(store, "--raw")
    info = (m / "f").stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, info.st_mtime_ns) == (0o751, 1234, 4321, OLD)
    assert stat.S_IMODE((m / "d").stat().st_mode) == 0o700
    assert (m / "d").stat().st_mtime_ns == OLD


def test_directories_made_and_removed_through_the_mount_are_made_and_removed_in_the_local_store(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw", "--metadata-ttl", "0")
    (m / "d").mkdir(mode=0o750)
    (m / "d" / "f").write_bytes(b"x")
    (m / "d" / "f").unlink()
    assert (store / "d").is_dir()  # left empty, kept with its mode
    assert stat.S_IMODE((store / "d").stat().st_mode) == 0o750
    (m / "d").rmdir()
    assert not (store / "d").exists()
    assert os.listdir(m.path) == []


def test_a_rewritten_file_keeps_its_mode_and_takes_the_time_of_the_write(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw")
    f = m / "script"
    f.write_bytes(b"#!/bin/sh\n")
    f.chmod(0o750)
    os.utime(f, ns=(OLD, OLD))
    with open(f, "ab") as out:
        out.write(b"echo hi\n")
    info = (store / "script").stat()
    assert stat.S_IMODE(info.st_mode) == 0o750
    assert info.st_mtime_ns > OLD
    assert stat.S_IMODE(f.stat().st_mode) == 0o750


def test_cp_p_keeps_modes_and_times(mount, tmp_path):
    source = source_tree(tmp_path / "source")
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw")
    done = run("cp", "-rp", f"{source}/.", str(m.path))
    assert done.returncode == 0, done.stderr
    assert attributes(m.path) == attributes(source)
    assert attributes(store) == attributes(source)


def test_rsync_a_twice_sends_nothing_the_second_time_on_a_local_store(mount, tmp_path):
    source = source_tree(tmp_path / "source")
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw")
    assert rsync(source, m.path) == 5
    assert rsync(source, m.path) == 0
    assert attributes(store) == attributes(source)
    m.unmount()
    m = mount(store, "--raw")
    assert rsync(source, m.path) == 0
    assert attributes(m.path) == attributes(source)


def head_metadata(s3_filesystem, bucket: str, key: str) -> dict[str, str]:
    bucket_key = f"{PREFIX}/{key}"
    return s3_filesystem.call_s3("head_object", Bucket=bucket, Key=bucket_key)["Metadata"]


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_rsync_a_twice_sends_nothing_the_second_time_on_s3(s3_mount, s3_bucket, s3_filesystem, tmp_path, backend):
    source = source_tree(tmp_path / "source")
    m = s3_mount("--s3-backend", backend)
    assert rsync(source, m.path) == 5
    assert rsync(source, m.path) == 0
    files = {k: v for k, v in attributes(source).items() if (source / k).is_file()}
    assert {k: v for k, v in attributes(m.path).items() if k in files} == files
    # the object's user metadata, in rclone's and s3fs-fuse's names
    meta = head_metadata(s3_filesystem, s3_bucket, "run.sh")
    mtime = (source / "run.sh").stat().st_mtime_ns
    assert meta["mtime"] == f"{mtime // 10**9}.{mtime % 10**9:09d}".rstrip("0")
    assert meta["mode"] == str(stat.S_IFREG | 0o755)
    assert meta["uid"] == str(os.getuid()) and meta["gid"] == str(os.getgid())
    m.unmount()
    m = s3_mount("--s3-backend", backend)
    assert rsync(source, m.path) == 0
    assert {k: v for k, v in attributes(m.path).items() if k in files} == files


def test_times_and_modes_that_rclone_and_s3fs_fuse_wrote_are_shown(s3_mount, s3_bucket, s3_filesystem):
    # as rclone writes them (X-Amz-Meta-Mtime, float seconds) and s3fs-fuse (mode as a
    # decimal st_mode, uid, gid)
    s3_filesystem.call_s3(
        "put_object", Bucket=s3_bucket, Key=f"{PREFIX}/rclone", Body=b"r", Metadata={"mtime": "1600000000.25"}
    )
    s3_filesystem.call_s3(
        "put_object",
        Bucket=s3_bucket,
        Key=f"{PREFIX}/s3fs",
        Body=b"s",
        Metadata={"mtime": "1500000000", "mode": "33261", "uid": "1001", "gid": "1002"},
    )
    m = s3_mount()
    rclone, s3fs = (m / "rclone").stat(), (m / "s3fs").stat()
    assert rclone.st_mtime_ns == 1_600_000_000_250_000_000
    assert (s3fs.st_mtime_ns, stat.S_IMODE(s3fs.st_mode), s3fs.st_uid, s3fs.st_gid) == (
        1_500_000_000_000_000_000,
        0o755,
        1001,
        1002,
    )


def test_chmod_of_an_object_changes_its_metadata_and_keeps_its_bytes(s3_mount, s3_bucket, s3_filesystem):
    s3_filesystem.call_s3(
        "put_object",
        Bucket=s3_bucket,
        Key=f"{PREFIX}/k",
        Body=b"value",
        ContentType="text/plain",
        Metadata={"md5chksum": "kept"},
    )
    m = s3_mount()
    (m / "k").chmod(0o600)
    os.utime(m / "k", ns=(OLD, OLD))
    head = s3_filesystem.call_s3("head_object", Bucket=s3_bucket, Key=f"{PREFIX}/k")
    assert head["Metadata"]["mode"] == str(stat.S_IFREG | 0o600)
    assert head["Metadata"]["mtime"] == "1000000000.123456789"
    assert head["Metadata"]["md5chksum"] == "kept"  # another tool's metadata stays
    assert head["ContentType"] == "text/plain"
    assert s3_filesystem.cat_file(f"{s3_bucket}/{PREFIX}/k") == b"value"


def test_the_decoded_tree_holds_modes_owners_and_times_without_storing_them(mount, tmp_path):
    root = tmp_path / "store.zarr"
    zarr.create_array(root, shape=(4,), chunks=(2,), dtype="int8")[:] = np.arange(4, dtype="int8")
    before = sorted((p.name, p.stat().st_mode, p.stat().st_mtime_ns) for p in root.rglob("*"))
    m = mount(root)
    os.chmod(m / "data", 0o600)
    os.chown(m / "data", 1, 1)
    assert run("touch", "-d", "2001-01-01", m / "data").returncode == 0
    shown = os.stat(m / "data")
    assert (shown.st_mode & 0o777, shown.st_uid, shown.st_gid) == (0o600, 1, 1)
    assert time.gmtime(shown.st_mtime).tm_year == 2001
    m.unmount()
    assert sorted((p.name, p.stat().st_mode, p.stat().st_mtime_ns) for p in root.rglob("*")) == before


def sent(source: Path, target: Path) -> set[str]:
    """rsync -a source/ target/; the files it sent (their sizes and times differed)."""
    done = run("rsync", "-a", "--out-format=%n", f"{source}/", f"{target}/")
    assert done.returncode == 0, done.stderr
    return {line for line in done.stdout.splitlines() if line and not line.endswith("/")}


def past_the_second_of(path: Path) -> None:
    """Until the clock is past the whole second of `path`'s mtime: rsync compares whole
    seconds, so a change within that second would look like none to it."""
    stamp = os.stat(path).st_mtime
    wait_for(lambda: int(time.time()) > int(stamp), timeout=5)


def test_rsync_from_the_decoded_tree_sends_what_the_mount_changed_and_nothing_else(mount, tmp_path):
    """A file of the decoded tree takes the time of the mount's last change of its node:
    `data` keeps its size whatever is written to it, so a time that stood still would have
    rsync skip it as unchanged and keep the old bytes."""
    root, backup = tmp_path / "store.zarr", tmp_path / "backup"
    group = zarr.create_group(root / "g")
    img = group.create_array("img", shape=(8, 6), chunks=(4, 3), dtype="<i4")
    img[...] = np.arange(48, dtype="<i4").reshape(8, 6)
    group.create_array("other", shape=(4,), chunks=(2,), dtype="<i2")[...] = 7
    m = mount(root)
    first = sent(m / "g", backup)
    assert {"img/data", "img/chunks/0/0", "other/data"} <= first
    assert sent(m / "g", backup) == set()  # nothing changed: nothing sent
    past_the_second_of(backup / "img/data")
    (m / "g/img/chunks/1/1").write_bytes(np.full((4, 3), -1, dtype="<i4").tobytes())
    subprocess.run(
        ["dd", f"of={m / 'g/img/data'}", "bs=4", "seek=2", "conv=notrunc", "status=none"],
        input=np.int32(99).tobytes(),
        check=True,
    )
    again = sent(m / "g", backup)
    assert {"img/data", "img/data.npy", "img/chunks/1/1", "img/chunks/0/0"} <= again
    assert not any(name.startswith("other/") for name in again)
    m.unmount()
    expected = np.arange(48, dtype="<i4").reshape(8, 6)
    expected[4:8, 3:6] = -1
    expected[0, 2] = 99
    np.testing.assert_array_equal(zarr.open_array(root / "g/img", mode="r")[...], expected)
    assert (backup / "img/data").read_bytes() == expected.tobytes()
    np.testing.assert_array_equal(np.load(backup / "img/data.npy"), expected)


def test_a_node_changed_by_another_writer_shows_a_new_time_once_seen(mount, tmp_path):
    root, backup = tmp_path / "store.zarr", tmp_path / "backup"
    arr = zarr.create_array(root / "a", shape=(4,), chunks=(2,), dtype="<i2", attributes={"units": "K"})
    arr[...] = 1
    m = mount(root, "--metadata-ttl", "0.2")
    assert "zarr.json" in sent(m / "a", backup)
    past_the_second_of(backup / "zarr.json")
    shown = os.stat(m / "a/zarr.json").st_mtime_ns
    zarr.open_array(root / "a", mode="r+").attrs["units"] = "C"  # the document keeps its size
    # seen once its metadata is read again (--metadata-ttl)
    wait_for(lambda: os.stat(m / "a/zarr.json").st_mtime_ns != shown, timeout=10)
    assert "zarr.json" in sent(m / "a", backup)
    assert json.loads((backup / "zarr.json").read_bytes())["attributes"] == {"units": "C"}


def test_rsync_from_the_decoded_tree_sends_the_arrays_of_groups_moved_into_each_other_s_place(mount, tmp_path):
    """A node moved changes the names of every node below it: their files take the time of
    the move, or rsync would keep the bytes of the array that held the name before."""
    root, backup = tmp_path / "store.zarr", tmp_path / "backup"
    for name, value in (("g", 1), ("h", 2)):
        zarr.create_group(root / name).create_array("x", shape=(4,), chunks=(2,), dtype="<i2")[...] = value
    m = mount(root)
    assert {"g/x/data", "h/x/data"} <= sent(m.path, backup)
    past_the_second_of(backup / "g/x/data")
    os.rename(m / "g", m / "swap")
    os.rename(m / "h", m / "g")
    os.rename(m / "swap", m / "h")
    assert {"g/x/data", "h/x/data", "g/x/chunks/0", "h/x/chunks/0"} <= sent(m.path, backup)
    assert (backup / "g/x/data").read_bytes() == np.full(4, 2, dtype="<i2").tobytes()
    assert (backup / "h/x/data").read_bytes() == np.full(4, 1, dtype="<i2").tobytes()
