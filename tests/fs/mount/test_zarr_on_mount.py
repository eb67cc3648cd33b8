"""Zarr libraries opening the decoded mount as a local store (docs/semantics.md, "Opening
the mount with zarr-python or xarray"): each array directory holds the store's own keys
(`c/0/0`, `0.0`, `0/0`) beside its views, bytes as stored, so xarray, zarr-python and
tensorstore read what the store holds, never fill values, and zarr-python writes through
it as on a local directory; every decoded view shows such a write at once."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import uuid
import warnings

import numpy as np
import pytest
import zarr

from tests.conftest import wait_for
from tests.conftest_s3 import s3_endpoint, s3_filesystem  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::RuntimeWarning")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
VALUES = (np.arange(10 * 12, dtype="<i4") * 3 + 1).reshape(10, 12)


def _dataset():
    import xarray as xr

    rng = np.random.default_rng(7)
    return xr.Dataset(
        {
            "t": (("time", "lat", "lon"), rng.random((4, 5, 6)).astype("f4"), {"units": "K"}),
            "p": (("lat", "lon"), np.arange(30.0).reshape(5, 6)),
        },
        coords={"time": np.arange(4), "lat": np.linspace(-10, 10, 5), "lon": np.linspace(0, 50, 6)},
        attrs={"title": "survey"},
    )


def _xarray_store(root, zarr_format: int):
    _dataset().to_zarr(root, zarr_format=zarr_format, consolidated=True, encoding={"t": {"chunks": (2, 3, 3)}})
    return root


def _zarr_python_store(root):
    """Arrays as zarr-python writes them, one of each key layout (v3 default keys,
    sharded, 0-d, v3 with v2 keys; v2 with separator "." and "/")."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = zarr.open_group(root, mode="w", zarr_format=3)
        group.create_array("plain", shape=VALUES.shape, chunks=(4, 5), dtype="<i4", fill_value=0)[...] = VALUES
        group.create_array("sharded", shape=VALUES.shape, chunks=(2, 3), shards=(4, 6), dtype="<i4")[...] = VALUES
        group.create_array("scalar", shape=(), dtype="<f8", fill_value=0)[...] = 2.5
        group.create_array("v2keys", shape=VALUES.shape, chunks=(4, 5), dtype="<i4", chunk_key_encoding={"name": "v2"})[
            ...
        ] = VALUES
        old = zarr.open_group(root / "old", mode="w", zarr_format=2)
        old.create_array("dot", shape=VALUES.shape, chunks=(3, 4), dtype="<i4", fill_value=0)[...] = VALUES
        zarr.create_array(
            root / "old/slash",
            shape=VALUES.shape,
            chunks=(3, 4),
            dtype="<i4",
            fill_value=0,
            zarr_format=2,
            chunk_key_encoding={"name": "v2", "separator": "/"},
        )[...] = VALUES
        old.create_array("scalar", shape=(), dtype="<i2", fill_value=0)[...] = 9
    return root


ARRAYS = ["plain", "sharded", "scalar", "v2keys", "old/dot", "old/slash", "old/scalar"]
CHUNKS = {
    "plain": (4, 5),
    "sharded": (2, 3),
    "v2keys": (4, 5),
    "old/dot": (3, 4),
    "old/slash": (3, 4),
}  # (inner chunks)


def _stored_keys(root, array: str) -> dict[str, bytes]:
    """Every chunk or shard key the store holds for `array`, relative to it, with its bytes."""
    base = root / array
    return {
        p.relative_to(base).as_posix(): p.read_bytes()
        for p in base.rglob("*")
        if p.is_file() and p.name not in ("zarr.json", ".zarray", ".zattrs")
    }


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_xarray_opens_the_mount_as_it_opens_the_store(tmp_path, mount, zarr_format):
    import xarray as xr

    root = _xarray_store(tmp_path / "survey.zarr", zarr_format)
    m = mount(root)
    expected = xr.open_zarr(root).load()
    through = xr.open_zarr(m.path).load()
    assert through.identical(expected)
    assert not np.isnan(through["t"].values).any()


def test_zarr_python_reads_every_array_and_every_key_byte_exact(tmp_path, mount):
    root = _zarr_python_store(tmp_path / "z.zarr")
    m = mount(root)
    for name in ARRAYS:
        expected = zarr.open_array(root / name, mode="r")[...]
        assert np.array_equal(zarr.open_array(m / name, mode="r")[...], expected), name
        keys = _stored_keys(root, name)
        assert keys, name
        for key, stored in keys.items():
            assert (m / name / key).read_bytes() == stored, (name, key)
            with open(m / name / key, "rb") as f:  # a ranged read, as a shard index read is
                f.seek(len(stored) // 2)
                assert f.read(7) == stored[len(stored) // 2 :][:7], (name, key)


def test_key_directories_list_what_the_store_holds_and_views_keep_their_names(tmp_path, mount):
    """An array directory lists its views only (`find`, `du`, `rsync` see no second copy
    of the array); its key directories list the keys the store holds."""
    root = _zarr_python_store(tmp_path / "z.zarr")
    m = mount(root)
    listed = set(os.listdir(m / "plain"))
    assert {"chunks", "data", "data.npy", "info", "zarr.json"} <= listed and "c" not in listed
    assert os.path.isdir(m / "plain/c")
    assert sorted(os.listdir(m / "plain/c")) == sorted(p.name for p in (root / "plain/c").iterdir())
    assert sorted(os.listdir(m / "plain/c/1")) == sorted(p.name for p in (root / "plain/c/1").iterdir())
    assert os.stat(m / "plain/c/1/2").st_size == (root / "plain/c/1/2").stat().st_size
    # keys beside the views (v2 "."): reachable by name, not listed among the views
    assert (m / "old/dot/1.2").read_bytes() == (root / "old/dot/1.2").read_bytes()
    assert "1.2" not in os.listdir(m / "old/dot")
    # the views are as they were
    assert np.array_equal(np.load(m / "plain/data.npy"), VALUES)


def test_a_key_the_store_does_not_hold_is_not_there(tmp_path, mount):
    root = tmp_path / "z.zarr"
    zarr.create_array(root, shape=(8, 8), chunks=(4, 4), dtype="<i4", fill_value=0)[:4, :4] = 1
    m = mount(root)
    for missing in ("c/1/1", "c/0/1"):
        with pytest.raises(FileNotFoundError):
            os.stat(m / missing)
    assert zarr.open_array(m.path, mode="r")[...].sum() == 16


@pytest.mark.parametrize("array", ["plain", "sharded", "v2keys", "old/dot", "old/slash"])
def test_zarr_python_writes_a_region_through_the_mount(tmp_path, mount, array):
    """zarr-python's LocalStore writes `KEY.<uuid>.partial` below `c/` and renames it onto
    KEY: `data`, `data.npy` and the chunk files show the write at once, and the store holds
    it after unmount, with no temporary left."""
    root = _zarr_python_store(tmp_path / "z.zarr")
    m = mount(root)
    node = m / array
    before = np.load(node / "data.npy")  # decoded and cached before the write
    zarr.open_array(node, mode="r+")[1:5, 2:9] = -7
    expected = VALUES.copy()
    expected[1:5, 2:9] = -7
    assert np.array_equal(before, VALUES)
    assert np.array_equal(np.load(node / "data.npy"), expected)
    assert (node / "data").read_bytes() == expected.tobytes()
    inner = CHUNKS[array]
    assert (node / "chunks/0/1").read_bytes() == np.ascontiguousarray(
        expected[: inner[0], inner[1] : 2 * inner[1]]
    ).tobytes()
    assert np.array_equal(zarr.open_array(node, mode="r")[...], expected)
    m.unmount()
    assert np.array_equal(zarr.open_array(root / array, mode="r")[...], expected)
    assert not [p for p in root.rglob("*") if "partial" in p.name]


def test_a_key_written_removed_and_renamed_by_plain_programs(tmp_path, mount):
    """cp of an encoded chunk onto a key path stores it as it is; rm erases it (the views
    read the fill value there)."""
    root = _zarr_python_store(tmp_path / "z.zarr")
    m = mount(root)
    node = m / "plain"
    assert np.load(node / "data.npy")[0, 0] == VALUES[0, 0]
    subprocess.run(["cp", str(root / "plain/c/1/1"), str(node / "c/0/0")], check=True)
    expected = VALUES.copy()
    expected[0:4, 0:5] = VALUES[4:8, 5:10]
    assert np.array_equal(np.load(node / "data.npy"), expected)
    os.unlink(node / "c/0/0")
    assert not (root / "plain/c/0/0").exists()
    expected[0:4, 0:5] = 0
    assert np.array_equal(np.load(node / "data.npy"), expected)
    with pytest.raises(OSError) as refused:
        os.rename(node / "c/1/1", node / "data")
    assert refused.value.errno in (errno.EXDEV, errno.EPERM)


def test_tensorstore_reads_a_sharded_array_through_the_mount(tmp_path, mount):
    ts = pytest.importorskip("tensorstore")
    root = _zarr_python_store(tmp_path / "z.zarr")
    m = mount(root)
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(m / "sharded") + "/"}}
    assert np.array_equal(ts.open(spec).result().read().result(), VALUES)


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_numpy_save_into_an_xarray_group_keeps_it_opening(tmp_path, mount, zarr_format):
    import xarray as xr

    root = _xarray_store(tmp_path / "survey.zarr", zarr_format)
    m = mount(root)
    extra = np.arange(30.0).reshape(5, 6) * 2
    np.save(m / "extra.npy", extra)
    np.save(m / "odd.npy", np.zeros((3, 7)))  # no dimension of the group fits: dim_0, dim_1
    opened = wait_for(lambda: ds if "odd" in (ds := xr.open_zarr(m.path)) else None)
    assert opened["extra"].dims == ("lat", "lon")
    assert np.array_equal(opened["extra"].values, extra)
    assert opened["odd"].dims == ("dim_0", "dim_1")
    m.unmount()
    assert xr.open_zarr(root)["extra"].dims == ("lat", "lon")


def test_zarr_python_reads_and_writes_a_bucket_through_the_mount(tmp_path, s3_filesystem, s3_endpoint, mount):
    import xarray as xr

    root = _xarray_store(tmp_path / "survey.zarr", 3)
    bucket = f"zarrfs-{uuid.uuid4().hex[:16]}"
    s3_filesystem.mkdir(bucket)
    s3_filesystem.put(str(root), f"{bucket}/survey.zarr", recursive=True)
    env = {**os.environ, **CREDENTIALS}
    m = mount(f"s3://{bucket}/survey.zarr", "--storage-option", f"endpoint_url={s3_endpoint}", env=env)
    before = json.loads((m / ".zarrfs/stats").read_text())
    assert np.array_equal(zarr.open_array(m / "t", mode="r")[...], zarr.open_array(root / "t", mode="r")[...])
    after = json.loads((m / ".zarrfs/stats").read_text())
    # one HEAD per key: its open uses what its lookup found
    assert after["store_head"] - before.get("store_head", 0) <= len(_stored_keys(root, "t"))
    assert xr.open_zarr(m.path).load().identical(xr.open_zarr(root).load())
    zarr.open_array(m / "p", mode="r+")[0, :] = -1.0
    assert np.array_equal(np.load(m / "p/data.npy")[0], np.full(6, -1.0))
    m.unmount()
    stored = zarr.open_array(
        f"s3://{bucket}/survey.zarr/p", mode="r", storage_options={"endpoint_url": s3_endpoint, **_s3_keys()}
    )
    assert np.array_equal(stored[0], np.full(6, -1.0))


def _s3_keys() -> dict:
    return {"key": "testing", "secret": "testing"}


def test_a_key_stored_while_data_is_written_wins_over_the_earlier_write(tmp_path, mount):
    """Writes to `data` acknowledged before a key is stored are stored first: closing
    `data` afterwards never puts them over the key."""
    root = _zarr_python_store(tmp_path / "z.zarr")
    m = mount(root)
    node = m / "plain"
    with open(node / "data", "r+b") as data:
        data.write(np.full(5, -9, "<i4").tobytes())  # row 0 of chunk (0, 0), buffered by the mount
        data.flush()
        subprocess.run(["cp", str(root / "plain/c/1/1"), str(node / "c/0/0")], check=True)
    expected = VALUES.copy()
    expected[0:4, 0:5] = VALUES[4:8, 5:10]
    assert np.array_equal(np.load(node / "data.npy"), expected)
    m.unmount()
    assert np.array_equal(zarr.open_array(root / "plain", mode="r")[...], expected)


def test_a_key_renamed_onto_a_key_open_for_writing_replaces_it(tmp_path, mount):
    """zarr-python's `KEY.<uuid>.partial` renamed onto KEY while another program has KEY
    open with writes not stored yet: KEY holds what was renamed onto it, as on a local
    directory, where the open is left with the file the rename replaced. (The open's
    writes were stored at its close, or at another program's close of KEY, over it.)"""
    root = _zarr_python_store(tmp_path / "z.zarr")
    m = mount(root)
    node = m / "plain"
    new = (root / "plain/c/1/1").read_bytes()
    with open(node / "c/0/0", "r+b") as other:
        other.write(b"\0\0")
        other.flush()
        (node / "c/0/0.partial").write_bytes(new)
        os.rename(node / "c/0/0.partial", node / "c/0/0")
        assert (node / "c/0/0").read_bytes() == new
        other.write(b"\0\0")
    assert (node / "c/0/0").read_bytes() == new
    expected = VALUES.copy()
    expected[0:4, 0:5] = VALUES[4:8, 5:10]
    assert np.array_equal(np.load(node / "data.npy"), expected)
    m.unmount()
    assert np.array_equal(zarr.open_array(root / "plain", mode="r")[...], expected)
