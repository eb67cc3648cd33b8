"""Consolidated metadata kept true by changes made through a mount (docs/semantics.md): after `cp
x.npy`, `rm -r`, `mv`, `setfattr`, `mkdir` and unmount, zarr-python's default open,
xarray's `open_zarr` and a fresh mount see what the mount showed — on local v3 and v2
stores and on S3 (moto). A burst of changes rewrites the consolidated document a bounded
number of times; one that cannot be written fails the change, unmade."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import struct
import subprocess
import time
import warnings

import numpy as np
import pytest
import zarr
from zarr.storage import FsspecStore, LocalStore

from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem, s3_storage_options  # noqa: F401
from zarrfs.fs.decoded.consolidation import MOST
from zarrfs.store.keys import TEMP_PREFIX

warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")

VALUES = {
    "gone": np.arange(6, dtype="int32"),
    "a": np.arange(6, dtype="int32") * 10,
    "keep": np.linspace(0, 1, 6, dtype="float32"),
}
NEW = np.arange(12, dtype="int16").reshape(3, 4)


def _write_source(store, zarr_format: int) -> None:
    """A hierarchy zarr-python writes and consolidates, as published data has it."""
    root = zarr.open_group(store, mode="w", zarr_format=zarr_format)
    sci = root.create_group("sci", attributes={"title": "survey"})
    for name, values in VALUES.items():
        dims = {"dimension_names": ["x"]} if zarr_format == 3 else {}
        attrs = {"units": "K"} if zarr_format == 3 else {"units": "K", "_ARRAY_DIMENSIONS": ["x"]}
        array = sci.create_array(name, shape=values.shape, chunks=(4,), dtype=values.dtype, attributes=attrs, **dims)
        array[:] = values
    zarr.consolidate_metadata(store)


@pytest.fixture(params=["local-v3", "local-v2", "s3-v3"])
def consolidated_source(request, tmp_path):
    """(what to mount, the zarr-python store over it, mount options)"""
    kind = request.param
    if kind.startswith("s3"):
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = request.getfixturevalue("s3_bucket")
        url = f"s3://{bucket}/survey.zarr"
        store = FsspecStore.from_url(url, storage_options={"endpoint_url": endpoint, "asynchronous": True})
        _write_source(store, 3)
        return url, store, ("--storage-option", f"endpoint_url={endpoint}")
    path = tmp_path / "survey.zarr"
    _write_source(LocalStore(str(path)), int(kind[-1]))
    return path, LocalStore(str(path)), ()


def _name_dimensions(array, names: list[str]) -> None:
    """Through the mount, as a user would: a v3 array's zarr.json rewritten, a v2 array's
    `_ARRAY_DIMENSIONS` attribute set."""
    if (array / ".zarray").exists():
        subprocess.run(["setfattr", "-n", "user.zarr._ARRAY_DIMENSIONS", "-v", json.dumps(names), array], check=True)
    else:
        document = json.loads((array / "zarr.json").read_bytes())
        (array / "zarr.json").write_text(json.dumps(dict(document, dimension_names=names)))


def _node_names(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if (directory / n).is_dir())


def _shown(m) -> dict:
    """What a mount shows of /sci: its nodes, keep's units, the values of b and new."""
    return {
        "nodes": _node_names(m / "sci"),
        "units": json.loads(
            subprocess.run(
                ["getfattr", "--only-values", "-n", "user.zarr.units", m / "sci/keep"], capture_output=True, check=True
            ).stdout
        ),
        "b": np.load(m / "sci/b/data.npy").tolist(),
        "new": np.load(m / "sci/new/data.npy").tolist(),
    }


EXPECTED = {
    "nodes": ["b", "keep", "new", "newgroup"],
    "units": "Celsius",
    "b": VALUES["a"].tolist(),
    "new": NEW.tolist(),
}


def test_changes_through_the_mount_are_what_every_reader_sees(mount, consolidated_source, tmp_path):
    source, store, options = consolidated_source
    np.save(tmp_path / "new.npy", NEW)
    m = mount(source, *options)
    subprocess.run(["cp", tmp_path / "new.npy", m / "sci/"], check=True)
    subprocess.run(["rm", "-r", m / "sci/gone"], check=True)
    subprocess.run(["mv", m / "sci/a", m / "sci/b"], check=True)
    subprocess.run(["setfattr", "-n", "user.zarr.units", "-v", '"Celsius"', m / "sci/keep"], check=True)
    (m / "sci/newgroup").mkdir()
    _name_dimensions(m / "sci/new", ["row", "col"])
    assert _shown(m) == EXPECTED
    m.unmount()

    # zarr-python, opening the default way: from the consolidated metadata
    root = zarr.open_group(store, mode="r")
    assert root.metadata.consolidated_metadata is not None
    assert sorted(name for name, _ in root["sci"].members()) == EXPECTED["nodes"]
    assert root["sci/keep"].attrs["units"] == "Celsius"
    np.testing.assert_array_equal(root["sci/b"][:], VALUES["a"])
    np.testing.assert_array_equal(root["sci/new"][:], NEW)
    np.testing.assert_array_equal(root["sci/keep"][:], VALUES["keep"])
    with pytest.raises(KeyError):
        root["sci/gone"]
    with pytest.raises(KeyError):
        root["sci/a"]

    # xarray's open_zarr (consolidated metadata where present, its default)
    import xarray as xr

    dataset = xr.open_zarr(store, group="sci", mask_and_scale=False)  # (v2: the fill value 0 is not missing data here)
    assert set(dataset.data_vars) == {"b", "keep", "new"}
    assert dataset["new"].dims == ("row", "col")
    assert dataset["keep"].attrs["units"] == "Celsius"
    np.testing.assert_array_equal(dataset["b"].values, VALUES["a"])

    # a fresh mount
    again = mount(source, *options)
    assert _shown(again) == EXPECTED
    assert not (again / "sci/gone").exists()


@contextlib.contextmanager
def _renames_into(directory):
    """The names of the files renamed away in `directory` while the block ran (inotify's
    IN_MOVED_FROM: the kernel merges an unread event into an equal one, and each temporary
    file has a name of its own)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK)
    assert fd >= 0 and libc.inotify_add_watch(fd, str(directory).encode(), 0x40) >= 0  # IN_MOVED_FROM
    names: list[str] = []
    closed = False

    def read() -> list[str]:
        while not closed:
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                return names
            offset = 0
            while offset < len(data):
                _, _, _, length = struct.unpack_from("iIII", data, offset)
                raw = data[offset + 16 : offset + 16 + length]
                names.append(raw.rstrip(b"\0").decode())
                offset += 16 + length
        return names

    try:
        yield read
        read()
    finally:
        closed = True
        os.close(fd)


V2_NPY_VALUES = {  # .npy files of types v2 holds beyond numbers, as numpy writes them
    "complex": np.array([1 + 2j, 0, 3 - 4j], ">c8"),
    "text": np.array(["ab", "", "xyz"], "<U3"),
    "bytes": np.array([b"ab", b"", b"wxyz"], "S4"),
    "days": np.array(["2020-01-01", "NaT", "1999-12-31"], "M8[D]"),
    "records": np.array([(1, 2.5, b"x"), (0, 0, b""), (-3, 1e300, b"yz")], [("a", "<i4"), ("b", ">f8"), ("c", "S2")]),
}


@pytest.mark.filterwarnings("ignore::Warning:zarr")
def test_npy_files_of_every_v2_type_copied_into_a_v2_group_are_seen_by_zarr_python(mount, tmp_path):
    """zarr-python lists no v3 node below a v2 group, and reads `.zmetadata` for v2 nodes
    only: a `.npy` copied into a v2 hierarchy must become a v2 array to be seen at all."""
    path = tmp_path / "survey.zarr"
    _write_source(LocalStore(str(path)), 2)
    for name, values in V2_NPY_VALUES.items():
        np.save(tmp_path / f"{name}.npy", values)
    m = mount(path)
    for name in V2_NPY_VALUES:
        subprocess.run(["cp", tmp_path / f"{name}.npy", m / "sci/"], check=True)
    m.unmount()
    for consolidated in (True, False):
        sci = zarr.open_group(str(path), mode="r", use_consolidated=consolidated)["sci"]
        assert set(V2_NPY_VALUES) <= {name for name, _ in sci.members()}, consolidated
        for name, values in V2_NPY_VALUES.items():
            assert sci[name].metadata.zarr_format == 2
            np.testing.assert_array_equal(sci[name][...], values)


@pytest.mark.filterwarnings("ignore::Warning:zarr")
def test_a_root_document_written_back_from_an_older_copy_keeps_the_consolidated_metadata_true(mount, tmp_path):
    """An editor or script writes back the root zarr.json it read before nodes were made
    and removed: its consolidated_metadata is stale, and zarr-python would believe it."""
    path = tmp_path / "survey.zarr"
    _write_source(LocalStore(str(path)), 3)
    m = mount(path)
    old = json.loads((m / "zarr.json").read_bytes())
    (m / "made").mkdir()
    subprocess.run(["rm", "-r", m / "sci/gone"], check=True)
    (m / "zarr.json").write_text(json.dumps(dict(old, attributes={"edited": True})))
    m.unmount()
    root = zarr.open_group(str(path), mode="r")
    assert root.attrs["edited"] is True
    assert sorted(name for name, _ in root.members(max_depth=None)) == ["made", "sci", "sci/a", "sci/keep"]


def test_a_burst_of_500_removals_rewrites_the_consolidated_document_a_few_times(mount, tmp_path):
    path = tmp_path / "many.zarr"
    root = zarr.open_group(str(path), mode="w")
    group = root.create_group("g")
    for i in range(500):
        group.create_array(f"a{i}", shape=(2,), dtype="uint8")
    root.create_array("kept", shape=(2,), dtype="uint8")
    zarr.consolidate_metadata(str(path))
    m = mount(path)
    os.listdir(m / "g")
    with _renames_into(path) as renamed:  # the kernel's word, not the daemon's
        started = time.monotonic()
        subprocess.run(["rm", "-r", *[m / f"g/a{i}" for i in range(500)]], check=True)
        m.unmount()
        took = time.monotonic() - started
    # each store is a temporary file renamed over its key; only the root's zarr.json is
    # stored in the root directory
    writes = sum(name.startswith(TEMP_PREFIX) for name in renamed())
    # at quiet points, at least every MOST seconds while the burst goes on, and at unmount
    # (twice that allowed: a pause of a loaded machine is a quiet point); not one per rm
    assert 1 <= writes <= 3 + 2 * took / MOST, (writes, took)
    reread = zarr.open_group(str(path), mode="r")
    assert reread.metadata.consolidated_metadata is not None
    assert sorted(name for name, _ in reread.members(max_depth=None)) == ["g", "kept"]


def test_a_change_whose_consolidated_metadata_cannot_be_written_fails_unmade(tmp_path):
    """Kernel-free: a store that refuses writes of the root's zarr.json (as a bucket policy
    or a read-only file can) makes the change fail with EACCES, and the store is unchanged."""
    import errno

    from tests.conftest import tree_snapshot
    from zarrfs.format import IOContext, open_hierarchy
    from zarrfs.fs.decoded.core import DecodedCore
    from zarrfs.fs.errors import FsError
    from zarrfs.store import StorePermissionError, open_store

    path = tmp_path / "s.zarr"
    _write_source(LocalStore(str(path)), 3)
    store = open_store(str(path))
    real_set_many, real_set_if = store._set_many, store._set_if

    def refusing(items):
        if "zarr.json" in items:
            raise StorePermissionError("zarr.json: permission denied")
        real_set_many(items)

    def refusing_if(key, value, version):  # (consolidated documents are written conditionally)
        if key == "zarr.json":
            raise StorePermissionError("zarr.json: permission denied")
        return real_set_if(key, value, version)

    store._set_many, store._set_if = refusing, refusing_if
    before = tree_snapshot(path)
    core = DecodedCore(open_hierarchy(store, IOContext()))
    try:
        for change in (
            lambda: (core.unlink("sci/gone/zarr.json"), core.rmdir("sci/gone")),  # rm -r
            lambda: core.mkdir("sci/new"),
            lambda: core.rename("sci/a", "sci/b"),
            lambda: core.set_xattr("sci/keep", "user.zarr.units", b'"C"'),
        ):
            with pytest.raises(FsError) as failure:
                change()
            assert failure.value.errno == errno.EACCES
        assert tree_snapshot(path) == before
    finally:
        core.shutdown()
        core.close()


def test_an_array_another_writer_erased_or_changed_without_consolidating_is_read_as_it_is(
    mount, s3_endpoint, s3_bucket, s3_filesystem
):
    """Consolidated metadata made stale by another writer, on a remote store (where it
    stands in for listing): an array's own documents are checked when it is first opened,
    so an erased one is ENOENT and leaves the listing, never fill values, and a changed one
    shows its own metadata."""
    url = f"s3://{s3_bucket}/survey.zarr"
    store = FsspecStore.from_url(url, storage_options={"endpoint_url": s3_endpoint, "asynchronous": True})
    _write_source(store, 3)
    s3_filesystem.rm(f"{s3_bucket}/survey.zarr/sci/gone", recursive=True)
    changed = (
        zarr.open_array(store, path="sci/a", mode="r+", use_consolidated=False)
        if "use_consolidated" in zarr.open_array.__code__.co_varnames
        else zarr.open_array(store, path="sci/a", mode="r+")
    )
    changed.attrs["units"] = "mK"
    m = mount(url, "--storage-option", f"endpoint_url={s3_endpoint}")
    with pytest.raises(FileNotFoundError):
        (m / "sci/gone/data").read_bytes()
    assert "gone" not in os.listdir(m / "sci")
    assert json.loads((m / "sci/a/zarr.json").read_bytes())["attributes"]["units"] == "mK"
    np.testing.assert_array_equal(np.load(m / "sci/a/data.npy"), VALUES["a"])
    np.testing.assert_array_equal(np.load(m / "sci/keep/data.npy"), VALUES["keep"])
    assert "stale" in m.log_text()


def test_fsync_of_a_document_writes_the_consolidated_metadata_before_it_returns(mount, tmp_path):
    path = tmp_path / "s.zarr"
    _write_source(LocalStore(str(path)), 3)
    m = mount(path)
    document = json.loads((m / "sci/keep/zarr.json").read_bytes())
    document["attributes"]["units"] = "degC"
    fd = os.open(m / "sci/keep/zarr.json", os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, json.dumps(document).encode())
        os.fsync(fd)
        consolidated = json.loads((path / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]
    finally:
        os.close(fd)
    assert consolidated["sci/keep"]["attributes"]["units"] == "degC"


def test_a_consolidated_write_that_fails_later_stops_the_next_change_until_it_is_written(tmp_path):
    """Kernel-free: the first change is made and acknowledged; its consolidated write then
    fails (the store refuses it). The next change writes it first, fails unmade while the
    store refuses, and goes through once the store takes it again."""
    import errno

    from zarrfs.format import IOContext, open_hierarchy
    from zarrfs.fs.decoded.core import DecodedCore
    from zarrfs.fs.errors import FsError
    from zarrfs.store import StoreUnavailableError, open_store

    path = tmp_path / "s.zarr"
    _write_source(LocalStore(str(path)), 3)
    store = open_store(str(path))
    real_set_many, real_set_if, refusing = store._set_many, store._set_if, [False]

    def set_many(items):
        if refusing[0] and "zarr.json" in items:
            raise StoreUnavailableError("zarr.json: the store is away")
        real_set_many(items)

    def set_if(key, value, version):  # (consolidated documents are written conditionally)
        if refusing[0] and key == "zarr.json":
            raise StoreUnavailableError("zarr.json: the store is away")
        return real_set_if(key, value, version)

    store._set_many, store._set_if = set_many, set_if
    core = DecodedCore(open_hierarchy(store, IOContext()))
    try:
        for name in ("gone", "a"):  # rm -r of two: a burst, the group's document stripped and written back later
            core.unlink(f"sci/{name}/zarr.json")
            core.rmdir(f"sci/{name}")  # its group's consolidated document was found writable first
        refusing[0] = True
        with pytest.raises(FsError):
            core._consolidation.sync()  # as the quiet point's write would
        with pytest.raises(FsError) as failure:
            core.mkdir("sci/new")
        assert failure.value.errno == errno.EIO and not (path / "sci/new").exists()
        refusing[0] = False
        core.mkdir("sci/new")
    finally:
        core.shutdown()
        core.close()
    root = zarr.open_group(str(path), mode="r")
    assert sorted(name for name, _ in root["sci"].members()) == ["keep", "new"]
