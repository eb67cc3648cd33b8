"""Icechunk repositories written by icechunk and zarr-python, mounted through the command
line: the root shows the head of `main`; every version is browsable read-only under
/.zarrfs/versions; writes are staged and `zarrfs commit` (or the unmount) commits them,
as icechunk reads back; a conflicting commit fails with the changes still staged."""

from __future__ import annotations

import errno
import os
import signal

import numpy as np
import pytest

from tests.conftest import wait_for, zarrfs
from zarrfs.cli import process_alive
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem  # noqa: F401
from tests.icechunk_repos import FIRST, SECOND, read_array, write_repository

icechunk = pytest.importorskip("icechunk")
VERSIONS = ".zarrfs/versions"


@pytest.fixture
def local_repo(tmp_path):
    path = tmp_path / "repo"
    return str(path), write_repository(icechunk.local_filesystem_storage(str(path)))


def _chunk_bytes(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, dtype="<i4").tobytes()


def test_the_root_shows_the_head_and_every_version_is_browsable_read_only(mount, local_repo):
    path, written = local_repo
    m = mount(path)
    np.testing.assert_array_equal(np.load(m / "temp/data.npy"), SECOND)
    np.testing.assert_array_equal(np.load(m / "grp/x/data.npy"), read_array(written.storage, "grp/x"))
    assert sorted(os.listdir(m / VERSIONS)) == ["branches", "current", "log", "snapshots", "tags"]
    assert os.listdir(m / VERSIONS / "tags") == ["v1"] and os.listdir(m / VERSIONS / "branches") == ["main"]
    assert {written.first, written.second} <= set(os.listdir(m / VERSIONS / "snapshots"))
    for older in (m / VERSIONS / "tags/v1", m / VERSIONS / "snapshots" / written.first):
        np.testing.assert_array_equal(np.load(older / "temp/data.npy"), FIRST)
        assert sorted(os.listdir(older)) == ["temp", "zarr.json"]
        for write in (lambda: open(older / "temp/data", "r+b"), lambda: os.mkdir(older / "new"),
                      lambda: os.unlink(older / "temp/chunks/0/0")):
            with pytest.raises(OSError) as info:
                write()
            assert info.value.errno == errno.EROFS
    np.testing.assert_array_equal(np.load(m / VERSIONS / "branches/main/temp/data.npy"), SECOND)
    log = (m / VERSIONS / "log").read_text().splitlines()
    assert [line.split()[0] for line in log[:2]] == [written.second, written.first]
    assert [line.split(None, 2)[2] for line in log[:2]] == ["second", "first"]
    assert (m / VERSIONS / "current").read_text() == f"branch main at snapshot {written.second}\n"


def test_a_chunk_written_and_committed_is_a_snapshot_icechunk_reads(mount, local_repo):
    path, written = local_repo
    m = mount(path)
    (m / "temp/chunks/1/1").write_bytes(_chunk_bytes(np.full((3, 4), -5)))
    assert "changes staged" in (m / VERSIONS / "current").read_text()
    snapshot = zarrfs("commit", m.path, "-m", "five below").stdout.strip()
    info = next(iter(written.repository().ancestry(branch="main")))
    assert (info.id, info.message) == (snapshot, "five below")
    expected = SECOND.copy()
    expected[3:, 4:] = -5
    np.testing.assert_array_equal(read_array(written.storage, "temp"), expected)
    np.testing.assert_array_equal(np.load(m / VERSIONS / "snapshots" / snapshot / "temp/data.npy"), expected)
    assert (m / VERSIONS / "log").read_text().split()[0] == snapshot
    again = zarrfs("commit", m.path)
    assert again.stdout.strip() == snapshot and "nothing was staged" in again.stderr


def test_a_change_left_staged_is_committed_at_unmount(mount, local_repo):
    path, written = local_repo
    m = mount(path)
    with open(m / "temp/data", "r+b") as f:  # element [0, 1]
        f.seek(4)
        f.write(np.int32(99).tobytes())
    m.unmount()
    info = next(iter(written.repository().ancestry(branch="main")))
    assert info.id != written.second and "unmount" in info.message
    assert read_array(written.storage, "temp")[0, 1] == 99


def test_a_change_left_staged_is_committed_at_sigterm(mount, local_repo):
    path, written = local_repo
    m = mount(path)
    (m / "temp/chunks/0/1").write_bytes(_chunk_bytes(np.full((3, 4), 42)))
    os.kill(m.pid, signal.SIGTERM)
    wait_for(lambda: not process_alive(m.pid), timeout=30)
    assert "unmounted" in m.log_text() and "Traceback" not in m.log_text()
    np.testing.assert_array_equal(read_array(written.storage, "temp")[:3, 4:], 42)


def test_a_conflicting_commit_fails_and_keeps_the_changes_staged(mount, local_repo):
    import zarr

    path, written = local_repo
    m = mount(path)
    (m / "temp/chunks/0/0").write_bytes(_chunk_bytes(np.full((3, 4), 1)))
    other = written.repository().writable_session("main")
    zarr.open_array(other.store, path="temp")[0, 0] = 7
    theirs = other.commit("the other writer")
    result = zarrfs("commit", m.path, "-m", "mine", check=False)
    assert result.returncode != 0 and "conflict" in result.stderr
    assert "conflict" in m.log_text() or "moved" in m.log_text()
    assert next(iter(written.repository().ancestry(branch="main"))).id == theirs
    assert "changes staged" in (m / VERSIONS / "current").read_text()
    np.testing.assert_array_equal(np.load(m / "temp/data.npy")[:3, :4], 1)  # still staged, still shown


def test_a_tag_mount_is_read_only_and_names_its_snapshot(mount, local_repo):
    path, written = local_repo
    m = mount(path, "--ref", "v1")
    np.testing.assert_array_equal(np.load(m / "temp/data.npy"), FIRST)
    assert (m / VERSIONS / "current").read_text() == f"tag v1 at snapshot {written.first}\n"
    assert not (m / ".zarrfs/commit").exists()
    with pytest.raises(OSError) as info:
        (m / "temp/chunks/0/0").write_bytes(bytes(48))
    assert info.value.errno == errno.EROFS
    s = mount(path, "--snapshot", written.first)
    np.testing.assert_array_equal(np.load(s / "temp/data.npy"), FIRST)


def test_info_names_the_version_it_shows(local_repo):
    path, written = local_repo
    out = zarrfs("info", path).stdout
    assert out.splitlines()[0] == f"# branch main at snapshot {written.second}" and "temp  array" in out
    assert f"snapshot {written.first}" in zarrfs("info", path, "--ref", "v1").stdout


def test_a_repository_on_s3_mounts_commits_and_shows_versions(mount, s3_bucket, s3_endpoint):
    storage = icechunk.s3_storage(bucket=s3_bucket, prefix="repo", endpoint_url=s3_endpoint, allow_http=True,
                                  force_path_style=True, region="us-east-1", access_key_id="testing",
                                  secret_access_key="testing")
    written = write_repository(storage)
    m = mount(f"s3://{s3_bucket}/repo", "--storage-option", f"endpoint_url={s3_endpoint}")
    np.testing.assert_array_equal(np.load(m / "temp/data.npy"), SECOND)
    np.testing.assert_array_equal(np.load(m / VERSIONS / "tags/v1/temp/data.npy"), FIRST)
    (m / "temp/chunks/0/0").write_bytes(_chunk_bytes(np.zeros((3, 4))))
    snapshot = zarrfs("commit", m.path, "-m", "zeros on s3").stdout.strip()
    info = next(iter(written.repository().ancestry(branch="main")))
    assert (info.id, info.message) == (snapshot, "zeros on s3")
    np.testing.assert_array_equal(read_array(storage, "temp")[:3, :4], 0)
