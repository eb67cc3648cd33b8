"""docs/errors.md, Bounded memory, for files written through a mount: a 2 GiB file (dense, and
sparse) written through `--raw` to a local store, large files to S3 (moto, both
backends) and a `.npy` copied in are stored from their spool piece by piece. The daemon's
peak resident memory (VmHWM) grows by at most its budget for uploads plus a fixed margin,
whatever the file's size; the store holds exactly the bytes written (hashed after
unmount); a store that fails halfway through an upload fails the close and keeps the old
value, with no upload left behind."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for
from tests.conftest_s3 import proxy, s3_bucket, s3_endpoint, s3_filesystem, s3_storage_options  # noqa: F401

MIB = 1 << 20
GIB = 1 << 30
# what the daemon may grow by beyond its upload budget: FUSE request buffers, one part being
# read, the imports a first write brings in. It does not depend on the file's size.
MARGIN = 48 * MIB
UPLOAD_MEMORY = 32 * MIB  # --memory-target 256M gives uploads an eighth


def peak(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmHWM:"))


def write_pattern(path: Path, size: int, block: int = 4 * MIB) -> str:
    """Write `size` bytes of a cheap non-repeating pattern to `path`; their sha256."""
    base = np.frombuffer(os.urandom(block), dtype=np.uint64)
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for i in range(0, size, block):
            piece = (base + np.uint64(i)).tobytes()[: size - i]
            f.write(piece)
            digest.update(piece)
    return digest.hexdigest()


def write_sparse(path: Path, size: int) -> None:
    """One byte, "z", at offset `size` - 1 of a new file (pjdfstest's open/25.t)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.pwrite(fd, b"z", size - 1)
    finally:
        os.close(fd)


def assert_sparse(path: Path, size: int) -> None:
    """`path` is what write_sparse wrote, and its hole is a hole: only its data regions
    (SEEK_DATA) are read, and they are zeros but the last byte."""
    assert path.stat().st_size == size
    fd = os.open(path, os.O_RDONLY)
    try:
        regions, offset = [], 0
        while True:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError as exc:
                assert exc.errno == errno.ENXIO  # noqa: PT017 (the end of the data, as lseek says it)
                break
            offset = os.lseek(fd, start, os.SEEK_HOLE)
            regions.append((start, offset))
        assert sum(end - start for start, end in regions) < 16 * MIB, f"the hole was written out: {regions}"
        data = b"".join(os.pread(fd, end - start, start) for start, end in regions)
        assert data.lstrip(b"\0") == b"z" and regions[-1][1] == size
    finally:
        os.close(fd)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(64 * MIB):
            digest.update(piece)
    return digest.hexdigest()


def test_two_gib_dense_and_sparse_through_raw_on_a_local_store(mount, tmp_path):
    root = tmp_path / "store"
    root.mkdir()
    m = mount(root, "--raw")
    before = peak(m.pid)
    dense = write_pattern(m / "dense", 2 * GIB)
    write_sparse(m / "sparse", 2 * GIB + 2)
    grown = peak(m.pid) - before
    m.unmount()
    assert grown < MARGIN, f"the daemon's peak grew by {grown / MIB:.0f} MiB"
    assert file_digest(root / "dense") == dense
    assert_sparse(root / "sparse", 2 * GIB + 2)


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_large_files_through_raw_on_s3_in_bounded_parts(mount, s3_bucket, s3_endpoint, s3_filesystem, backend):
    """160 MiB dense and 256 MiB sparse (moto is slow and keeps every byte in its own
    memory: sizes kept moderate, each several times what the daemon may grow by); the
    uploads' share of a 256 MiB memory target is 32 MiB."""
    m = mount(
        f"s3://{s3_bucket}/raw",
        "--raw",
        "--s3-backend",
        backend,
        "--memory-target",
        "256M",
        "--storage-option",
        f"endpoint_url={s3_endpoint}",
        "--storage-option",
        "key=testing",
        "--storage-option",
        "secret=testing",
    )
    before = peak(m.pid)
    dense = write_pattern(m / "dense", 160 * MIB)
    write_sparse(m / "sparse", 256 * MIB + 1)
    grown = peak(m.pid) - before
    m.unmount()
    assert grown < UPLOAD_MEMORY + MARGIN, f"the daemon's peak grew by {grown / MIB:.0f} MiB"
    hashed, nonzero = hashlib.sha256(), b""
    with s3_filesystem.open(f"{s3_bucket}/raw/dense", "rb", block_size=64 * MIB) as f:
        while piece := f.read(64 * MIB):
            hashed.update(piece)
    assert hashed.hexdigest() == dense
    assert s3_filesystem.size(f"{s3_bucket}/raw/sparse") == 256 * MIB + 1
    with s3_filesystem.open(f"{s3_bucket}/raw/sparse", "rb", block_size=64 * MIB) as f:
        while piece := f.read(64 * MIB):
            nonzero += piece.lstrip(b"\0")  # zeros, then "z" at the end: only that "z" is left
    assert nonzero == b"z" and s3_filesystem.cat_file(f"{s3_bucket}/raw/sparse", start=-1) == b"z"


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_an_upload_that_fails_halfway_fails_the_close_and_keeps_the_old_value(
    mount, s3_bucket, s3_filesystem, proxy, backend
):
    s3_filesystem.pipe(f"{s3_bucket}/raw/big", b"the old value")
    m = mount(
        f"s3://{s3_bucket}/raw",
        "--raw",
        "--s3-backend",
        backend,
        "--timeout",
        "5",
        "--storage-option",
        f"endpoint_url={proxy.endpoint}",
        "--storage-option",
        "key=testing",
        "--storage-option",
        "secret=testing",
    )
    proxy.refuse_matching = b"partNumber=3"  # the third part of every upload fails
    with pytest.raises(OSError) as info:
        write_pattern(m / "big", 40 * MIB)
    assert info.value.errno == errno.EIO
    proxy.refuse_matching = None
    # the kernel sends the release that drops the spool after close() has returned
    wait_for(lambda: (m / "big").read_bytes() == b"the old value")
    m.unmount()
    assert s3_filesystem.cat_file(f"{s3_bucket}/raw/big") == b"the old value"
    uploads = s3_filesystem.call_s3("list_multipart_uploads", Bucket=s3_bucket).get("Uploads", [])
    assert uploads == [], "an upload was left behind"
    assert any("/big" in line and "EIO" in line for line in m.log_text().splitlines())


def _npy(path: Path, count: int, fortran_3d: bool = False) -> np.ndarray:
    """A float64 .npy of `count` values, written by numpy without holding them all."""
    if fortran_3d:
        values = np.asfortranarray(np.arange(count, dtype=">f8").reshape(4, -1, 8))
        np.save(path, values)
        return values
    out = np.lib.format.open_memmap(path, mode="w+", dtype="<f8", shape=(count,))
    for start in range(0, count, 8 << 20):
        out[start : start + (8 << 20)] = np.arange(start, min(count, start + (8 << 20)), dtype="<f8") * 0.5
    out.flush()
    del out
    return np.lib.format.open_memmap(path, mode="r")


def test_a_npy_copied_in_is_stored_slab_by_slab_whatever_its_size(mount, tmp_path):
    """A 32 MiB and a 256 MiB `.npy` (1 GiB takes CI four times as long and shows nothing
    more): the larger does not raise the daemon's peak past what the smaller did, nor does
    the smaller raise it (past what a tiny copy that brings in the codecs did) by more than
    the slab and a margin."""
    root = tmp_path / "store"
    zarr.open_group(root, mode="w").create_group("grp")
    small = _npy(tmp_path / "small.npy", 4 << 20)
    big = _npy(tmp_path / "big.npy", 32 << 20)
    fortran = _npy(tmp_path / "fortran.npy", 4 * 8 * 1000, fortran_3d=True)
    m = mount(root)
    os.system(f"cp {tmp_path / 'fortran'}.npy {m / 'grp'}/")  # brings in the codecs and the pools
    before = peak(m.pid)
    os.system(f"cp {tmp_path / 'small'}.npy {m / 'grp'}/")
    after_small = peak(m.pid)
    os.system(f"cp {tmp_path / 'big.npy'} {m / 'grp'}/")
    after_big = peak(m.pid)
    m.unmount()
    assert after_big - after_small < 16 * MIB, f"the peak grew by {(after_big - after_small) / MIB:.0f} MiB more"
    assert after_small - before < 2 * MARGIN, f"the daemon's peak grew by {(after_small - before) / MIB:.0f} MiB"
    group = zarr.open_group(root, mode="r")
    for name, values in (("small", small), ("big", big), ("fortran", fortran)):
        stored = group[f"grp/{name}"]
        assert stored.shape == values.shape
        for start in range(0, values.shape[0], 8 << 20):
            np.testing.assert_array_equal(stored[start : start + (8 << 20)], values[start : start + (8 << 20)])


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_a_value_the_store_refuses_as_too_large_fails_the_close_with_efbig(
    mount, s3_bucket, s3_filesystem, proxy, backend
):
    s3_filesystem.pipe(f"{s3_bucket}/raw/big", b"the old value")
    m = mount(
        f"s3://{s3_bucket}/raw",
        "--raw",
        "--s3-backend",
        backend,
        "--storage-option",
        f"endpoint_url={proxy.endpoint}",
        "--storage-option",
        "key=testing",
        "--storage-option",
        "secret=testing",
    )
    proxy.refuse_matching, proxy.refuse_status, proxy.error_code = b"PUT ", 400, "EntityTooLarge"
    with pytest.raises(OSError) as info:
        (m / "big").write_bytes(b"more than the store takes")
    assert info.value.errno == errno.EFBIG
    proxy.refuse_matching = None
    m.unmount()
    assert s3_filesystem.cat_file(f"{s3_bucket}/raw/big") == b"the old value"
    assert any("/big" in line and "EFBIG" in line for line in m.log_text().splitlines())
