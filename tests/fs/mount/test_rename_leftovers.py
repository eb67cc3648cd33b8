"""`mv` of an array on a mount of S3 (copy, then delete) whose deletes the endpoint
refuses: moto behind a fault proxy answering DeleteObjects with 403. Where only the
chunks' delete fails, mv succeeds, `zarrfs stats` counts the keys left, and the next
mount shows the destination alone (from consolidated metadata, or listing the store); where nothing can be deleted, mv fails EIO and the
next mount shows both copies, whole; and the same where the endpoint refuses each key in
an answer of 200 (a bucket policy), through either S3 client. zarr-python reading the
bucket is the oracle."""

from __future__ import annotations

import errno
import json
import os
from urllib.parse import urlparse

import numpy as np
import pytest
import zarr
from zarr.storage import FsspecStore

from tests.conftest import zarrfs
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem  # noqa: F401
from tests.faults import FaultProxy
from zarrfs.store.moves import ERASE_ATTEMPTS

VALUES = np.arange(64, dtype="int32").reshape(8, 8)


@pytest.fixture
def deletes_refused(s3_endpoint):
    url = urlparse(s3_endpoint)
    proxy = FaultProxy(url.hostname or "127.0.0.1", url.port or 80)
    proxy.refuse_matching, proxy.refuse_status, proxy.error_code = b"?delete", 403, "AccessDenied"
    yield proxy
    proxy.close()


def _bucket(s3_bucket, s3_endpoint):
    url = f"s3://{s3_bucket}/job.zarr"
    store = FsspecStore.from_url(url, storage_options={"endpoint_url": s3_endpoint, "asynchronous": True})
    root = zarr.open_group(store, mode="w")
    root.create_array("src", shape=(8, 8), chunks=(4, 4), dtype="int32")[...] = VALUES
    zarr.consolidate_metadata(store)
    return url, store


def _keys(s3_filesystem, url: str, name: str) -> list[str]:
    path = url.removeprefix("s3://") + "/" + name
    s3_filesystem.invalidate_cache()
    return sorted(p[len(path) + 1 :] for p in s3_filesystem.find(path))


def test_chunks_left_by_a_failed_delete_are_counted_and_the_next_mount_shows_the_destination(
    mount,
    deletes_refused,
    s3_bucket,
    s3_endpoint,
    s3_filesystem,
):
    url, store = _bucket(s3_bucket, s3_endpoint)
    deletes_refused.pass_first = 1  # the documents' delete goes through, the chunks' does not
    m = mount(url, "--storage-option", f"endpoint_url={deletes_refused.endpoint}")
    os.rename(m / "src", m / "dst")
    assert sorted(os.listdir(m.path)) == ["dst", "zarr.json"]
    stats = json.loads(zarrfs("stats", m.path).stdout)
    assert stats["rename_leftovers"] == 4, stats  # the four chunks
    m.unmount()

    assert _keys(s3_filesystem, url, "src") == ["c/0/0", "c/0/1", "c/1/0", "c/1/1"]  # no zarr.json
    opened = zarr.open_group(store, mode="r")
    assert sorted(opened.keys()) == ["dst"]
    np.testing.assert_array_equal(opened["dst"][...], VALUES)
    again = mount(url, "--storage-option", f"endpoint_url={s3_endpoint}", "--read-only")
    assert sorted(os.listdir(again.path)) == ["dst", "zarr.json"]
    assert (again / "dst/data").read_bytes() == VALUES.tobytes()
    listed = mount(url, "--storage-option", f"endpoint_url={s3_endpoint}", "--read-only", "--consolidated", "never")
    assert sorted(os.listdir(listed.path)) == ["dst", "zarr.json"]  # the store listed: src is no node


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_deletes_refused_key_by_key_are_tried_again_named_in_the_log_and_counted(
    mount, deletes_refused, s3_bucket, s3_endpoint, s3_filesystem, backend
):
    """DeleteObjects answered 200 with an error for each key: the chunks' delete fails so
    each of its tries (the documents' went through), and the log names the four chunks."""
    url, store = _bucket(s3_bucket, s3_endpoint)
    deletes_refused.pass_first, deletes_refused.refuse_each_key = 1, True
    m = mount(url, "--storage-option", f"endpoint_url={deletes_refused.endpoint}", "--s3-backend", backend)
    os.rename(m / "src", m / "dst")
    assert sorted(os.listdir(m.path)) == ["dst", "zarr.json"]
    stats = json.loads(zarrfs("stats", m.path).stdout)
    assert stats["rename_leftovers"] == 4, stats
    assert deletes_refused.matched == 1 + ERASE_ATTEMPTS
    m.unmount()
    [line] = [x for x in m.log_text().splitlines() if "rename of src to dst" in x]
    assert "4 source key(s) left" in line and all(f"src/c/{i}/{j}" in line for i in (0, 1) for j in (0, 1)), line

    assert _keys(s3_filesystem, url, "src") == ["c/0/0", "c/0/1", "c/1/0", "c/1/1"]
    assert sorted(zarr.open_group(store, mode="r").keys()) == ["dst"]
    listed = mount(url, "--storage-option", f"endpoint_url={s3_endpoint}", "--read-only", "--consolidated", "never")
    assert sorted(os.listdir(listed.path)) == ["dst", "zarr.json"]
    assert (listed / "dst/data").read_bytes() == VALUES.tobytes()


def test_a_source_that_cannot_be_deleted_fails_mv_and_the_next_mount_shows_both_copies(
    mount,
    deletes_refused,
    s3_bucket,
    s3_endpoint,
    s3_filesystem,
):
    url, store = _bucket(s3_bucket, s3_endpoint)
    m = mount(url, "--storage-option", f"endpoint_url={deletes_refused.endpoint}")
    with pytest.raises(OSError) as failed:
        os.rename(m / "src", m / "dst")
    assert failed.value.errno == errno.EIO
    stats = json.loads(zarrfs("stats", m.path).stdout)
    assert stats["rename_leftovers"] == 5, stats  # zarr.json and the four chunks
    m.unmount()

    assert _keys(s3_filesystem, url, "src") == _keys(s3_filesystem, url, "dst")
    again = mount(url, "--storage-option", f"endpoint_url={s3_endpoint}", "--read-only")
    assert sorted(os.listdir(again.path)) == ["dst", "src", "zarr.json"]
    opened = zarr.open_group(store, mode="r")
    for name in ("src", "dst"):
        np.testing.assert_array_equal(opened[name][...], VALUES)
        assert (again / name / "data").read_bytes() == VALUES.tobytes()
