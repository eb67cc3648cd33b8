"""Passthrough mode (`--raw`, docs/semantics.md) on a local store: every key is a file and every
prefix a directory, bytes exactly as stored; writes are spooled and stored whole on close;
mkdir, rm, rm -r and mv map to the store; failures are errno values (docs/errors.md)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import random
import shutil
import signal
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import wait_for, zarrfs
from zarrfs.cli import is_mounted

DATA = (np.arange(60 * 70, dtype="int32") * 7 - 1000).reshape(60, 70)
CHUNKS = (30, 70)
BIG = 64 << 20


# ----------------------------------------------------------------- helpers
def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` as {relative key: content}."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def sha256sum_files(root: Path) -> dict[str, str]:
    """What `sha256sum` prints for every file under `root`, by relative key."""
    result = subprocess.run(
        "find . -type f -print0 | xargs -0 sha256sum", shell=True, cwd=root, capture_output=True, text=True, check=True
    )
    hashes = {}
    for line in result.stdout.splitlines():
        digest, name = line.split(maxsplit=1)
        hashes[name.removeprefix("./")] = digest
    return hashes


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=120)


def write_with_zarr_python(root: Path) -> None:
    """A v2 and a v3 array, in nested groups, written and read back by zarr-python."""
    import zarr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for zarr_format in (2, 3):
            path = str(root / f"v{zarr_format}" / "group" / "array")
            array = zarr.create_array(
                path, shape=DATA.shape, chunks=CHUNKS, dtype="int32", zarr_format=zarr_format, attributes={"units": "m"}
            )
            array[:] = DATA
            np.testing.assert_array_equal(zarr.open_array(path, mode="r")[:], DATA)


def write_with_tensorstore(root: Path) -> None:
    """A zarr (v2) and a zarr3 array written and read back through tensorstore's file kvstore."""
    import tensorstore as ts

    specs = {
        "zarr": {"shape": list(DATA.shape), "chunks": list(CHUNKS), "dtype": "<i4"},
        "zarr3": {
            "shape": list(DATA.shape),
            "data_type": "int32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(CHUNKS)}},
        },
    }
    for driver, metadata in specs.items():
        spec = {"driver": driver, "kvstore": {"driver": "file", "path": f"{root}/ts_{driver}/"}, "metadata": metadata}
        ts.open(spec, create=True).result().write(DATA).result()
        np.testing.assert_array_equal(ts.open(spec).result().read().result(), DATA)


def assert_errno(code: int, fn, *args) -> None:
    with pytest.raises(OSError) as info:
        fn(*args)
    assert info.value.errno == code, f"{fn.__name__}{args}: {info.value!r}"


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A local store holding a zarr-python hierarchy and some plain keys."""
    root = tmp_path / "store"
    write_with_zarr_python(root)
    (root / "notes").mkdir()
    (root / "notes" / "a b.txt").write_bytes(b"spaces in names\n")
    (root / "notes" / "empty").write_bytes(b"")
    (root / "top.bin").write_bytes(bytes(range(256)) * 100)
    return root


# ------------------------------------------------------------------- reading
def test_keys_are_files_and_prefixes_are_directories_with_stored_sizes(mount, store_dir):
    m = mount(store_dir, "--raw")
    stored = tree_bytes(store_dir)
    assert tree_bytes(m.path) == stored
    for key, value in stored.items():
        assert os.stat(m / key).st_size == len(value)
    assert sorted(os.listdir(m.path)) == ["notes", "top.bin", "v2", "v3"]
    assert os.path.isdir(m / "v3/group/array/c/0")


def test_cp_r_out_of_the_mount_and_diff_r_agree_with_the_store(mount, store_dir, tmp_path):
    m = mount(store_dir, "--raw")
    copy = tmp_path / "copy"
    assert run("cp", "-r", m.path, copy).returncode == 0
    assert run("diff", "-r", store_dir, copy).returncode == 0
    assert run("diff", "-r", m.path, store_dir).returncode == 0
    hashes = sha256sum_files(m.path)
    assert hashes == {key: hashlib.sha256(value).hexdigest() for key, value in tree_bytes(store_dir).items()}


def test_large_file_reads_match_with_dd_and_random_pread(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    value = np.random.default_rng(1).integers(0, 256, BIG, dtype=np.uint8).tobytes()
    (store / "big").write_bytes(value)
    m = mount(store, "--raw")
    assert_reads_match(m / "big", value, tmp_path / "out", 200, [1, 100, 4096, 70_000, 1 << 20], seed=2)


def assert_reads_match(path, value: bytes, out, preads: int, sizes: list[int], seed: int) -> None:
    """`dd bs=1M` of the file, and seeded random preads, equal the stored value."""
    assert run("dd", f"if={path}", f"of={out}", "bs=1M").returncode == 0
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(value).digest()
    rng = random.Random(seed)
    fd = os.open(path, os.O_RDONLY)
    try:
        for _ in range(preads):
            offset, size = rng.randrange(len(value)), rng.choice(sizes)
            assert os.pread(fd, size, offset) == value[offset : offset + size]
    finally:
        os.close(fd)


# ------------------------------------------------------------------- writing
@pytest.mark.parametrize("writer", ["zarr-python", "tensorstore"])
def test_arrays_written_through_the_mount_are_stored_byte_for_byte(mount, tmp_path, writer):
    write = write_with_zarr_python if writer == "zarr-python" else write_with_tensorstore
    store, reference = tmp_path / "store", tmp_path / "reference"
    store.mkdir()
    m = mount(store, "--raw")
    write(m.path)
    write(reference)
    assert tree_bytes(store) == tree_bytes(reference)


def test_cp_r_into_the_mount_stores_every_file_byte_for_byte(mount, store_dir, tmp_path):
    store = tmp_path / "empty-store"
    store.mkdir()
    m = mount(store, "--raw")
    assert run("cp", "-r", store_dir, m / "copy").returncode == 0
    assert tree_bytes(store / "copy") == tree_bytes(store_dir)
    assert run("diff", "-r", store_dir, m / "copy").returncode == 0


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
def test_rsync_a_into_the_mount_stores_every_file_byte_for_byte(mount, store_dir, tmp_path):
    store = tmp_path / "empty-store"
    store.mkdir()
    m = mount(store, "--raw")
    result = run("rsync", "-a", f"{store_dir}/", f"{m / 'copy'}/")
    assert result.returncode == 0, result.stderr
    assert tree_bytes(store / "copy") == tree_bytes(store_dir)


def test_writes_are_stored_whole_when_the_file_is_closed(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw")
    with open(m / "f", "wb") as f:
        f.write(b"first part, ")
        f.flush()  # reaches the spool, not the store
        assert not (store / "f").exists()
        f.write(b"second part")
    assert (store / "f").read_bytes() == b"first part, second part"
    (m / "empty").touch()
    assert (store / "empty").read_bytes() == b""


def test_overwrites_truncation_and_appends_change_the_stored_value(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "f").write_bytes(b"0123456789")
    m = mount(store, "--raw")
    dd = subprocess.run(
        ["dd", f"of={m / 'f'}", "bs=1", "seek=3", "conv=notrunc"], input=b"ab", capture_output=True, timeout=60
    )
    assert dd.returncode == 0, dd.stderr
    assert (store / "f").read_bytes() == b"012ab56789"
    fd = os.open(m / "f", os.O_RDWR)
    os.pwrite(fd, b"XY", 8)
    assert os.pread(fd, 10, 0) == b"012ab567XY"  # this file's readers see the spool
    os.close(fd)
    assert (store / "f").read_bytes() == b"012ab567XY"
    with open(m / "f", "ab") as f:
        f.write(b"+tail")
    assert (store / "f").read_bytes() == b"012ab567XY+tail"
    os.truncate(m / "f", 4)
    assert (store / "f").read_bytes() == b"012a"
    assert os.stat(m / "f").st_size == 4
    with open(m / "f", "wb") as f:  # O_TRUNC
        f.write(b"new")
    assert (store / "f").read_bytes() == b"new"
    assert (m / "f").read_bytes() == b"new"


def test_mkdir_shows_an_empty_directory_that_rmdir_removes(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw")
    (m / "d").mkdir()
    (m / "d" / "e").mkdir()
    assert os.path.isdir(m / "d/e") and os.listdir(m / "d/e") == []
    (m / "d/e/k").write_bytes(b"v")
    assert (store / "d/e/k").read_bytes() == b"v"
    os.unlink(m / "d/e/k")
    assert os.listdir(m / "d/e") == []  # emptied through the mount: still there
    os.rmdir(m / "d/e")
    os.rmdir(m / "d")
    assert os.listdir(m.path) == [] and tree_bytes(store) == {}


def test_rm_r_erases_every_key_below(mount, store_dir):
    m = mount(store_dir, "--raw")
    assert run("rm", "-r", m / "v3").returncode == 0
    assert not (m / "v3").exists()
    assert not any(key.startswith("v3/") for key in tree_bytes(store_dir))
    assert "v2/group/array/.zarray" in tree_bytes(store_dir)


def test_mv_renames_files_and_directories_in_the_store(mount, store_dir):
    before = tree_bytes(store_dir)
    m = mount(store_dir, "--raw")
    os.rename(m / "top.bin", m / "notes/moved.bin")
    os.rename(m / "v2", m / "renamed")
    os.replace(m / "notes/a b.txt", m / "notes/empty")  # over an existing file
    after = tree_bytes(store_dir)
    expected = {key.replace("v2/", "renamed/", 1): value for key, value in before.items()}
    expected["notes/moved.bin"] = expected.pop("top.bin")
    expected["notes/empty"] = expected.pop("notes/a b.txt")
    assert after == expected
    assert tree_bytes(m.path) == expected


def test_a_file_unlinked_while_open_is_not_stored_at_close(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw")
    with open(m / "gone", "wb") as f:
        f.write(b"data")
        os.unlink(m / "gone")
        f.write(b"more")
    assert tree_bytes(store) == {}
    assert not (m / "gone").exists()


def test_sigterm_stores_what_open_files_hold_before_unmounting(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw")
    f = open(m / "open-at-exit", "wb")
    f.write(b"acknowledged")
    f.flush()  # in the daemon's spool now
    os.kill(m.pid, signal.SIGTERM)
    wait_for(lambda: not is_mounted(str(m.path)))
    wait_for(lambda: not os.path.exists(f"/proc/{m.pid}"), timeout=30)
    with contextlib.suppress(OSError):  # the mount is gone
        f.close()
    assert (store / "open-at-exit").read_bytes() == b"acknowledged"
    assert "unmounted" in m.log_text() and "Traceback" not in m.log_text()


# -------------------------------------------------------------------- errors
def test_a_read_only_mount_refuses_every_write_with_erofs(mount, store_dir):
    before = tree_bytes(store_dir)
    m = mount(store_dir, "--raw", "--read-only")
    assert (m / "top.bin").read_bytes() == before["top.bin"]
    assert_errno(errno.EROFS, open, m / "top.bin", "r+b")
    assert_errno(errno.EROFS, open, m / "new", "wb")
    assert_errno(errno.EROFS, os.mkdir, m / "d")
    assert_errno(errno.EROFS, os.unlink, m / "top.bin")
    assert_errno(errno.EROFS, os.rmdir, m / "notes")
    assert_errno(errno.EROFS, os.rename, m / "top.bin", m / "x")
    assert_errno(errno.EROFS, os.truncate, m / "top.bin", 0)
    assert tree_bytes(store_dir) == before


def test_rmdir_of_a_non_empty_directory_is_enotempty(mount, store_dir):
    before = tree_bytes(store_dir)
    m = mount(store_dir, "--raw")
    assert_errno(errno.ENOTEMPTY, os.rmdir, m / "notes")
    assert_errno(errno.ENOTEMPTY, os.rmdir, m / "v3")
    (m / "made").mkdir()
    (m / "made/sub").mkdir()
    assert_errno(errno.ENOTEMPTY, os.rmdir, m / "made")
    assert tree_bytes(store_dir) == before


def test_missing_names_are_enoent_and_change_nothing(mount, store_dir):
    before = tree_bytes(store_dir)
    m = mount(store_dir, "--raw")
    assert_errno(errno.ENOENT, os.stat, m / "missing")
    assert_errno(errno.ENOENT, open, m / "missing", "rb")
    assert_errno(errno.ENOENT, os.unlink, m / "missing")
    assert_errno(errno.ENOENT, os.rmdir, m / "missing")
    assert_errno(errno.ENOENT, os.rename, m / "missing", m / "other")
    assert_errno(errno.ENOENT, os.listdir, m / "missing/deeper")
    assert tree_bytes(store_dir) == before


def test_reserved_temporary_names_are_rejected_with_einval(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / ".zarrfs-tmp-hidden").write_bytes(b"in-flight write")
    m = mount(store, "--raw")
    assert os.listdir(m.path) == []
    assert_errno(errno.EINVAL, open, m / ".zarrfs-tmp-x", "wb")
    assert_errno(errno.EINVAL, os.mkdir, m / ".zarrfs-tmp-d")


def test_an_empty_store_mounts_and_reports_free_space(mount, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    m = mount(store, "--raw")
    assert os.listdir(m.path) == []
    st = os.statvfs(m.path)
    assert st.f_bavail * st.f_frsize >= 1 << 40


def test_a_missing_local_source_is_an_error(tmp_path):
    (tmp_path / "mnt").mkdir()
    result = zarrfs("mount", "--raw", tmp_path / "missing", tmp_path / "mnt", check=False)
    assert result.returncode != 0 and "does not exist" in result.stderr
