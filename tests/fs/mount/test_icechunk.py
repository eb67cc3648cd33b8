"""Icechunk repositories written by icechunk and zarr-python, mounted through the command
line: the root shows the head of `main`; every version is browsable read-only under
/.zarrfs/versions; writes are staged and `zarrfs commit` (or the unmount) commits them,
as icechunk reads back; a conflicting commit fails with the changes still staged. With
icechunk 2: spec-2 repositories and metadata-only moves; with icechunk 1: their refusal."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import wait_for, zarrfs
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem  # noqa: F401
from tests.icechunk_repos import (
    FIRST,
    SECOND,
    arrays_of,
    read_array,
    write_rearranged_repository,
    write_repository,
    write_virtual_repository,
)
from zarrfs.cli import process_alive

icechunk = pytest.importorskip("icechunk")
VERSIONS = ".zarrfs/versions"
SPEC = int(icechunk.spec_version())  # the newest on-disk spec the installed icechunk reads
needs_icechunk2 = pytest.mark.skipif(SPEC < 2, reason="icechunk 2 (Python >= 3.12) writes spec 2 and moves nodes")
DATA = Path(__file__).parents[2] / "data"
SPEC2_REPO = DATA / "icechunk2/repo"  # written by its make.py


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
        for write in (
            lambda: open(older / "temp/data", "r+b"),
            lambda: os.mkdir(older / "new"),
            lambda: os.unlink(older / "temp/chunks/0/0"),
        ):
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


def test_a_branch_under_versions_reads_its_new_head_after_a_commit(mount, local_repo):
    path, written = local_repo
    m = mount(path)
    branch_npy = m / VERSIONS / "branches/main/temp/data.npy"
    np.testing.assert_array_equal(np.load(branch_npy), SECOND)  # the kernel now holds its pages
    (m / "temp/chunks/0/0").write_bytes(_chunk_bytes(np.full((3, 4), 8)))
    np.testing.assert_array_equal(np.load(branch_npy), SECOND)  # staged is not committed
    zarrfs("commit", m.path, "-m", "eights")
    expected = SECOND.copy()
    expected[:3, :4] = 8
    np.testing.assert_array_equal(np.load(branch_npy), expected)
    np.testing.assert_array_equal(read_array(written.storage, "temp"), expected)


def test_a_branch_under_versions_has_its_new_size_after_a_commit_that_grew_an_array(mount, local_repo):
    import json

    path, written = local_repo
    m = mount(path)
    branch_npy = m / VERSIONS / "branches/main/temp/data.npy"
    np.testing.assert_array_equal(np.load(branch_npy), SECOND)  # the kernel holds its size
    document = json.loads((m / "temp/zarr.json").read_text())
    document["shape"] = [9, 8]
    (m / "temp/zarr.json").write_text(json.dumps(document))
    zarrfs("commit", m.path, "-m", "three more rows")
    assert os.stat(branch_npy).st_size == os.stat(m / "temp/data.npy").st_size
    np.testing.assert_array_equal(np.load(branch_npy), read_array(written.storage, "temp"))


def test_a_directory_made_then_given_array_metadata_is_an_array_icechunk_reads(mount, local_repo):
    import json

    path, written = local_repo
    m = mount(path)
    (m / "grp/made").mkdir()  # a group, until its document says otherwise (as on any store)
    document = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 9,
        "codecs": [{"name": "bytes"}],
    }
    (m / "grp/made/zarr.json").write_text(json.dumps(document))
    (m / "grp/made/chunks/1").write_bytes(bytes([5, 6]))
    zarrfs("commit", m.path, "-m", "made")
    np.testing.assert_array_equal(read_array(written.storage, "grp/made"), [9, 9, 5, 6])
    np.testing.assert_array_equal(read_array(written.storage, "grp/x"), 0.5)  # its sibling stays


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


def _staged_then_committed_by_another(mount, local_repo, theirs_at: tuple[int, int]):
    """A mount with chunk (0, 0) of `temp` staged, and another writer's commit to main of
    the element at `theirs_at` since: (the mount, the repository written, their snapshot)."""
    import zarr

    path, written = local_repo
    m = mount(path)
    (m / "temp/chunks/0/0").write_bytes(_chunk_bytes(np.full((3, 4), 1)))
    other = written.repository().writable_session("main")
    zarr.open_array(other.store, path="temp")[theirs_at] = 7
    return m, written, other.commit("the other writer")


def test_a_conflicting_commit_fails_and_keeps_the_changes_staged(mount, local_repo):
    m, written, theirs = _staged_then_committed_by_another(mount, local_repo, (0, 0))
    result = zarrfs("commit", m.path, "-m", "mine", check=False)
    assert result.returncode != 0 and "conflict" in result.stderr and "/temp" in result.stderr
    assert "conflict" in m.log_text() or "moved" in m.log_text()
    assert next(iter(written.repository().ancestry(branch="main"))).id == theirs
    assert "changes staged" in (m / VERSIONS / "current").read_text()
    np.testing.assert_array_equal(np.load(m / "temp/data.npy")[:3, :4], 1)  # still staged, still shown


def test_a_commit_after_the_branch_is_reset_to_where_the_changes_began_succeeds(mount, local_repo):
    m, written, _ = _staged_then_committed_by_another(mount, local_repo, (0, 1))
    assert zarrfs("commit", m.path, "-m", "mine", check=False).returncode != 0
    written.repository().reset_branch("main", written.second)  # the snapshot `current` names
    snapshot = zarrfs("commit", m.path, "-m", "mine again").stdout.strip()
    head = next(iter(written.repository().ancestry(branch="main")))
    assert (head.id, head.message) == (snapshot, "mine again")
    expected = SECOND.copy()
    expected[:3, :4] = 1
    np.testing.assert_array_equal(read_array(written.storage, "temp"), expected)


def test_a_commit_is_rebased_onto_another_writers_commit_to_other_chunks(mount, local_repo):
    m, written, theirs = _staged_then_committed_by_another(mount, local_repo, (5, 7))
    snapshot = zarrfs("commit", m.path, "-m", "mine").stdout.strip()
    ancestry = [e.id for e in written.repository().ancestry(branch="main")]
    assert ancestry[:2] == [snapshot, theirs]
    expected = SECOND.copy()
    expected[:3, :4] = 1
    expected[5, 7] = 7
    np.testing.assert_array_equal(read_array(written.storage, "temp"), expected)


def test_a_conflict_at_unmount_that_no_rebase_resolves_is_kept_on_a_branch_of_its_own(mount, local_repo):
    import zarr

    path, written = local_repo
    m = mount(path)
    (m / "temp/chunks/0/0").write_bytes(_chunk_bytes(np.full((3, 4), 1)))
    other = written.repository().writable_session("main")
    zarr.open_array(other.store, path="temp")[0, 0] = 7  # the same chunk
    theirs = other.commit("the other writer")
    m.unmount()
    repo = written.repository()
    assert next(iter(repo.ancestry(branch="main"))).id == theirs
    (kept,) = set(repo.list_branches()) - {"main"}
    assert f"branch {kept}" in m.log_text()
    assert [e.id for e in repo.ancestry(branch=kept)][1] == written.second  # off the session's start
    expected = SECOND.copy()
    expected[:3, :4] = 1
    np.testing.assert_array_equal(read_array(written.storage, "temp", branch=kept), expected)


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
    assert out.splitlines()[0] == f"# branch main at snapshot {written.second}" and "temp array" in " ".join(
        out.split()
    )
    assert f"snapshot {written.first}" in zarrfs("info", path, "--ref", "v1").stdout


def test_a_repository_on_s3_mounts_commits_and_shows_versions(mount, s3_bucket, s3_endpoint):
    storage = icechunk.s3_storage(
        bucket=s3_bucket,
        prefix="repo",
        endpoint_url=s3_endpoint,
        allow_http=True,
        force_path_style=True,
        region="us-east-1",
        access_key_id="testing",
        secret_access_key="testing",
    )
    written = write_repository(storage)
    m = mount(f"s3://{s3_bucket}/repo", "--storage-option", f"endpoint_url={s3_endpoint}")
    np.testing.assert_array_equal(np.load(m / "temp/data.npy"), SECOND)
    np.testing.assert_array_equal(np.load(m / VERSIONS / "tags/v1/temp/data.npy"), FIRST)
    (m / "temp/chunks/0/0").write_bytes(_chunk_bytes(np.zeros((3, 4))))
    snapshot = zarrfs("commit", m.path, "-m", "zeros on s3").stdout.strip()
    info = next(iter(written.repository().ancestry(branch="main")))
    assert (info.id, info.message) == (snapshot, "zeros on s3")
    np.testing.assert_array_equal(read_array(storage, "temp")[:3, :4], 0)


def test_a_branch_as_of_a_time_is_the_snapshot_it_had_then(mount, local_repo):
    path, written = local_repo
    repo = written.repository()
    first, second = (repo.lookup_snapshot(s) for s in (written.first, written.second))
    m = mount(path)
    branches = m / VERSIONS / "branches"
    np.testing.assert_array_equal(np.load(branches / f"main@{first.written_at.isoformat()}/temp/data.npy"), FIRST)
    np.testing.assert_array_equal(np.load(branches / f"main@{second.written_at:%Y-%m-%d}/temp/data.npy"), SECOND)
    head_in_log = (m / VERSIONS / "log").read_text().split()[1]  # to the second, as the log shows it
    np.testing.assert_array_equal(np.load(branches / f"main@{head_in_log}/temp/data.npy"), SECOND)
    assert not (branches / "main@2000-01-01").exists() and not (branches / "main@yesterday").exists()
    assert os.listdir(branches) == ["main"]


def test_a_virtual_chunk_fails_eio_naming_its_container_and_stored_chunks_read(mount, tmp_path):
    import zarr

    blobs = tmp_path / "blobs"
    blobs.mkdir()
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    values = write_virtual_repository(storage, str(blobs))
    local = getattr(getattr(icechunk, "credentials", None), "LocalFileSystemAccess", None)  # None: icechunk 1
    authorized = icechunk.Repository.open(storage, authorize_virtual_chunk_access={f"file://{blobs}/": local})
    oracle = zarr.open_array(authorized.readonly_session(branch="main").store, path="v", mode="r")[...]
    assert oracle[:8].tobytes() == values  # icechunk reads it where the opener authorizes the container
    m = mount(tmp_path / "repo")
    assert (m / "v/chunks/1").read_bytes() == oracle[8:].tobytes()
    with pytest.raises(OSError) as info:
        (m / "v/chunks/0").read_bytes()
    assert info.value.errno == errno.EIO
    assert f"file://{blobs}/" in m.log_text() and "authorize" in m.log_text()


@pytest.mark.skipif(SPEC >= 2, reason="icechunk 2 reads spec-2 repositories")
def test_a_spec2_repository_is_refused_in_one_line_naming_what_it_needs(mount, tmp_path):
    for command in (("info", str(SPEC2_REPO)), ("mount", str(SPEC2_REPO), str(tmp_path))):
        result = zarrfs(*command, check=False)
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "spec 2 needs icechunk >= 2" in lines[0] and "Python >= 3.12" in lines[0]
        # what to do, for this Python: another Python (icechunk 2 installs on 3.12 and later), or an upgrade
        remedy = "run zarrfs on Python 3.12 or later" if sys.version_info < (3, 12) else "pip install --upgrade"
        assert remedy in lines[0], lines[0]
    assert not os.path.ismount(tmp_path)


@pytest.mark.parametrize("spec", [1, 2])
def test_a_repository_of_either_spec_mounts_commits_and_stays_of_its_spec(mount, tmp_path, spec):
    from zarrfs.store.icechunk_repository import icechunk_spec

    if spec > SPEC:
        pytest.skip(f"icechunk {icechunk.__version__} reads no spec-{spec} repository")
    shutil.copytree(DATA / f"icechunk{spec}/repo", tmp_path / "repo")  # written by its make.py
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    written = read_array(storage, "x")
    m = mount(tmp_path / "repo")
    assert (m / "x/data").read_bytes() == written.astype("<i2").tobytes()
    (m / "x/chunks/1").write_bytes(np.array([-1, -2, -3], dtype="<i2").tobytes())
    snapshot = zarrfs("commit", m.path, "-m", "through zarrfs").stdout.strip()
    assert next(iter(icechunk.Repository.open(storage).ancestry(branch="main"))).id == snapshot
    np.testing.assert_array_equal(read_array(storage, "x"), [*written[:3], -1, -2, -3])
    assert icechunk_spec(str(tmp_path / "repo"), None) == spec


@pytest.fixture
def rearranged_repo(tmp_path):
    path = tmp_path / "repo"
    return str(path), write_rearranged_repository(icechunk.local_filesystem_storage(str(path)))


def _versions_of(written) -> dict[str, dict]:
    """Every version of the repository by its directory under /.zarrfs/versions."""
    versions = {"branches/main": {"branch": "main"}, "branches/dev": {"branch": "dev"}, "tags/v1": {"tag": "v1"}}
    for snapshot in [written.first, written.second, *written.later]:
        versions[f"snapshots/{snapshot}"] = {"snapshot_id": snapshot}
    return versions


@needs_icechunk2
def test_every_version_of_an_icechunk2_repository_reads_byte_exact(mount, rearranged_repo):
    path, written = rearranged_repo
    assert written.repository().spec_version == 2
    m = mount(path, "--read-only")
    assert sorted(os.listdir(m / VERSIONS / "branches")) == ["dev", "main"]
    assert set(os.listdir(m / VERSIONS / "snapshots")) >= {written.first, written.second, *written.later}
    assert [line.split(None, 2)[2] for line in (m / VERSIONS / "log").read_text().splitlines()[:3]] == [
        "fifth",
        "moved",
        "third",
    ]
    seen = set()
    for where, version in [
        ("", {"branch": "main"}),
        *((f"{VERSIONS}/{d}/", v) for d, v in _versions_of(written).items()),
    ]:
        expected = arrays_of(written.storage, **version)
        for array_path, values in expected.items():
            data = (m / where / array_path / "data").read_bytes()
            assert data == values.astype(values.dtype.newbyteorder("<")).tobytes(), (where, array_path)
            assert np.load(m / where / array_path / "data.npy").tobytes() == data
            seen.add((where.split("/")[-2] if where else "root", array_path))
        assert set(os.listdir(m.path / where)) >= {p.split("/")[0] for p in expected}
    assert {"moved/y", "late", "grp/x"} <= {p for _, p in seen} and len(seen) >= 8
    assert not (m / "grp").exists() and (m / "moved/x").is_dir()


@needs_icechunk2
def test_writes_to_an_icechunk2_branch_commit_and_icechunk_reads_them(mount, rearranged_repo):
    path, written = rearranged_repo
    m = mount(path, "--ref", "dev")
    (m / "temp/chunks/0/0").write_bytes(_chunk_bytes(np.full((3, 4), 11)))
    snapshot = zarrfs("commit", m.path, "-m", "on dev").stdout.strip()
    head = next(iter(written.repository().ancestry(branch="dev")))
    assert (head.id, head.message) == (snapshot, "on dev")
    expected = -FIRST
    expected[:3, :4] = 11
    np.testing.assert_array_equal(read_array(written.storage, "temp", branch="dev"), expected)
    np.testing.assert_array_equal(read_array(written.storage, "temp"), SECOND)  # main untouched


@needs_icechunk2
def test_mv_of_a_node_on_a_branch_is_a_metadata_only_move_in_a_commit(mount, rearranged_repo):
    path, written = rearranged_repo
    repo = written.repository()
    node_id = repo.readonly_session(branch="main").get_node_id("/late")
    before = arrays_of(written.storage, branch="main")
    m = mount(path)
    os.rename(m / "late", m / "moved/late")
    head = next(iter(repo.ancestry(branch="main")))
    assert head.message == "zarrfs: moved /late to /moved/late"
    session = repo.readonly_session(branch="main")
    assert session.get_node_id("/moved/late") == node_id  # the same node, not a copy of it
    after = arrays_of(written.storage, branch="main")
    assert set(after) == set(before) - {"late"} | {"moved/late"}
    np.testing.assert_array_equal(after["moved/late"], before["late"])
    assert (m / "moved/late/data").read_bytes() == before["late"].astype("<i8").tobytes()
    assert not (m / "late").exists() and "changes staged" not in (m / VERSIONS / "current").read_text()
    assert (m / VERSIONS / "log").read_text().split()[0] == head.id
    np.testing.assert_array_equal(
        np.load(m / VERSIONS / "snapshots" / written.later[-1] / "late/data.npy"), before["late"]
    )


@needs_icechunk2
def test_a_branch_under_versions_shows_a_metadata_only_move_at_once(mount, rearranged_repo):
    path, _written = rearranged_repo
    m = mount(path)
    branch = m / VERSIONS / "branches/main"
    assert "late" in os.listdir(branch)  # its name resolved, to the head before the move
    os.rename(m / "late", m / "moved/late")  # a commit of its own
    assert "late" not in os.listdir(branch) and (branch / "moved/late/data").is_file()


@needs_icechunk2
def test_a_branch_or_tag_named_with_a_slash_shows_it_as_a_fullwidth_solidus(mount, local_repo):
    path, written = local_repo
    repo = written.repository()
    repo.create_branch("feature/x", written.first)  # icechunk 2 takes git's names
    repo.create_tag("release/1", written.second)
    m = mount(path)
    assert sorted(os.listdir(m / VERSIONS / "branches")) == ["feature\uff0fx", "main"]  # as rclone shows one
    assert sorted(os.listdir(m / VERSIONS / "tags")) == ["release\uff0f1", "v1"]
    np.testing.assert_array_equal(np.load(m / VERSIONS / "branches/feature\uff0fx/temp/data.npy"), FIRST)
    np.testing.assert_array_equal(np.load(m / VERSIONS / "tags/release\uff0f1/temp/data.npy"), SECOND)


@needs_icechunk2
def test_mv_onto_an_empty_group_replaces_it_in_the_session(mount, rearranged_repo):
    path, written = rearranged_repo
    before = arrays_of(written.storage, branch="main")
    m = mount(path)
    (m / "empty").mkdir()
    os.rename(m / "late", m / "empty")  # as rename(2) replaces an empty directory
    with pytest.raises(OSError) as refused:
        os.rename(m / "temp", m / "moved")  # a group with children stays
    assert refused.value.errno == errno.ENOTEMPTY
    zarrfs("commit", m.path, "-m", "replaced")
    after = arrays_of(written.storage, branch="main")
    assert "late" not in after and set(after) == set(before) - {"late"} | {"empty"}
    np.testing.assert_array_equal(after["empty"], before["late"])


@needs_icechunk2
def test_mv_with_writes_staged_copies_the_node_into_the_session(mount, rearranged_repo):
    path, written = rearranged_repo
    m = mount(path)
    (m / "temp/chunks/0/0").write_bytes(_chunk_bytes(np.full((3, 4), 5)))
    os.rename(m / "late", m / "later")
    assert next(iter(written.repository().ancestry(branch="main"))).id == written.later[-1]  # nothing committed
    snapshot = zarrfs("commit", m.path, "-m", "both").stdout.strip()
    after = arrays_of(written.storage, branch="main")
    assert "late" not in after and next(iter(written.repository().ancestry(branch="main"))).id == snapshot
    np.testing.assert_array_equal(after["later"], np.arange(6).reshape(2, 3) - 3)
    np.testing.assert_array_equal(after["temp"][:3, :4], 5)
