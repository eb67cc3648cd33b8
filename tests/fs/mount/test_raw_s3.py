"""Passthrough mode (`--raw`) over an S3 bucket (a moto server on 127.0.0.1): what
zarr-python, tensorstore, cp and dd do through the mount lands in the bucket byte for
byte, and reads (ranged gets with readahead) return the stored bytes."""

from __future__ import annotations

import errno
import hashlib
import os
import stat

import numpy as np
import pytest

from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem, s3_storage_options  # noqa: F401
from tests.fs.mount.test_raw import (
    assert_errno,
    assert_reads_match,
    run,
    sha256sum_files,
    tree_bytes,
    write_with_tensorstore,
    write_with_zarr_python,
)

PREFIX = "data/store"


def bucket_bytes(s3_filesystem, bucket: str) -> dict[str, bytes]:
    """Every object under the mounted prefix as {key relative to it: value}."""
    base = f"{bucket}/{PREFIX}/"
    paths = s3_filesystem.find(base)
    return {path[len(base) :]: s3_filesystem.cat_file(path) for path in paths}


@pytest.fixture
def s3_mount(mount, s3_bucket, s3_endpoint):
    """mount_s3(*options) -> Mount of s3://BUCKET/data/store, endpoint and keys as storage options."""

    def mount_s3(*options: str):
        return mount(
            f"s3://{s3_bucket}/{PREFIX}",
            "--raw",
            "--storage-option",
            f"endpoint_url={s3_endpoint}",
            "--storage-option",
            "key=testing",
            "--storage-option",
            "secret=testing",
            *options,
        )

    return mount_s3


def test_zarr_python_and_tensorstore_write_through_the_mount_into_the_bucket(
    s3_mount, s3_bucket, s3_filesystem, tmp_path
):
    m = s3_mount()
    write_with_zarr_python(m.path)
    write_with_tensorstore(m.path)
    reference = tmp_path / "reference"
    write_with_zarr_python(reference)
    write_with_tensorstore(reference)
    assert bucket_bytes(s3_filesystem, s3_bucket) == tree_bytes(reference)
    assert tree_bytes(m.path) == tree_bytes(reference)


def test_cp_r_diff_r_and_sha256sum_agree_with_the_bucket(s3_mount, s3_bucket, s3_filesystem, tmp_path):
    source = tmp_path / "source"
    write_with_zarr_python(source)
    (source / "notes").mkdir()
    (source / "notes" / "a b.txt").write_bytes(b"spaces\n")
    (source / "notes" / "empty").write_bytes(b"")
    m = s3_mount()
    assert run("cp", "-r", f"{source}/.", m.path).returncode == 0
    assert bucket_bytes(s3_filesystem, s3_bucket) == tree_bytes(source)
    copy = tmp_path / "copy"
    assert run("cp", "-r", m.path, copy).returncode == 0
    assert run("diff", "-r", source, copy).returncode == 0
    assert run("diff", "-r", source, m.path).returncode == 0
    stored = bucket_bytes(s3_filesystem, s3_bucket)
    assert sha256sum_files(m.path) == {key: hashlib.sha256(v).hexdigest() for key, v in stored.items()}


def test_large_object_reads_match_with_dd_and_random_pread(s3_mount, s3_bucket, s3_filesystem, tmp_path):
    size = 32 << 20
    value = np.random.default_rng(3).integers(0, 256, size, dtype=np.uint8).tobytes()
    s3_filesystem.pipe(f"{s3_bucket}/{PREFIX}/big", value)
    m = s3_mount()
    assert_reads_match(m / "big", value, tmp_path / "out", 12, [1, 4096, 300_000], seed=4)


def test_mv_and_rm_r_of_directories_copy_and_delete_objects(s3_mount, s3_bucket, s3_filesystem, tmp_path):
    base = f"{s3_bucket}/{PREFIX}"
    s3_filesystem.pipe({f"{base}/a/x": b"x", f"{base}/a/sub/y": b"yy", f"{base}/keep": b"k"})
    m = s3_mount()
    os.rename(m / "a", m / "b")
    assert bucket_bytes(s3_filesystem, s3_bucket) == {"b/x": b"x", "b/sub/y": b"yy", "keep": b"k"}
    assert_errno(errno.ENOTEMPTY, os.rmdir, m / "b")
    assert run("rm", "-r", m / "b").returncode == 0
    assert bucket_bytes(s3_filesystem, s3_bucket) == {"keep": b"k"}
    assert sorted(os.listdir(m.path)) == ["keep"]


def test_a_read_only_mount_of_a_bucket_refuses_writes_with_erofs(s3_mount, s3_bucket, s3_filesystem):
    s3_filesystem.pipe(f"{s3_bucket}/{PREFIX}/k", b"value")
    m = s3_mount("--read-only")
    assert (m / "k").read_bytes() == b"value"
    assert_errno(errno.EROFS, open, m / "k", "wb")
    assert_errno(errno.EROFS, os.unlink, m / "k")
    assert bucket_bytes(s3_filesystem, s3_bucket) == {"k": b"value"}


def test_an_empty_bucket_mounts(s3_mount):
    m = s3_mount()
    assert os.listdir(m.path) == []
    (m / "first").write_bytes(b"1")
    assert os.listdir(m.path) == ["first"]


def test_an_unreachable_store_is_eio_and_the_mount_recovers_when_it_returns(
    mount, s3_endpoint, s3_filesystem, s3_bucket
):
    from moto.server import ThreadedMotoServer

    from tests.conftest_s3 import free_port

    # a second server over the same in-process buckets, which the test can stop and restart
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    s3_filesystem.pipe({f"{s3_bucket}/{PREFIX}/k": b"value", f"{s3_bucket}/{PREFIX}/d/x": b"x"})
    try:
        m = mount(
            f"s3://{s3_bucket}/{PREFIX}",
            "--raw",
            "--metadata-ttl",
            "0",
            "--storage-option",
            f"endpoint_url=http://127.0.0.1:{port}",
            "--storage-option",
            "key=testing",
            "--storage-option",
            "secret=testing",
        )
        assert (m / "k").read_bytes() == b"value"
        server.stop()
        assert_errno(errno.EIO, os.listdir, m / "d")
        assert_errno(errno.EIO, (m / "new").write_bytes, b"lost")
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        assert os.listdir(m / "d") == ["x"]
        (m / "new").write_bytes(b"stored")
        assert s3_filesystem.cat_file(f"{s3_bucket}/{PREFIX}/new") == b"stored"
        assert "EIO" in m.log_text()
    finally:
        server.stop()


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_keys_with_control_characters_are_files_like_any_other(s3_mount, s3_bucket, s3_filesystem, backend):
    # S3 takes them (aws s3 cp, s3fs-fuse and rclone make them); obstore's paths cannot hold
    # them (moto takes those that XML 1.0 can carry, as DeleteObjects asks)
    s3_filesystem.pipe({f"{s3_bucket}/{PREFIX}/tab\there": b"tab", f"{s3_bucket}/{PREFIX}/d\x7f/del\x7f": b"del"})
    m = s3_mount("--s3-backend", backend)
    assert sorted(os.listdir(m.path)) == ["d\x7f", "tab\there"]
    assert run("cat", m / "tab\there", m / "d\x7f/del\x7f").stdout == "tabdel"
    assert run("sh", "-c", 'printf new > "$1" && cp "$1" "$1.copy"', "sh", m / "new\x7f").returncode == 0
    assert run("mv", m / "tab\there", m / "moved\tthere").returncode == 0
    assert run("chmod", "600", m / "moved\tthere").returncode == 0
    os.link(m / "d\x7f/del\x7f", m / "d\x7f/linked\t")
    assert run("rm", m / "new\x7f").returncode == 0
    m.unmount()
    assert bucket_bytes(s3_filesystem, s3_bucket) == {
        "new\x7f.copy": b"new",
        "moved\tthere": b"tab",
        "d\x7f/del\x7f": b"del",
        "d\x7f/linked\t": b"del",
    }
    head = s3_filesystem.call_s3("head_object", Bucket=s3_bucket, Key=f"{PREFIX}/moved\tthere")
    assert head["Metadata"]["mode"] == str(stat.S_IFREG | 0o600)
