"""Several mounts of one store at once, as the nodes of a cluster make them (each mount a
daemon of its own): nodes copy arrays in, set their attributes, remove some and write
their rows of a shared array, all at the same time. After every mount is gone, zarr-python
opening the store the default way (consolidated metadata first) sees exactly what the
nodes' acknowledged operations add up to, on S3, on a local directory and on Icechunk."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for, zarrfs
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem, s3_storage_options  # noqa: F401
from zarrfs.cli import is_mounted

NODES = 4
ROUNDS = 4
ROW = 16  # the shared array's row: one chunk, one per node


def _start(store) -> None:
    """What every node mounts: a group `g` and an array `shared`, consolidated, by zarr-python."""
    root = zarr.open_group(store, mode="w")
    root.create_group("g")
    root.create_array("shared", shape=(NODES, ROW), chunks=(1, ROW), dtype="int32", fill_value=0)
    zarr.consolidate_metadata(store)


def _values(node: int, round_: int) -> np.ndarray:
    return np.arange(10, dtype="int32") + 100 * node + round_


def _node(mnt: Path, node: int, work: Path, start: threading.Barrier, outcome: dict, contend: bool) -> None:
    """One node's job: each round copies a .npy into g and sets an attribute on the array
    it makes, every second round removes the one before; once, every node makes g/common
    at the same moment; then it writes its row of `shared`. `outcome` gets the arrays it
    left and whether its mkdir succeeded."""
    kept: dict[str, int] = {}
    start.wait()
    for round_ in range(ROUNDS):
        name = f"n{node}r{round_}"
        source = work / f"{name}.npy"
        np.save(source, _values(node, round_))
        subprocess.run(["cp", source, mnt / "g"], check=True)
        os.setxattr(mnt / "g" / name, "user.zarr.round", json.dumps(round_).encode())
        kept[name] = round_
        if round_ % 2:
            previous = f"n{node}r{round_ - 1}"
            subprocess.run(["rm", "-r", mnt / "g" / previous], check=True)
            del kept[previous]
        if round_ == 1 and contend:
            start.wait()  # every node at once
            try:
                os.mkdir(mnt / "g" / "common")
                outcome[node, "mkdir"] = True
            except FileExistsError:
                outcome[node, "mkdir"] = False
    fd = os.open(mnt / "shared" / "data", os.O_WRONLY)
    try:
        os.pwrite(fd, np.full(ROW, node + 1, dtype="<i4").tobytes(), node * ROW * 4)
        os.fsync(fd)
    finally:
        os.close(fd)
    outcome[node] = kept


def _run_nodes(mounts: list, work: Path, contend: bool = True) -> dict:
    outcome: dict = {}
    start = threading.Barrier(len(mounts))
    threads = [
        threading.Thread(target=_node, args=(m.path, i, work, start, outcome, contend)) for i, m in enumerate(mounts)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(i in outcome for i in range(len(mounts))), "a node failed: see its traceback above"
    return outcome


def _check(root: zarr.Group, outcome: dict, common: bool) -> None:
    """The store, as zarr-python opens it, holds what the nodes left, each array whole."""
    expected = {name: r for node in range(NODES) for name, r in outcome[node].items()}
    group = root["g"]
    assert sorted(group.array_keys()) == sorted(expected)
    for name, round_ in expected.items():
        node = int(name[1 : name.index("r")])
        np.testing.assert_array_equal(group[name][...], _values(node, round_))
        assert group[name].attrs["round"] == round_
    assert sorted(group.group_keys()) == (["common"] if common else [])
    np.testing.assert_array_equal(
        root["shared"][...], np.repeat(np.arange(1, NODES + 1, dtype="int32")[:, None], ROW, axis=1)
    )


def _mkdirs_won(outcome: dict) -> int:
    return sum(outcome[node, "mkdir"] for node in range(NODES))


def _stats(m) -> dict:
    return json.loads(zarrfs("stats", m.path).stdout)


def test_four_nodes_on_one_bucket_lose_nothing(mount, s3_bucket, s3_endpoint, tmp_path):
    from zarr.storage import FsspecStore

    url = f"s3://{s3_bucket}/job.zarr"
    options = {"endpoint_url": s3_endpoint, "asynchronous": True}
    _start(FsspecStore.from_url(url, storage_options=options))
    mounts = [mount(url, "--storage-option", f"endpoint_url={s3_endpoint}") for _ in range(NODES)]
    outcome = _run_nodes(mounts, tmp_path)
    assert _mkdirs_won(outcome) == 1  # one node made it, the others were told EEXIST
    stats = [_stats(m) for m in mounts]
    assert all("store_precondition_failed" in s and "consolidated_retries" in s for s in stats)
    for m in mounts:
        m.unmount()
    _check(
        zarr.open_group(FsspecStore.from_url(url, storage_options=options), mode="r", use_consolidated=True),
        outcome,
        True,
    )


def test_four_nodes_on_one_directory_lose_nothing(mount, tmp_path):
    store = tmp_path / "job.zarr"
    _start(zarr.storage.LocalStore(store))
    work = tmp_path / "work"
    work.mkdir()
    mounts = [mount(store) for _ in range(NODES)]
    outcome = _run_nodes(mounts, work)
    assert _mkdirs_won(outcome) == 1
    for m in mounts:
        m.unmount()
    _check(
        zarr.open_group(zarr.storage.LocalStore(store, read_only=True), mode="r", use_consolidated=True), outcome, True
    )


def test_four_nodes_on_one_icechunk_branch_lose_nothing(mount, tmp_path):
    icechunk = pytest.importorskip("icechunk")
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    repository = icechunk.Repository.create(storage)
    session = repository.writable_session("main")
    root = zarr.open_group(session.store, mode="w")  # Icechunk keeps no consolidated metadata
    root.create_group("g")
    root.create_array("shared", shape=(NODES, ROW), chunks=(1, ROW), dtype="int32", fill_value=0)
    session.commit("the job's start")
    work = tmp_path / "work"
    work.mkdir()
    mounts = [mount(tmp_path / "repo") for _ in range(NODES)]
    # (no node makes g/common: each would in a session of its own, and the commits after
    # the first could not take theirs, a conflict that no rebase resolves)
    outcome = _run_nodes(mounts, work, contend=False)
    for m in mounts:
        m.unmount()
    assert "conflict" not in "".join(m.log_text() for m in mounts)
    session = icechunk.Repository.open(storage).readonly_session(branch="main")
    _check(zarr.open_group(session.store, mode="r"), outcome, False)


@pytest.fixture
def two_arrays_repo(tmp_path):
    """An Icechunk repository whose main holds arrays `a` and `b` (zarr-python wrote them)."""
    icechunk = pytest.importorskip("icechunk")
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    session = icechunk.Repository.create(storage).writable_session("main")
    root = zarr.open_group(session.store, mode="w")
    for name in ("a", "b"):
        root.create_array(name, shape=(8,), chunks=(4,), dtype="int32", fill_value=0)
    session.commit("a and b")
    return tmp_path / "repo", storage


def _write_chunk(m, array: str, value: int) -> None:
    (m / array / "chunks" / "0").write_bytes(np.full(4, value, dtype="<i4").tobytes())


def _main(storage) -> zarr.Group:
    import icechunk

    return zarr.open_group(icechunk.Repository.open(storage).readonly_session(branch="main").store, mode="r")


def test_two_mounts_on_one_branch_writing_different_arrays_both_commit(mount, two_arrays_repo):
    path, storage = two_arrays_repo
    first, second = mount(path), mount(path)
    _write_chunk(first, "a", 1)
    _write_chunk(second, "b", 2)
    zarrfs("commit", first.path, "-m", "a from the first node")
    zarrfs("commit", second.path, "-m", "b from the second node")  # rebased onto the first's
    root = _main(storage)
    np.testing.assert_array_equal(root["a"][:4], 1)
    np.testing.assert_array_equal(root["b"][:4], 2)


def test_two_mounts_writing_one_chunk_the_second_commit_fails_ebusy_naming_it(mount, two_arrays_repo):
    path, storage = two_arrays_repo
    first, second = mount(path), mount(path)
    _write_chunk(first, "a", 1)
    _write_chunk(second, "a", 2)
    zarrfs("commit", first.path, "-m", "the first node's")
    fd = os.open(second / ".zarrfs/commit", os.O_RDWR)
    try:
        os.write(fd, b"the second node's")
        with pytest.raises(OSError) as refused:
            os.fsync(fd)
        outcome = os.pread(fd, 4096, 0).decode()
    finally:
        os.close(fd)
    assert refused.value.errno == errno.EBUSY
    assert outcome.startswith("conflict") and "/a" in outcome
    assert "changes staged" in (second / ".zarrfs/versions/current").read_text()  # kept staged
    np.testing.assert_array_equal(_main(storage)["a"][:4], 1)


def test_commit_every_commits_what_is_staged_while_the_mount_lives(mount, two_arrays_repo):
    import icechunk

    path, storage = two_arrays_repo
    m = mount(path, "--commit-every", "1")
    _write_chunk(m, "a", 5)

    def head_message() -> str:
        return next(iter(icechunk.Repository.open(storage).ancestry(branch="main"))).message

    wait_for(lambda: head_message() == "zarrfs: periodic commit")
    np.testing.assert_array_equal(_main(storage)["a"][:4], 5)
    assert is_mounted(str(m.path))


def test_a_rewrite_takes_in_the_nodes_other_writers_made_or_removed_beside_its_own(mount, tmp_path):
    store = tmp_path / "job.zarr"
    _start(zarr.storage.LocalStore(store))
    zarr.open_group(zarr.storage.LocalStore(store), path="g", mode="r+").create_array("old", shape=(2,), dtype="i1")
    zarr.consolidate_metadata(zarr.storage.LocalStore(store))
    m = mount(store)
    # another writer (zarr-python, consolidating nothing) adds one array and removes another
    zarr.open_group(zarr.storage.LocalStore(store), path="g", mode="r+", use_consolidated=False).create_array(
        "theirs", shape=(3,), dtype="i2", fill_value=7
    )
    shutil.rmtree(store / "g" / "old")
    np.save(tmp_path / "mine.npy", np.arange(4, dtype="int32"))
    subprocess.run(["cp", tmp_path / "mine.npy", m / "g"], check=True)
    m.unmount()
    group = zarr.open_group(zarr.storage.LocalStore(store, read_only=True), mode="r", use_consolidated=True)["g"]
    assert sorted(group.array_keys()) == ["mine", "theirs"]
    np.testing.assert_array_equal(group["theirs"][...], 7)
