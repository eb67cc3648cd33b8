"""Writing through a real mount (docs/semantics.md) with real programs, checked by opening the store
with zarr-python afterwards; every refused write leaves the store unchanged."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for
from tests.fs.mount.write_fixtures import expected, run, store_snapshot

# ------------------------------------------------------------------ data


@pytest.mark.parametrize("path", ["img", "sharded", "legacy/be"])
def test_cp_raw_file_into_data_rewrites_the_array(mount, store, tmp_path, path):
    shape, dtype = zarr.open_array(store / path).shape, zarr.open_array(store / path).dtype
    values = np.random.default_rng(1).integers(-1000, 1000, size=shape).astype(dtype)
    raw = tmp_path / "image.raw"
    values.astype(values.dtype.newbyteorder("<")).tofile(raw)
    m = mount(store)
    run("cp", raw, m / path / "data")
    assert (m / path / "data").read_bytes() == raw.read_bytes()
    m.unmount()
    np.testing.assert_array_equal(expected(store, path), values)


EXTENSION_TYPES = {  # path: numpy dtype zarr-python writes it with, zarr format
    "time": ("datetime64[ms]", 3),
    "records": ([("a", "<i2"), ("t", "<M8[s]"), ("s", "S3")], 3),
    "text": ("<U4", 3),
    "legacy_time": (">M8[D]", 2),
}


@pytest.mark.filterwarnings("ignore::Warning:zarr")
@pytest.mark.parametrize("path", list(EXTENSION_TYPES))
def test_data_and_chunk_files_of_extension_types_write_through(mount, tmp_path, path):
    from tests.format.format_oracle import assert_same_values, sample_values

    dtype, zarr_format = EXTENSION_TYPES[path]
    root = tmp_path / "store.zarr"
    zarr.create_array(root / path, shape=(7, 5), chunks=(3, 2), dtype=np.dtype(dtype), zarr_format=zarr_format)
    values = sample_values(np.dtype(dtype), (7, 5), seed=5)
    chunk = sample_values(np.dtype(dtype), (3, 2), seed=6)
    little = np.dtype(dtype).newbyteorder("<")
    (tmp_path / "data.raw").write_bytes(np.ascontiguousarray(values, dtype=little).tobytes())
    (tmp_path / "chunk.raw").write_bytes(np.ascontiguousarray(chunk, dtype=little).tobytes())
    m = mount(root)
    run("cp", tmp_path / "data.raw", m / path / "data")
    run("sh", "-c", f"cat {tmp_path / 'chunk.raw'} > {m / path / 'chunks/2/2'}")
    m.unmount()
    values[6:, 4:] = chunk[:1, :1]  # the edge chunk's part inside the array
    assert_same_values(expected(root, path), values, path)


def test_dd_notrunc_into_a_region_at_an_unaligned_offset(mount, store, tmp_path):
    before = expected(store, "img")
    patch = np.random.default_rng(2).bytes(37)
    (tmp_path / "patch").write_bytes(patch)
    m = mount(store)
    run("dd", f"if={tmp_path / 'patch'}", f"of={m / 'img/data'}", "bs=1", "seek=101", "conv=notrunc", "status=none")
    m.unmount()
    want = bytearray(before.astype("<f4").tobytes())
    want[101:138] = patch
    np.testing.assert_array_equal(
        expected(store, "img").view("u4"), np.frombuffer(bytes(want), "<f4").reshape(10, 12).view("u4")
    )


def test_random_writes_to_data_equal_the_same_writes_on_numpy(mount, store):
    rng = np.random.default_rng(3)
    want = bytearray(expected(store, "sharded").astype("<i2").tobytes())
    m = mount(store)
    fd = os.open(m / "sharded/data", os.O_RDWR)
    try:
        for _ in range(60):
            offset = int(rng.integers(0, len(want) - 1))
            data = rng.bytes(int(rng.integers(1, min(50, len(want) - offset) + 1)))
            assert os.pwrite(fd, data, offset) == len(data)
            want[offset : offset + len(data)] = data
            if rng.random() < 0.2:  # reads in between see the buffered writes
                assert os.pread(fd, len(want), 0) == bytes(want)
    finally:
        os.close(fd)
    m.unmount()
    assert expected(store, "sharded").astype("<i2").tobytes() == bytes(want)


@pytest.mark.parametrize("path", ["img/data", "img/chunks/0/0"])
def test_write_past_the_end_fails_with_efbig(mount, store, path):
    before = store_snapshot(store)
    m = mount(store)
    size = (m / path).stat().st_size
    fd = os.open(m / path, os.O_WRONLY)
    try:
        with pytest.raises(OSError) as info:
            os.pwrite(fd, b"\x00" * 8, size - 4)
        assert info.value.errno == errno.EFBIG
    finally:
        os.close(fd)
    m.unmount()
    assert store_snapshot(store) == before


def test_truncating_data_to_another_size_is_refused(mount, store):
    m = mount(store)
    size = (m / "img/data").stat().st_size
    os.truncate(m / "img/data", size)  # the current size: accepted, nothing changes
    with pytest.raises(OSError) as info:
        os.truncate(m / "img/data", size // 2)
    assert info.value.errno == errno.EINVAL
    assert (m / "img/data").stat().st_size == size


# ---------------------------------------------------------------- chunks


def test_shell_redirection_replaces_a_whole_chunk(mount, store, tmp_path):
    chunk = np.full((4, 5), 7.5, dtype="<f4")
    (tmp_path / "c").write_bytes(chunk.tobytes())
    m = mount(store)
    run("sh", "-c", f"cat {tmp_path / 'c'} > {m / 'img/chunks/1/1'}")
    m.unmount()
    np.testing.assert_array_equal(expected(store, "img")[4:8, 5:10], chunk)


def test_partial_write_inside_a_chunk_keeps_the_rest(mount, store):
    before = expected(store, "sharded")
    m = mount(store)
    with open(m / "sharded/chunks/0/1", "r+b") as f:
        f.seek(2)
        f.write(np.array([999], dtype="<i2").tobytes())
    m.unmount()
    want = before.copy()
    want[0, 4] = 999
    np.testing.assert_array_equal(expected(store, "sharded"), want)


def test_chunk_written_entirely_to_the_fill_value_is_erased(mount, store):
    m = mount(store)
    (m / "img/chunks/0/0").write_bytes(np.zeros((4, 5), "<f4").tobytes())
    m.unmount()
    assert not (store / "img/c/0/0").exists()
    assert (store / "img/c/0/1").exists()
    np.testing.assert_array_equal(expected(store, "img")[:4, :5], 0)


def test_chunk_of_the_wrong_final_size_fails_at_close_and_stores_nothing(mount, store):
    before = store_snapshot(store)
    m = mount(store)
    fd = os.open(m / "img/chunks/0/0", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"\x01" * 10)
    with pytest.raises(OSError) as info:
        os.close(fd)
    assert info.value.errno == errno.EINVAL
    assert (m / "img/chunks/0/0").read_bytes() == expected(store, "img")[:4, :5].astype("<f4").tobytes()
    m.unmount()
    assert store_snapshot(store) == before
    assert "EINVAL" in m.log_text()


def test_rm_of_a_chunk_file_erases_the_chunk(mount, store):
    m = mount(store)
    (m / "img/chunks/1/2").unlink()
    assert (m / "img/chunks/1/2").read_bytes() == np.zeros((4, 5), "<f4").tobytes()
    m.unmount()
    assert not (store / "img/c/1/2").exists()


@pytest.mark.parametrize(("path", "remove"), [("img/chunks/1/2", os.unlink), ("img/chunks/1", os.rmdir)])
def test_an_open_file_whose_path_rm_leaves_in_place_still_answers(mount, store, path, remove):
    """`rm` of a chunk file leaves a file of the fill value and `rmdir` of a chunk
    directory one of the grid: the path stays, and so does the inode
    the kernel holds for it (its open file's fstat and xattrs failed ENOENT)."""
    m = mount(store)
    opened = m / ("img/chunks/1/2" if path == "img/chunks/1" else path)
    fd = os.open(opened, os.O_RDONLY)
    try:
        size, names = os.fstat(fd).st_size, os.listxattr(fd)
        remove(m / path)
        assert os.fstat(fd).st_size == size and os.listxattr(fd) == names  # (the kernel asks the mount)
        assert os.stat(opened).st_size == size
    finally:
        os.close(fd)
    m.unmount()


# -------------------------------------------------------------- metadata


def test_editing_attributes_in_zarr_json_is_stored(mount, store):
    m = mount(store)
    doc = json.loads((m / "img/zarr.json").read_text())
    doc["attributes"] = {"units": "K"}
    (m / "img/zarr.json").write_text(json.dumps(doc))
    m.unmount()
    assert dict(zarr.open_array(store / "img").attrs) == {"units": "K"}


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("{not json", errno.EINVAL),
        (None, errno.EPERM),  # a data type change on an array that holds data
    ],
)
def test_invalid_metadata_fails_at_close_and_keeps_the_old_document(mount, store, content, code):
    before = store_snapshot(store)
    m = mount(store)
    if content is None:
        doc = json.loads((m / "img/zarr.json").read_text())
        doc["data_type"] = "int32"
        content = json.dumps(doc)
    fd = os.open(m / "img/zarr.json", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, content.encode())
    with pytest.raises(OSError) as info:
        os.close(fd)
    assert info.value.errno == code
    m.unmount()
    assert store_snapshot(store) == before


def test_setfattr_and_removexattr_write_attributes_through(mount, store):
    m = mount(store)
    os.setxattr(m / "img", "user.zarr.title", b'"temperature"')
    os.setxattr(m / "legacy", "user.zarr.count", b"3")
    assert json.loads(os.getxattr(m / "img", "user.zarr.title")) == "temperature"
    os.removexattr(m / "legacy", "user.zarr.count")
    for missing in ("user.zarr.count", "user.other"):  # none there, as on any filesystem
        with pytest.raises(OSError) as info:
            os.removexattr(m / "legacy", missing)
        assert info.value.errno == errno.ENODATA, missing
    m.unmount()
    assert dict(zarr.open_array(store / "img").attrs) == {"title": "temperature"}
    assert dict(zarr.open_group(store / "legacy").attrs) == {}


def test_setfattr_of_a_value_that_is_not_json_stores_a_string(mount, store):
    m = mount(store)
    run("setfattr", "-n", "user.zarr.units", "-v", '"K"', m / "img")  # setfattr strips the quotes
    run("setfattr", "-n", "user.zarr.label", "-v", "{not json", m / "img")
    assert json.loads(os.getxattr(m / "img", "user.zarr.units")) == "K"
    m.unmount()
    assert dict(zarr.open_array(store / "img").attrs) == {"units": "K", "label": "{not json"}


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "[1, NaN]", "1e999", "1" + "0" * 5000])
def test_setfattr_of_a_value_a_document_cannot_hold_stores_it_as_a_string(mount, store, value):
    """JSON has no NaN or infinities, and Python reads no integer of more than 4300 digits:
    such a value is kept as the string it is, as a value that is not JSON is."""
    m = mount(store)
    os.setxattr(m / "img", "user.zarr.odd", value.encode())
    assert json.loads(os.getxattr(m / "img", "user.zarr.odd")) == value
    m.unmount()  # (and the daemon logged no traceback)
    assert dict(zarr.open_array(store / "img").attrs) == {"odd": value}


def test_setxattr_of_a_name_that_is_not_text_fails_and_changes_nothing(mount, store):
    before = store_snapshot(store)
    m = mount(store)
    with pytest.raises(OSError) as info:
        os.setxattr(m / "img", b"user.zarr.\xff", b"1")
    assert info.value.errno == errno.EINVAL
    m.unmount()
    assert store_snapshot(store) == before


def test_setxattr_of_bytes_that_are_not_text_fails_and_changes_nothing(mount, store):
    before = store_snapshot(store)
    m = mount(store)
    with pytest.raises(OSError) as info:
        os.setxattr(m / "img", "user.zarr.bad", b"\xff\xfe")
    assert info.value.errno == errno.EINVAL
    m.unmount()
    assert store_snapshot(store) == before


def test_setfattr_keeps_a_resize_another_program_made_since_the_mount_read_the_array(mount, store):
    """The mount keeps img's metadata (600 s here); zarr-python grows img and writes its
    new rows meanwhile. An attribute set through the mount changes the document as
    stored: the new shape and rows stay."""
    m = mount(store, "--metadata-ttl", "600")
    assert (m / "img/data").stat().st_size == 10 * 12 * 4  # the mount has read img's metadata
    img = zarr.open_array(store / "img")
    img.resize((14, 12))
    img[10:] = 7.0
    values = img[...]
    os.setxattr(m / "img", "user.zarr.units", b'"K"')
    m.unmount()
    stored = zarr.open_array(store / "img")
    assert stored.shape == (14, 12) and dict(stored.attrs) == {"units": "K"}
    np.testing.assert_array_equal(stored[...], values)


# ------------------------------------------------------------------ nodes


def test_mkdir_makes_a_group_and_an_array_document_makes_it_an_array(mount, store):
    m = mount(store)
    (m / "new").mkdir()
    assert json.loads((m / "new/zarr.json").read_text())["node_type"] == "group"
    (m / "new/arr").mkdir()
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [6],
        "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}],
        "attributes": {},
    }
    (m / "new/arr/zarr.json").write_text(json.dumps(doc))
    wait_for(lambda: "data" in os.listdir(m / "new/arr"))
    (m / "new/arr/data").write_bytes(bytes(range(6)))
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(store / "new/arr")[...], np.arange(6, dtype="u1"))


def test_mkdir_in_a_v2_group_then_a_zarray_makes_a_v2_array_and_no_group(mount, store):
    m = mount(store)
    (m / "legacy/new").mkdir()
    assert (m / "legacy/new/.zgroup").exists()
    doc = {"zarr_format": 2, "shape": [6], "chunks": [4], "dtype": "<u2", "compressor": None, "fill_value": 0}
    doc |= {"order": "C", "filters": None}
    (m / "legacy/new/.zarray").write_text(json.dumps(doc))
    wait_for(lambda: "data" in os.listdir(m / "legacy/new"))
    assert ".zgroup" not in os.listdir(m / "legacy/new")
    (m / "legacy/new/data").write_bytes(np.arange(6, dtype="<u2").tobytes())
    m.unmount()
    assert not (store / "legacy/new/.zgroup").exists()  # a v2 node is an array or a group
    array = zarr.open_array(store / "legacy/new", zarr_format=2)
    np.testing.assert_array_equal(array[...], np.arange(6, dtype="u2"))


@pytest.mark.parametrize("name", ["__reserved", ".zarray"])
def test_mkdir_with_an_invalid_node_name_fails_with_einval(mount, store, name):
    before = store_snapshot(store)
    m = mount(store)
    with pytest.raises(OSError) as info:
        (m / name).mkdir()
    assert info.value.errno == errno.EINVAL
    m.unmount()
    assert store_snapshot(store) == before


def test_cp_npy_into_a_group_creates_an_array(mount, store, tmp_path):
    values = np.random.default_rng(4).normal(size=(300, 500)).astype(">f8")
    np.save(tmp_path / "x.npy", values)
    m = mount(store)
    run("cp", tmp_path / "x.npy", m / "legacy/")
    assert "x" in os.listdir(m / "legacy") and "x.npy" not in os.listdir(m / "legacy")
    m.unmount()
    arr = zarr.open_array(store / "legacy/x", mode="r")
    np.testing.assert_array_equal(arr[...], values)
    assert arr.nbytes > arr.chunks[0] * arr.chunks[1] * 8  # chunked, not one chunk


def test_shell_redirection_of_a_npy_into_a_group_creates_an_array(mount, store, tmp_path):
    """`cat x.npy > g/x.npy`: the shell closes its own descriptor before cat writes."""
    values = np.arange(20, dtype="<i4").reshape(4, 5)
    np.save(tmp_path / "x.npy", values)
    m = mount(store)
    run("sh", "-c", f"cat {tmp_path / 'x.npy'} > {m / 'legacy/x.npy'}")
    assert "x" in os.listdir(m / "legacy")
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(store / "legacy/x", mode="r")[...], values)


@pytest.mark.filterwarnings("ignore::Warning:zarr")
def test_cp_npy_of_numpy_native_extension_types_creates_arrays(mount, store, tmp_path):
    from tests.format.format_oracle import assert_same_values, sample_values

    dtypes = {
        "t": "datetime64[ns]",
        "d": ">m8[s]",
        "u": "<U3",
        "s": "S4",
        "v": "V2",
        "r": [("a", ">i4"), ("t", "<M8[s]"), ("s", "S2")],
    }
    arrays = {name: sample_values(np.dtype(dtype), (30, 7), seed=len(name)) for name, dtype in dtypes.items()}
    for name, values in arrays.items():
        np.save(tmp_path / f"{name}.npy", values)
    m = mount(store)
    run("cp", *[tmp_path / f"{name}.npy" for name in arrays], m / "legacy/")
    m.unmount()
    for name, values in arrays.items():
        assert_same_values(expected(store, f"legacy/{name}"), values, name)


def test_cp_npy_onto_the_mounts_own_directory_fails_with_eexist(mount, store, tmp_path):
    """(A .npy over an array's name replaces the array: tests/fs/mount/test_npy_replace.py.)"""
    name = ".zarrfs"
    np.save(tmp_path / f"{name}.npy", np.zeros(3))
    before = store_snapshot(store)
    m = mount(store)
    result = run("cp", tmp_path / f"{name}.npy", m / "", check=False)
    assert result.returncode != 0 and "exists" in result.stderr
    m.unmount()
    assert store_snapshot(store) == before


def test_cp_invalid_npy_fails_at_close_and_creates_nothing(mount, store, tmp_path):
    (tmp_path / "bad.npy").write_bytes(b"this is not an npy file")
    before = store_snapshot(store)
    m = mount(store)
    result = run("cp", tmp_path / "bad.npy", m / "", check=False)
    assert result.returncode != 0
    assert "bad" not in os.listdir(m.path)
    m.unmount()
    assert store_snapshot(store) == before


SHAPED_FIELD = [("a", "<i2"), ("b", "<f4", (2,))]  # a valid .npy dtype that Zarr cannot hold


@pytest.mark.parametrize("how", ["cp", "cat >"])
def test_cp_npy_of_a_type_zarr_cannot_hold_fails_with_einval_and_creates_nothing(mount, store, tmp_path, how):
    np.save(tmp_path / "x.npy", np.zeros(3, SHAPED_FIELD))
    before = store_snapshot(store)
    m = mount(store)
    if how == "cp":
        result = run("cp", tmp_path / "x.npy", m / "legacy/", check=False)
    else:
        result = run("sh", "-c", f"cat {tmp_path / 'x.npy'} > {m / 'legacy/x.npy'}", check=False)
    assert result.returncode != 0 and "Invalid argument" in result.stderr, result.stderr
    assert not {"x", "x.npy"} & set(os.listdir(m / "legacy"))
    m.unmount()
    assert store_snapshot(store) == before


@pytest.mark.parametrize("refusal", ["unsupported type", "name taken"])
def test_every_close_of_a_shared_npy_descriptor_that_creates_nothing_fails(mount, store, tmp_path, refusal):
    """A descriptor and its duplicate: the second close must not report success where
    the first found nothing to create."""
    np.save(tmp_path / "x.npy", np.zeros(3, SHAPED_FIELD) if refusal == "unsupported type" else np.arange(3))
    m = mount(store)
    first = os.open(m / "legacy/x.npy", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(first, (tmp_path / "x.npy").read_bytes())
    second = os.dup(first)
    if refusal == "name taken":
        (m / "legacy/x").mkdir()
    failures = []
    for descriptor in (first, second):
        try:
            os.close(descriptor)
        except OSError as exc:
            failures.append(exc.errno)
        else:
            failures.append(None)
    expected_errno = errno.EINVAL if refusal == "unsupported type" else errno.EEXIST
    assert failures == [expected_errno, expected_errno]
    m.unmount()
    assert ("x" in zarr.open_group(store / "legacy", mode="r")) == (refusal == "name taken")
    if refusal == "name taken":
        assert isinstance(zarr.open(store / "legacy/x", mode="r"), zarr.Group)


def test_rm_r_erases_every_key_of_a_node(mount, store):
    m = mount(store)
    run("rm", "-r", m / "sharded")
    assert "sharded" not in os.listdir(m.path)
    m.unmount()
    assert not (store / "sharded").exists()
    assert (store / "img/zarr.json").exists()


def test_rmdir_of_the_control_directory_is_not_permitted_and_changes_nothing(mount, store):
    before = store_snapshot(store)
    m = mount(store)
    with pytest.raises(OSError) as info:
        (m / ".zarrfs").rmdir()
    assert info.value.errno == errno.EPERM
    assert (m / ".zarrfs" / "stats").read_text()
    m.unmount()
    assert store_snapshot(store) == before


def test_rmdir_of_a_group_with_children_fails_with_enotempty(mount, store):
    before = store_snapshot(store)
    m = mount(store)
    with pytest.raises(OSError) as info:
        (m / "legacy").rmdir()
    assert info.value.errno == errno.ENOTEMPTY
    (m / "empty").mkdir()
    (m / "empty").rmdir()
    m.unmount()
    assert store_snapshot(store) == before


def test_rmdir_alone_of_an_array_fails_with_enotempty_and_keeps_it(mount, store):
    """Its directory shows files: `rmdir` refuses it, as a POSIX directory with entries;
    `rm -r` (which unlinks them first, its document among them) erases it."""
    before = store_snapshot(store)
    m = mount(store)
    with pytest.raises(OSError) as info:
        (m / "img").rmdir()
    assert info.value.errno == errno.ENOTEMPTY
    with pytest.raises(OSError) as info:  # a view, while its node keeps its document
        (m / "img" / "data").unlink()
    assert info.value.errno == errno.EPERM
    with pytest.raises(OSError) as info:
        (m / "img").rmdir()
    assert info.value.errno == errno.ENOTEMPTY
    assert "img" in os.listdir(m.path)
    m.unmount()
    assert store_snapshot(store) == before


def test_mv_renames_a_node(mount, store):
    values = expected(store, "img")
    m = mount(store)
    run("mv", m / "img", m / "legacy/image")
    assert "img" not in os.listdir(m.path)
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(store / "legacy/image")[...], values)
    assert not (store / "img").exists()


def test_writes_on_a_read_only_mount_fail_with_erofs(mount, store):
    before = store_snapshot(store)
    m = mount(store, "--read-only")
    for attempt in (
        lambda: open(m / "img/data", "r+b"),
        (m / "grp").mkdir,
        (m / "img/chunks/0/0").unlink,
        lambda: os.setxattr(m / "img", "user.zarr.x", b"1"),
    ):
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EROFS
    m.unmount()
    assert store_snapshot(store) == before


# ------------------------------------------------------------------ kills


def test_sigterm_during_a_large_cp_flushes_what_was_acknowledged(mount, tmp_path):
    root = tmp_path / "big.zarr"
    zarr.create_array(root, shape=(64, 1024, 1024), chunks=(1, 1024, 1024), dtype="uint8", fill_value=0)
    m = mount(root)
    # write slabs through one descriptor; every returned write was acknowledged
    fd = os.open(m / "data", os.O_WRONLY)
    slab = 1024 * 1024
    acknowledged = 0
    for z in range(20):
        os.pwrite(fd, bytes([z + 1]) * slab, z * slab)
        acknowledged = z + 1
    os.kill(m.pid, 15)
    wait_for(lambda: not os.path.exists(f"/proc/{m.pid}"), timeout=60)
    with contextlib.suppress(OSError):  # the mount is gone
        os.close(fd)
    values = zarr.open_array(root, mode="r")
    for z in range(acknowledged):
        assert (values[z] == z + 1).all(), f"slab {z} lost"
    assert "Traceback" not in m.log_text()


def test_sigkill_leaves_every_chunk_old_or_new_and_metadata_valid(mount, tmp_path):
    root = tmp_path / "k.zarr"
    arr = zarr.create_array(root, shape=(16, 128, 128), chunks=(1, 128, 128), dtype="uint16", fill_value=0)
    arr[:] = 1
    m = mount(root)
    # a writer rewrites whole chunks, chunk k of round r holding the value 2 + r
    script = (
        "import numpy, sys\n"
        "for r in range(1000):\n"
        "    for k in range(16):\n"
        f"        open('{m.path}/chunks/' + str(k) + '/0/0', 'wb').write(numpy.full((128, 128), 2 + r, '<u2').tobytes())\n"
        "        print(r, flush=True)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for _ in range(40):  # let some chunks be rewritten
        writer.stdout.readline()
    os.kill(m.pid, 9)
    writer.kill()
    writer.wait()
    subprocess.run(["fusermount3", "-u", "-z", str(m.path)], capture_output=True)
    json.loads((root / "zarr.json").read_text())
    values = zarr.open_array(root, mode="r")
    rewritten = 0
    for k in range(16):
        chunk = values[k]
        assert (chunk == chunk.flat[0]).all(), f"chunk {k} is torn"
        rewritten += int(chunk.flat[0] != 1)
    assert rewritten > 0


def test_a_write_to_a_chunk_file_is_seen_by_a_reader_of_data(mount, store):
    m = mount(store)
    before = (m / "img/data").read_bytes()  # now in the kernel's page cache
    (m / "img/chunks/0/0").write_bytes(np.full((4, 5), 3.0, "<f4").tobytes())
    after = wait_for(lambda: b if (b := (m / "img/data").read_bytes()) != before else None)
    values = np.frombuffer(after, "<f4").reshape(10, 12)
    np.testing.assert_array_equal(values[:4, :5], 3.0)
    np.testing.assert_array_equal(values[4:], expected(store, "img")[4:])


@pytest.mark.parametrize("view", ["data.npy", "data.csv"])
def test_a_view_opened_after_a_write_to_data_reads_it_though_its_old_pages_were_cached(mount, store, view):
    """`data.npy` and the legacy views have pages of their own in the kernel's cache: a
    program opening one after a write to `data` returned reads the write, stored or not."""
    m = mount(store)
    before = (m / "img" / view).read_bytes()  # now in the kernel's page cache
    fd = os.open(m / "img/data", os.O_WRONLY)
    try:
        os.pwrite(fd, np.full(12, 7.5, "<f4").tobytes(), 0)  # buffered: nothing stored yet
        after = (m / "img" / view).read_bytes()
    finally:
        os.close(fd)
    assert after != before
    if view == "data.npy":
        np.testing.assert_array_equal(np.load(m / "img" / view)[0], 7.5)
    m.unmount()
    np.testing.assert_array_equal(expected(store, "img")[0], 7.5)


def test_data_npy_opened_right_after_a_close_of_data_reads_what_it_stored(mount, store):
    """The kernel is told to drop the pages of `data.npy` a moment after a close of `data`
    stores; an open after the close returned does not wait for that moment."""
    m = mount(store)
    header = len((m / "img/data.npy").read_bytes()) - 120 * 4
    for value in range(1, 301):
        fd = os.open(m / "img/data", os.O_WRONLY)
        os.pwrite(fd, np.float32(value).tobytes(), 0)
        os.close(fd)
        fd = os.open(m / "img/data.npy", os.O_RDONLY)  # its old page in the kernel's cache
        try:
            assert np.frombuffer(os.pread(fd, 4, header), "<f4")[0] == value
        finally:
            os.close(fd)


def test_concurrent_writers_to_one_chunk_through_data_keep_both_updates(mount, store):
    m = mount(store)
    # row 0 and row 1 of chunk (0, 0) of img: two processes, many small writes each
    script = (
        "import os, struct, sys\n"
        "row = int(sys.argv[2])\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY)\n"
        "for i in range(200):\n"
        "    col = i % 5\n"
        "    os.pwrite(fd, struct.pack('<f', 1000.0 * (row + 1) + col), (row * 12 + col) * 4)\n"
        "os.close(fd)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(m / "img/data"), str(r)]) for r in (0, 1)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    m.unmount()
    values = expected(store, "img")
    np.testing.assert_array_equal(values[0, :5], 1000.0 + np.arange(5))
    np.testing.assert_array_equal(values[1, :5], 2000.0 + np.arange(5))


def test_wholly_written_chunks_are_stored_while_the_writer_goes_on(mount, tmp_path):
    root = tmp_path / "wb.zarr"
    zarr.create_array(root, shape=(48, 1 << 20), chunks=(1, 1 << 20), dtype="uint8", fill_value=0)
    m = mount(root)
    fd = os.open(m / "data", os.O_WRONLY)
    try:
        for z in range(48):
            os.pwrite(fd, bytes([z + 1]) * (1 << 20), z << 20)
        # before close: early chunks reach the store in the background ...
        wait_for((root / "c/0/0").exists, timeout=30)
        # ... and every written byte reads back through another descriptor meanwhile
        with open(m / "data", "rb") as reader:
            for z in (0, 20, 47):
                reader.seek(z << 20)
                assert reader.read(1 << 20) == bytes([z + 1]) * (1 << 20)
    finally:
        os.close(fd)
    m.unmount()
    values = zarr.open_array(root, mode="r")[...]
    assert all((values[z] == z + 1).all() for z in range(48))


def test_data_npy_read_before_writes_to_data_stored_behind_them_reads_the_new_values(mount, tmp_path):
    """64 MiB written to `data` in two halves, each stored in the background (write-behind)
    before the writer goes on, so nothing is left for the close to store: `data.npy`, read
    before (its pages in the kernel's cache), reads the new values after the close, as
    numpy.load in another process sees them."""
    root = tmp_path / "wb.zarr"
    zarr.create_array(root, shape=(64, 1 << 20), chunks=(1, 1 << 20), dtype="uint8", fill_value=0)
    m = mount(root)
    load = [
        sys.executable,
        "-c",
        "import numpy, sys; a = numpy.load(sys.argv[1]); print(sorted(set(a[:, 0].tolist())))",
    ]
    assert run(*load, m / "data.npy").stdout.strip() == "[0]"
    fd = os.open(m / "data", os.O_WRONLY)
    try:
        for half in (range(32), range(32, 64)):
            for z in half:
                os.pwrite(fd, bytes([z + 1]) * (1 << 20), z << 20)
            wait_for((root / f"c/{half[-1]}/0").exists, timeout=30)  # stored behind the writer
    finally:
        os.close(fd)
    assert run(*load, m / "data.npy").stdout.strip() == str(list(range(1, 65)))
    m.unmount()
    assert (zarr.open_array(root, mode="r")[:, 0] == np.arange(1, 65)).all()


def test_sigterm_stores_writes_made_before_and_after_a_metadata_change(mount, store):
    m = mount(store)
    first = os.open(m / "img/data", os.O_WRONLY)
    os.pwrite(first, np.array([1.5], "<f4").tobytes(), 0)
    os.setxattr(m / "img", "user.zarr.note", b'"changed"')  # the node is read anew
    second = os.open(m / "img/data", os.O_WRONLY)
    os.pwrite(second, np.array([2.5], "<f4").tobytes(), 4 * 119)
    os.kill(m.pid, 15)  # both descriptors still open
    wait_for(lambda: not os.path.exists(f"/proc/{m.pid}"), timeout=60)
    for fd in (first, second):
        with contextlib.suppress(OSError):  # the mount is gone
            os.close(fd)
    values = expected(store, "img")
    assert values[0, 0] == 1.5 and values[9, 11] == 2.5
    assert dict(zarr.open_array(store / "img").attrs) == {"note": "changed"}


def test_a_write_to_data_after_another_program_grew_the_array_survives_sigterm(mount, store):
    m = mount(store)
    fd = os.open(m / "img/data", os.O_RDWR)
    os.pwrite(fd, np.full(12, 5, "<f4").tobytes(), 0)
    os.fsync(fd)  # row 0 stored
    doc = json.loads((m / "img/zarr.json").read_text())
    doc["shape"] = [12, 12]
    (m / "img/zarr.json").write_text(json.dumps(doc))  # grown by another program
    assert len((m / "img/data").read_bytes()) == 12 * 12 * 4  # read by anyone, under the new shape
    os.pwrite(fd, np.full(12, 9, "<f4").tobytes(), 48)  # row 1: acknowledged
    os.kill(m.pid, 15)  # the descriptor still open
    wait_for(lambda: not os.path.exists(f"/proc/{m.pid}"), timeout=60)
    with contextlib.suppress(OSError):  # the mount is gone
        os.close(fd)
    values = expected(store, "img")
    assert values.shape == (12, 12)
    np.testing.assert_array_equal(values[0], 5)
    np.testing.assert_array_equal(values[1], 9)


def test_two_writers_across_a_metadata_change_keep_both_updates(mount, store):
    m = mount(store)
    first = os.open(m / "img/data", os.O_RDWR)
    os.pwrite(first, np.full(5, 1.0, "<f4").tobytes(), 0)  # row 0 of chunk (0, 0)
    assert os.pread(first, 4, 0) == np.float32(1.0).tobytes()
    os.setxattr(m / "img", "user.zarr.note", b'"x"')  # the node is read anew
    second = os.open(m / "img/data", os.O_WRONLY)
    os.pwrite(second, np.full(5, 7.0, "<f4").tobytes(), 12 * 4)  # row 1, same chunk
    os.close(second)
    assert os.pread(first, 4, 12 * 4) == np.float32(7.0).tobytes()
    os.close(first)
    m.unmount()
    values = expected(store, "img")
    np.testing.assert_array_equal(values[0, :5], 1.0)
    np.testing.assert_array_equal(values[1, :5], 7.0)


@pytest.mark.parametrize("operation", ["mv", "rmdir"])
def test_a_node_open_for_writing_cannot_be_moved_or_removed(mount, store, operation):
    m = mount(store)
    fd = os.open(m / "img/data", os.O_WRONLY)
    try:
        os.pwrite(fd, np.float32(5.0).tobytes(), 0)
        if operation == "mv":
            attempt = functools.partial(os.rename, m / "img", m / "moved")
        else:
            attempt = functools.partial(os.rmdir, m / "img")
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EBUSY
    finally:
        os.close(fd)
    m.unmount()
    assert expected(store, "img")[0, 0] == 5.0


def test_buffered_writes_are_stored_before_a_resize(mount, store):
    m = mount(store)
    fd = os.open(m / "img/data", os.O_WRONLY)
    os.pwrite(fd, np.float32(42.0).tobytes(), 4 * 13)  # element (1, 1), still buffered
    doc = json.loads((m / "img/zarr.json").read_text())
    doc["shape"] = [20, 12]
    (m / "img/zarr.json").write_text(json.dumps(doc))
    os.close(fd)
    m.unmount()
    values = zarr.open_array(store / "img", mode="r")[...]
    assert values.shape == (20, 12) and values[1, 1] == 42.0
    np.testing.assert_array_equal(values[10:], 0.0)


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            {
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "big"}},
                    {"name": "gzip", "configuration": {"level": 1}},
                ]
            },
            None,
        ),
        ({"data_type": "float64"}, errno.EINVAL),  # the chunk's size is another now
        ({"shape": [4, 4]}, errno.ENOENT),  # the chunk is outside the array now
    ],
    ids=["codecs", "data_type", "shape"],
)
def test_a_chunk_file_open_across_a_metadata_change_is_stored_as_the_array_is_now(mount, tmp_path, change, refusal):
    """A chunk file closed after its array's document changed (an array that held no data
    yet may change anything) is stored under the metadata it has now, or refused: never
    encoded as before, where the changed metadata cannot read it."""
    root = tmp_path / "a.zarr"
    zarr.create_array(root, shape=(8, 8), chunks=(4, 4), dtype="float32", fill_value=0)
    m = mount(root)
    fd = os.open(m / "chunks/1/1", os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, np.full(16, 2.5, "<f4").tobytes())
        doc = json.loads((m / "zarr.json").read_text())
        (m / "zarr.json").write_text(json.dumps(doc | change))
    finally:
        if refusal is None:
            os.close(fd)
        else:
            with pytest.raises(OSError) as info:
                os.close(fd)
            assert info.value.errno == refusal
    m.unmount()
    values = zarr.open_array(root, mode="r")
    if refusal is None:
        np.testing.assert_array_equal(values[4:, 4:], 2.5)
    else:
        assert not (root / "c").exists()
        np.testing.assert_array_equal(values[...], 0)


@pytest.mark.parametrize("name", ["chunks/1/1", "zarr.json"])
def test_a_file_whose_array_another_writer_erased_is_refused_and_never_stored_later(mount, tmp_path, name):
    """Its close fails ENOENT and drops it: the unmount never stores it into an array
    made under that name since (it stores again only what failed to reach the store)."""
    root = tmp_path / "g.zarr"
    zarr.open_group(root, mode="w").create_array("a", shape=(8, 8), chunks=(4, 4), dtype="float32", fill_value=0)
    m = mount(root, "--metadata-ttl", "0")
    document = json.loads((m / "a/zarr.json").read_text())
    fd = os.open(m / "a" / name, os.O_WRONLY | os.O_TRUNC)
    try:
        if name == "zarr.json":
            os.write(fd, json.dumps(document | {"attributes": {"ours": 1}}).encode())
        else:
            os.write(fd, np.full(16, 2.5, "<f4").tobytes())
        shutil.rmtree(root / "a")
    finally:
        with pytest.raises(OSError) as info:
            os.close(fd)
    assert info.value.errno == errno.ENOENT
    theirs = zarr.open_group(root).create_array(
        "a", shape=(8, 8), chunks=(4, 4), dtype="float32", fill_value=0, attributes={"theirs": 1}
    )
    theirs[...] = 9
    m.unmount()
    stored = zarr.open_array(root / "a", mode="r")
    assert stored.attrs.asdict() == {"theirs": 1}
    np.testing.assert_array_equal(stored[...], 9)
