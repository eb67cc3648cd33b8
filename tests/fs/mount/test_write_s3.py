"""Writing through a mount of an S3 bucket (a real moto server on 127.0.0.1): the same
semantics as on a local store, checked with zarr-python reading the bucket directly."""

from __future__ import annotations

import errno
import os
import subprocess

import numpy as np
import pytest
import zarr
from zarr.storage import FsspecStore

from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem, s3_storage_options  # noqa: F401


@pytest.fixture
def s3_store(s3_bucket, s3_endpoint, s3_filesystem):
    url = f"s3://{s3_bucket}/survey.zarr"
    store = FsspecStore.from_url(url, storage_options={"endpoint_url": s3_endpoint, "asynchronous": True})
    g = zarr.open_group(store, mode="w")
    a = g.create_array("img", shape=(8, 9), chunks=(4, 4), dtype="uint16", fill_value=0)
    a[:] = np.arange(72, dtype="uint16").reshape(8, 9)
    g.create_array("sh", shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="float64", fill_value=0.0)
    return url, store


def test_cp_into_data_mkdir_npy_and_mv_on_s3(mount, s3_store, s3_endpoint, tmp_path):
    url, store = s3_store
    values = np.random.default_rng(5).random((8, 8))
    (tmp_path / "sh.raw").write_bytes(values.astype("<f8").tobytes())
    np.save(tmp_path / "new.npy", np.arange(10, dtype="int32"))
    m = mount(url, "--storage-option", f"endpoint_url={s3_endpoint}")
    subprocess.run(["cp", tmp_path / "sh.raw", m / "sh/data"], check=True)
    (m / "grp").mkdir()
    subprocess.run(["cp", tmp_path / "new.npy", m / "grp/"], check=True)
    subprocess.run(["mv", m / "img", m / "grp/img"], check=True)
    assert sorted(os.listdir(m / "grp")) == ["img", "new", "zarr.json"]
    m.unmount()
    g = zarr.open_group(store, mode="r")
    np.testing.assert_array_equal(g["sh"][...], values)
    np.testing.assert_array_equal(g["grp/new"][...], np.arange(10, dtype="int32"))
    np.testing.assert_array_equal(g["grp/img"][...], np.arange(72, dtype="uint16").reshape(8, 9))
    assert "img" not in g


class RestartableS3:
    """A second moto server over the same in-process buckets, which a test can stop and
    start again on the same port (the store "goes away" and "comes back")."""

    def __init__(self) -> None:
        from tests.conftest_s3 import free_port

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.server = None

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


@pytest.fixture
def restartable_s3(s3_endpoint):
    s3 = RestartableS3()
    s3.start()
    yield s3
    s3.stop()


def test_an_unreachable_store_is_eio_and_buffered_writes_are_stored_when_it_returns(mount, s3_bucket, restartable_s3):
    endpoint = restartable_s3.endpoint
    store = FsspecStore.from_url(
        f"s3://{s3_bucket}/h.zarr", storage_options={"endpoint_url": endpoint, "asynchronous": True}
    )
    arr = zarr.create_array(store, name="a", shape=(4, 100), chunks=(1, 100), dtype="int32", fill_value=0)
    arr[:] = 7
    m = mount(f"s3://{s3_bucket}/h.zarr", "--cache-size", "0", "--storage-option", f"endpoint_url={endpoint}")
    assert (m / "a/chunks/0/0").read_bytes() == np.full(100, 7, "<i4").tobytes()
    restartable_s3.stop()
    with pytest.raises(OSError) as info:
        (m / "a/chunks/1/0").read_bytes()
    assert info.value.errno == errno.EIO
    fd = os.open(m / "a/data", os.O_WRONLY)
    os.pwrite(fd, np.full(100, 9, "<i4").tobytes(), 400 * 2)  # row 2: acknowledged
    with pytest.raises(OSError) as info:
        os.close(fd)  # storing fails: the writer hears of it at close
    assert info.value.errno == errno.EIO
    restartable_s3.start()
    assert (m / "a/chunks/3/0").read_bytes() == np.full(100, 7, "<i4").tobytes()  # serving again
    m.unmount()  # the write that could not be stored is stored now
    values = zarr.open_array(store, path="a", mode="r")[...]
    np.testing.assert_array_equal(values[2], 9)
    np.testing.assert_array_equal(values[[0, 1, 3]], 7)


def test_a_chunk_file_closed_while_the_store_is_away_is_stored_at_unmount(mount, s3_bucket, restartable_s3):
    endpoint = restartable_s3.endpoint
    store = FsspecStore.from_url(
        f"s3://{s3_bucket}/c.zarr", storage_options={"endpoint_url": endpoint, "asynchronous": True}
    )
    arr = zarr.create_array(store, name="a", shape=(2, 50), chunks=(1, 50), dtype="int16", fill_value=0)
    arr[:] = 1
    m = mount(f"s3://{s3_bucket}/c.zarr", "--storage-option", f"endpoint_url={endpoint}")
    fd = os.open(m / "a/chunks/1/0", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, np.full(50, 5, "<i2").tobytes())  # acknowledged
    restartable_s3.stop()
    with pytest.raises(OSError) as info:
        os.close(fd)
    assert info.value.errno == errno.EIO
    restartable_s3.start()
    m.unmount()
    values = zarr.open_array(store, path="a", mode="r")[...]
    np.testing.assert_array_equal(values[1], 5)
    np.testing.assert_array_equal(values[0], 1)
