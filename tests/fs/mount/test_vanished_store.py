"""docs/errors.md, a store that vanishes, through a real mount: once the directory a mount
serves is removed or replaced, listings, reads and writes fail (ENOENT or EIO), nothing
reads as the fill value, and nothing is made under the old path."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import numpy as np
import pytest
import zarr

from tests.conftest import tree_snapshot, wait_for
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem  # noqa: F401 (fixtures)

TTL = 0.5
GONE = (errno.ENOENT, errno.EIO)


def _fails(action) -> int:
    try:
        action()
    except OSError as exc:
        return exc.errno
    raise AssertionError(f"{action} did not fail")


def _listing_fails(path) -> bool:
    try:
        os.listdir(path)
    except OSError:
        return True
    return False  # what was known, until the ttl passes and a refresh finds the store gone


def _write_chunk(path) -> None:
    with open(path, "r+b") as f:
        f.write(b"\x01" * 80)


@pytest.mark.parametrize("how", ["removed", "replaced by mkdir", "replaced by another directory"])
@pytest.mark.parametrize("mode", ["decoded", "raw"])
def test_a_store_root_gone_from_under_the_mount_fails_and_is_not_recreated(mount, tmp_path, how, mode):
    root = tmp_path / "store.zarr"
    g = zarr.open_group(root, mode="w")
    g.create_array("img", shape=(10, 12), chunks=(4, 5), dtype="float32", fill_value=0.0)[:] = 1.5
    m = mount(root, "--metadata-ttl", str(TTL), *(["--raw"] if mode == "raw" else []))
    assert sorted(os.listdir(m.path)) == ["img", "zarr.json"]
    np.save(tmp_path / "x.npy", np.arange(6))
    data, chunk = ("img/zarr.json", "img/c/0/0") if mode == "raw" else ("img/data", "img/chunks/0/0")

    shutil.rmtree(root)
    if how == "replaced by mkdir":
        root.mkdir()
    elif how == "replaced by another directory":
        other = tmp_path / "other"
        other.mkdir()
        (other / "kept").write_bytes(b"untouched")
        other.rename(root)
    before = tree_snapshot(root) if root.exists() else None
    wait_for(lambda: _listing_fails(m.path))  # what the mount (and the kernel) knew of the store has expired

    assert _fails(lambda: os.listdir(m.path)) in GONE
    assert _fails((m / data).read_bytes) in GONE  # never the fill value
    assert _fails((m / chunk).read_bytes) in GONE
    copied = subprocess.run(["cp", str(tmp_path / "x.npy"), str(m.path)], capture_output=True, text=True)
    assert copied.returncode != 0, copied
    assert _fails(lambda: os.mkdir(m / "newgroup")) in GONE
    assert _fails(lambda: _write_chunk(m / chunk)) in GONE

    if before is None:
        assert not root.exists(), sorted(os.listdir(root))
    else:
        assert tree_snapshot(root) == before
    m.unmount()
    assert "store" in m.log_text() and ("removed" in m.log_text() or "replaced" in m.log_text())


def test_a_bucket_deleted_under_the_mount_fails_and_is_not_recreated(
    mount, s3_filesystem, s3_bucket, s3_endpoint, tmp_path
):
    local = tmp_path / "x.zarr"
    zarr.create_array(str(local / "img"), shape=(10, 12), chunks=(4, 5), dtype="float32", fill_value=0.0)[:] = 1.5
    zarr.open_group(str(local), mode="a")
    s3_filesystem.put(str(local), f"{s3_bucket}/x.zarr", recursive=True)
    m = mount(
        f"s3://{s3_bucket}/x.zarr",
        "--storage-option",
        f"endpoint_url={s3_endpoint}",
        "--metadata-ttl",
        str(TTL),
        "--timeout",
        "5",
    )
    assert sorted(os.listdir(m.path)) == ["img", "zarr.json"]
    np.save(tmp_path / "x.npy", np.arange(6))

    s3_filesystem.rm(s3_bucket, recursive=True)
    assert not s3_filesystem.exists(s3_bucket)
    wait_for(lambda: _listing_fails(m.path))

    assert _fails(lambda: os.listdir(m.path)) in GONE
    assert _fails((m / "img/data").read_bytes) in GONE
    assert _fails((m / "img/chunks/0/0").read_bytes) in GONE
    copied = subprocess.run(["cp", str(tmp_path / "x.npy"), str(m.path)], capture_output=True, text=True)
    assert copied.returncode != 0, copied
    assert _fails(lambda: os.mkdir(m / "newgroup")) in GONE
    assert _fails(lambda: _write_chunk(m / "img/chunks/0/0")) in GONE
    assert not s3_filesystem.exists(s3_bucket)
    m.unmount()
    assert "bucket does not exist" in m.log_text()
