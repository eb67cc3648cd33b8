"""Bands (format/bands.py, filled by views/ahead/inflight.py): chunk rows of `data` laid
out whole once decoded ahead of a sequential reader, so that reads are slices of them.
Driven through the decoded core without a kernel, as the FUSE adapter calls it
(read(wait=False), then read); every byte is checked against zarr-python reading the store."""

from __future__ import annotations

import json
import os
import threading
import warnings

import numpy as np
import pytest

from zarrfs.fs.core import NotAtHand
from zarrfs.fs.decoded.core import DecodedCore
from zarrfs.fs.mount import MountConfig, open_source

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


@pytest.fixture
def mount(tmp_path):
    opened = []

    def make(cache_size: int = 64 << 20, read_only: bool = False) -> DecodedCore:
        hierarchy, shutdown = open_source(MountConfig(str(tmp_path / "s"), "/nonexistent", cache_size=cache_size))
        core = DecodedCore(hierarchy, read_only=read_only, metadata_ttl=0)
        opened.append((core, shutdown))
        return core

    yield make
    for core, shutdown in opened:
        core.close()
        shutdown(True)


def _read_all(core: DecodedCore, path: str, request: int, start: int = 0, end: int | None = None) -> bytes:
    """As the adapter reads: what is at hand first, the rest as on a worker."""
    file = core.open(path, os.O_RDONLY)
    size = core.lookup(path).size if end is None else end
    out = []
    for offset in range(start, size, request):
        n = min(request, size - offset)
        try:
            data = file.read(offset, n, wait=False)
        except NotAtHand:
            data = file.read(offset, n)
        assert len(data) == n
        out.append(bytes(data))
    file.release()
    return b"".join(out)


def _expected(root, name: str) -> bytes:
    values = zarr.open_array(str(root / name), mode="r")[...]
    return np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).tobytes()


def _bands(core: DecodedCore) -> int:
    return core.stats().get("bands_made", 0)


@pytest.mark.parametrize("dtype", ["<f4", ">u2", "<c8", "|u1"])
def test_a_sequential_reader_is_served_from_bands_laid_out_in_c_order(tmp_path, mount, dtype):
    root = tmp_path / "s"
    values = (np.arange(1000 * 300) % 251).astype(dtype).reshape(1000, 300)  # 1000 rows: a partial last band
    zarr.create_array(str(root / "a"), shape=values.shape, chunks=(64, 64), dtype=dtype)[...] = values
    expected = _expected(root, "a")
    core = mount()
    for request in (128 << 10, 4096, 100_000):  # odd sizes: reads across two bands
        assert _read_all(core, "a/data", request) == expected
    assert _bands(core) >= 10
    # a re-read is answered at hand from the bands, none of it decoded again
    file = core.open("a/data", os.O_RDONLY)
    assert bytes(file.read(len(expected) - 5000, 5000, wait=False)) == expected[-5000:]
    assert bytes(file.read(1000, 300_000, wait=False)) == expected[1000:301_000]
    file.release()


def test_data_npy_and_a_three_dimensional_array(tmp_path, mount):
    root = tmp_path / "s"
    values = np.arange(40 * 30 * 20, dtype="<i4").reshape(40, 30, 20)
    zarr.create_array(str(root / "b"), shape=values.shape, chunks=(8, 7, 6), dtype="<i4")[...] = values
    core = mount()
    assert _read_all(core, "b/data", 8192) == values.tobytes()
    assert _bands(core) >= 4
    npy = _read_all(core, "b/data.npy", 8192)
    header = len(npy) - values.nbytes
    assert npy[header:] == values.tobytes()


def test_sharded_and_fortran_ordered_arrays(tmp_path, mount):
    root = tmp_path / "s"
    values = np.random.default_rng(0).normal(size=(256, 96)).astype("<f8")
    zarr.create_array(str(root / "sh"), shape=values.shape, shards=(64, 96), chunks=(32, 32), dtype="<f8")[...] = values
    f = zarr.create_array(str(root / "f"), shape=(200, 50), chunks=(30, 20), dtype=">i8", zarr_format=2, order="F")
    f[...] = np.arange(200 * 50).reshape(200, 50)
    core = mount()
    assert _read_all(core, "sh/data", 16384) == values.tobytes()
    assert _read_all(core, "f/data", 4096) == _expected(root, "f")
    assert _bands(core) >= 8


def test_writes_interleaved_with_reads_are_seen_and_stale_bands_never_served(tmp_path, mount):
    root = tmp_path / "s"
    values = np.arange(512 * 128, dtype="<i4").reshape(512, 128)
    zarr.create_array(str(root / "a"), shape=values.shape, chunks=(32, 32), dtype="<i4")[...] = values
    core = mount()
    assert _read_all(core, "a/data", 8192) == values.tobytes()
    assert _bands(core) >= 8
    writer = core.open("a/data", os.O_WRONLY)
    patch = np.full(300, -7, dtype="<i4").tobytes()
    offset = 100 * 128 * 4 + 12  # inside a band already made
    writer.write(offset, patch)
    expected = bytearray(values.tobytes())
    expected[offset : offset + len(patch)] = patch
    assert _read_all(core, "a/data", 8192) == expected  # pending: seen through every read
    writer.flush()
    assert _read_all(core, "a/data", 8192) == expected  # stored: bands of before are not served
    writer.release()
    assert _read_all(core, "a/data", 4096) == expected
    np.testing.assert_array_equal(
        np.frombuffer(bytes(expected), "<i4").reshape(512, 128), zarr.open_array(str(root / "a"), mode="r")[...]
    )


def test_concurrent_readers_of_parts_of_one_file(tmp_path, mount):
    root = tmp_path / "s"
    values = np.random.default_rng(1).integers(0, 1 << 30, size=(1024, 256)).astype("<i4")
    zarr.create_array(str(root / "a"), shape=values.shape, chunks=(64, 64), dtype="<i4")[...] = values
    core = mount()
    expected = values.tobytes()
    quarter = len(expected) // 4
    got: dict[int, bytes] = {}
    threads = [
        threading.Thread(
            target=lambda i=i: got.__setitem__(i, _read_all(core, "a/data", 65536, i * quarter, (i + 1) * quarter))
        )
        for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert b"".join(got[i] for i in range(4)) == expected


def test_bands_stay_within_the_cache_and_rows_too_large_for_it_are_served_from_chunks(tmp_path, mount):
    root = tmp_path / "s"
    values = np.arange(2048 * 512, dtype="<f4").reshape(2048, 512)  # 4 MiB; a band of 64 rows is 128 KiB
    zarr.create_array(str(root / "a"), shape=values.shape, chunks=(64, 64), dtype="<f4")[...] = values
    small = mount(cache_size=1 << 20)  # a quarter of it holds one band
    assert _read_all(small, "a/data", 65536) == values.tobytes()
    assert _bands(small) >= 8
    assert small.stats()["cache_bytes"] <= 1 << 20
    tiny = mount(cache_size=256 << 10)  # a band would be more than a quarter of it
    assert _read_all(tiny, "a/data", 65536) == values.tobytes()
    assert _bands(tiny) == 0
    assert tiny.stats()["cache_bytes"] <= 256 << 10


def _rewrite(core: DecodedCore, path: str, document: dict) -> None:
    file = core.open(path, os.O_WRONLY | os.O_TRUNC)
    file.write(0, json.dumps(document).encode())
    file.flush()
    file.release()


def test_a_change_to_other_nodes_leaves_an_arrays_bands_served_and_its_own_retires_them(tmp_path, mount):
    root = tmp_path / "s"
    values = np.arange(512 * 128, dtype="<i4").reshape(512, 128)
    zarr.create_group(str(root))
    zarr.create_array(str(root / "g/a"), shape=values.shape, chunks=(32, 32), dtype="<i4")[...] = values
    zarr.create_array(str(root / "b"), shape=(10,), chunks=(5,), dtype="<i4")[...] = 1
    zarr.consolidate_metadata(str(root))
    core = mount()  # metadata_ttl 0: every lookup reads the metadata again
    assert _read_all(core, "g/a/data", 8192) == values.tobytes()
    made = _bands(core)
    assert made >= 8
    reader = core.open("g/a/data", os.O_RDONLY)
    assert bytes(reader.read(1000, 5000, wait=False)) == values.tobytes()[1000:6000]
    # another array's attributes written through the mount (which rewrites the root's
    # consolidated metadata), then changed in the store by another writer, both seen
    _rewrite(core, "b/zarr.json", dict(json.loads((root / "b/zarr.json").read_bytes()), attributes={"by": "mount"}))
    core.synced()  # as a sync(1): the root's consolidated metadata is rewritten
    consolidated = json.loads((root / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]
    assert consolidated["b"]["attributes"] == {"by": "mount"}
    zarr.open_array(str(root / "b"), mode="r+").attrs["by"] = "others"
    for path in ("", "g", "b", "g/a"):
        core.lookup(path)
    assert json.loads(bytes(core.open("b/zarr.json", os.O_RDONLY).read(0, 1 << 20)))["attributes"] == {"by": "others"}
    # the array's bands are still at hand: nothing of it is decoded again
    assert bytes(reader.read(1000, 5000, wait=False)) == values.tobytes()[1000:6000]
    assert _read_all(core, "g/a/data", 8192) == values.tobytes() and _bands(core) == made
    # its own attributes changed: what was decoded under its metadata before is not served
    _rewrite(core, "g/a/zarr.json", dict(json.loads((root / "g/a/zarr.json").read_bytes()), attributes={"x": 1}))
    with pytest.raises(NotAtHand):
        reader.read(1000, 5000, wait=False)
    reader.release()
    assert _read_all(core, "g/a/data", 8192) == values.tobytes()


@pytest.mark.parametrize("how", ["moved", "made", "seen"])
def test_an_open_file_of_an_array_since_replaced_caches_nothing_for_the_array_now_there(tmp_path, mount, how):
    """A chunk file opened before its array was erased and another put in its name (moved
    there, made anew; or replaced by another writer, seen at a refresh) reads under the
    metadata it was opened with: what it decodes of the new array's chunks is never served
    to the readers of that array, and they cache what they decode."""
    root = tmp_path / "s"
    for name in ("", "g", "h"):
        zarr.create_group(str(root / name))
    zarr.create_array(str(root / "h/x"), shape=(4,), chunks=(4,), dtype="<i2")[...] = np.arange(4, dtype="<i2")
    new = np.array([70000, -3], dtype="<i4")  # a chunk of the same 8 bytes
    zarr.create_array(str(root / "g/x"), shape=(2,), chunks=(2,), dtype="<i4")[...] = new
    core = mount()
    pinned = core.open("h/x/chunks/0", os.O_RDONLY)
    if how == "seen":
        zarr.create_array(str(root / "h/x"), shape=(2,), chunks=(2,), dtype="<i4", overwrite=True)[...] = new
        core.lookup("h/x")  # (metadata_ttl 0: read again, found changed)
    else:
        core.unlink("h/x/zarr.json")  # rm -r h/x
        core.rmdir("h/x")
        if how == "moved":
            core.rename("g/x", "h/x")
        else:
            zarr.create_array(str(root / "h/x"), shape=(2,), chunks=(2,), dtype="<i4")[...] = new
    pinned.read(0, 8)  # (whatever it reads: its array is gone)
    pinned.release()
    assert _read_all(core, "h/x/data", 8) == new.tobytes()
    assert _read_all(core, "h/x/chunks/0", 8) == new.tobytes()
    assert core.hierarchy.context.cache.get(("h/x", (0,))) is not None


def test_attributes_set_on_the_group_above_leave_its_arrays_bands_served(tmp_path, mount):
    root = tmp_path / "s"
    values = np.arange(512 * 128, dtype="<i4").reshape(512, 128)
    zarr.create_group(str(root))
    zarr.create_group(str(root / "g"))
    zarr.create_array(str(root / "g/a"), shape=values.shape, chunks=(32, 32), dtype="<i4")[...] = values
    core = mount()
    assert _read_all(core, "g/a/data", 8192) == values.tobytes()
    made = _bands(core)
    reader = core.open("g/a/data", os.O_RDONLY)
    core.set_xattr("g", "user.zarr.units", b'"K"')  # the group's zarr.json rewritten: still a group
    core.set_xattr("", "user.zarr.title", b'"t"')
    for path in ("", "g", "g/a"):
        core.lookup(path)
    fetched = core.stats().get("store_requests", 0)
    assert reader.read(1000, 5000) == values.tobytes()[1000:6000]  # the open reader, as on a worker
    reader.release()
    assert _read_all(core, "g/a/data", 8192) == values.tobytes()
    assert _bands(core) == made and core.stats().get("store_requests", 0) == fetched  # nothing decoded again
    assert zarr.open_group(str(root / "g"), mode="r").attrs["units"] == "K"
