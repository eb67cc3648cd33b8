"""The Icechunk store adapter without a kernel: an Icechunk repository is recognised by
its layout; its keys read and write through the Store interface from any thread, an
asyncio or trio one included; commits, conflicts and versions are icechunk's own."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.icechunk_repos import FIRST, SECOND, read_array, write_repository
from zarrfs.store import CommitConflictError, IcechunkStore, KeyNotFoundError, LocalStore, StoreError, open_store

icechunk = pytest.importorskip("icechunk")


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    return str(path), write_repository(icechunk.local_filesystem_storage(str(path)))


def test_a_repository_is_recognised_and_opens_the_head_of_main(repo):
    path, written = repo
    store = open_store(path)
    assert isinstance(store, IcechunkStore) and not store.read_only
    assert store.version == f"branch main at snapshot {written.second}"
    assert store.list_dir("") == (["zarr.json"], ["grp", "temp"])
    assert store.list_dir("temp/") == (["zarr.json"], ["c"])
    assert "temp/c/1/1" in store.list_prefix("temp/")


def test_a_tag_or_a_snapshot_opens_read_only(repo):
    path, written = repo
    assert open_store(path, ref="v1").version == f"tag v1 at snapshot {written.first}"
    store = open_store(path, snapshot=written.first)
    assert store.read_only and store.list_dir("")[1] == ["temp"]
    with pytest.raises(StoreError):
        store.set("temp/c/0/0", b"x")
    with pytest.raises(KeyNotFoundError):
        open_store(path, ref="nope")


def test_keys_that_icechunk_cannot_hold_read_as_missing(repo):
    store = open_store(repo[0], read_only=True)
    assert store.get(".zgroup") is None and store.get("temp/.zarray") is None
    assert store.get("nothing/zarr.json") is None and store.get_info("temp/c/9/9") is None
    size, mtime = store.get_info("temp/zarr.json")
    assert size == len(store.get("temp/zarr.json")) and mtime is None


def test_byte_ranges_read_what_the_whole_value_holds(repo):
    from zarrfs.store import ByteRange

    store = open_store(repo[0], read_only=True)
    whole = store.get("temp/zarr.json")
    assert store.get("temp/zarr.json", ByteRange.span(3, 10)) == whole[3:10]
    assert store.get("temp/zarr.json", ByteRange.from_offset(5)) == whole[5:]
    assert store.get("temp/zarr.json", ByteRange.suffix(4)) == whole[-4:]


def test_calls_block_from_inside_other_event_loops(repo):
    import trio

    store = open_store(repo[0], read_only=True)
    expected = store.get("zarr.json")

    async def inside():
        return store.get("zarr.json")

    assert asyncio.run(inside()) == expected
    assert trio.run(inside) == expected


def test_a_commit_is_a_snapshot_icechunk_reads_with_its_message(repo):
    path, written = repo
    store = open_store(path)
    chunk = open_store(path, read_only=True).get("temp/c/0/0")
    store.erase("temp/c/1/1")
    assert store.has_staged_changes()
    snapshot = store.commit("erase a chunk")
    assert not store.has_staged_changes() and store.commit("again") is None
    ancestry = list(written.repository().ancestry(branch="main"))
    assert (ancestry[0].id, ancestry[0].message) == (snapshot, "erase a chunk")
    values = read_array(written.storage, "temp")
    np.testing.assert_array_equal(values[3:, 4:], 0)
    np.testing.assert_array_equal(values[:3], SECOND[:3])
    store.set("temp/c/1/1", chunk)  # the session goes on after a commit
    store.commit("put it back as the first chunk")
    np.testing.assert_array_equal(read_array(written.storage, "temp")[3:, 4:], SECOND[:3, :4])


def test_a_conflicting_commit_keeps_the_changes_staged(repo):
    path, written = repo
    store = open_store(path)
    store.erase("temp/c/0/0")
    other = written.repository().writable_session("main")
    import zarr

    zarr.open_array(other.store, path="temp")[0, 0] = 7
    other.commit("the other writer")
    with pytest.raises(CommitConflictError):
        store.commit("mine")
    assert store.has_staged_changes() and store.get("temp/c/0/0") is None
    assert read_array(written.storage, "temp")[0, 0] == 7
    np.testing.assert_array_equal(read_array(written.storage, "temp", tag="v1"), FIRST)


def test_the_on_disk_spec_is_known_from_the_layout_without_the_library(repo):
    from pathlib import Path

    from zarrfs.store.icechunk_repository import icechunk_spec

    newest = int(icechunk.spec_version())  # what the installed icechunk writes by default
    assert icechunk_spec(repo[0], None) == newest
    spec2 = str(Path(__file__).parents[1] / "data/icechunk2/repo")  # written by icechunk 2
    assert icechunk_spec(spec2, None) == 2
    if newest < 2:
        with pytest.raises(StoreError, match="spec 2 needs icechunk >= 2"):
            open_store(spec2, read_only=True)
    else:
        assert open_store(spec2, read_only=True).list_dir("") == (["zarr.json"], ["x"])


def test_a_plain_hierarchy_is_not_a_repository(tmp_path):
    import zarr

    zarr.open_group(tmp_path / "plain.zarr", mode="w").create_group("refs")
    assert isinstance(open_store(str(tmp_path / "plain.zarr")), LocalStore)
    with pytest.raises(StoreError):
        open_store(str(tmp_path / "plain.zarr"), ref="main")


def test_a_repository_on_s3_opens_with_the_storage_options(s3_bucket, s3_storage_options):
    storage = icechunk.s3_storage(
        bucket=s3_bucket,
        prefix="repo",
        endpoint_url=s3_storage_options["endpoint_url"],
        allow_http=True,
        force_path_style=True,
        region="us-east-1",
        access_key_id="testing",
        secret_access_key="testing",
    )
    written = write_repository(storage)
    store = open_store(f"s3://{s3_bucket}/repo", s3_storage_options)
    assert isinstance(store, IcechunkStore) and store.snapshot_id == written.second
    store.erase("temp/c/0/0")
    snapshot = store.commit("on s3")
    assert next(iter(written.repository().ancestry(branch="main"))).id == snapshot
    np.testing.assert_array_equal(read_array(storage, "temp")[:3, :4], 0)


def test_writes_racing_commits_land_in_one_commit_or_the_next(repo):
    import threading

    path, written = repo
    store = open_store(path)
    chunks = {f"temp/c/{i // 2}/{i % 2}": bytes(open_store(path, read_only=True).get("temp/c/0/0")) for i in range(4)}
    errors = []

    def writer(key: str, value: bytes) -> None:
        try:
            for _ in range(20):
                store.set(key, value)
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=item) for item in chunks.items()]
    for thread in threads:
        thread.start()
    for _ in range(5):  # a few commits while the writes go on (each commit costs a snapshot)
        store.commit("while writing")
    for thread in threads:
        thread.join()
    store.commit("the rest")
    assert not errors and not store.has_staged_changes()
    np.testing.assert_array_equal(read_array(written.storage, "temp"), np.tile(SECOND[:3, :4], (2, 2)))
