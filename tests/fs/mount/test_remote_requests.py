"""What a mount of an S3 hierarchy asks of the store, counted by a proxy between the
daemon and a moto server: mounting costs two requests, browsing a handful (none after
mounting when the metadata is consolidated; with `--raw`, one LIST per 1,000 keys and one
HEAD per object, for the mode, owner and times its user metadata holds), an
inner chunk of a shard costs at most two ranged GETs cold and none warm, a sequential
reader keeps many requests in flight (of `data`, or copying the chunk files), and one of a
sharded array asks for each shard whole."""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest

from bench.s3proxy import LatencyProxy
from tests.conftest import wait_for
from tests.conftest_s3 import s3_endpoint, s3_filesystem  # noqa: F401

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
GROUPS, ARRAYS_PER_GROUP = 20, 10


@pytest.fixture(scope="module")
def proxy(s3_endpoint):
    proxy = LatencyProxy(s3_endpoint, latency=0.005).start()
    yield proxy
    proxy.stop()


def _upload(s3_filesystem, root: Path) -> str:
    bucket = f"zarrfs-{uuid.uuid4().hex[:16]}"
    s3_filesystem.mkdir(bucket)
    s3_filesystem.pipe(
        {
            f"{bucket}/h.zarr/{path.relative_to(root).as_posix()}": path.read_bytes()
            for path in root.rglob("*")
            if path.is_file()
        }
    )
    return f"s3://{bucket}/h.zarr"


def _mount(mount, url: str, proxy: LatencyProxy, *options: str):
    return mount(
        url,
        "--read-only",
        "--metadata-ttl",
        "120",
        "--storage-option",
        f"endpoint_url={proxy.url}",
        *options,
        env={**os.environ, **CREDENTIALS},
    )


def _array_document(shape: list[int], chunks: list[int], codecs: list | None = None) -> dict:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0.0,
        "codecs": codecs or [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    }


@pytest.fixture(scope="module")
def two_hundred_arrays(tmp_path_factory, s3_filesystem) -> str:
    """20 groups of 10 small arrays each (no chunks stored), with consolidated metadata."""
    root = tmp_path_factory.mktemp("many") / "h.zarr"
    consolidated = {}
    for g in range(GROUPS):
        group = {"zarr_format": 3, "node_type": "group", "attributes": {}}
        consolidated[f"g{g}"] = group
        (root / f"g{g}").mkdir(parents=True)
        (root / f"g{g}/zarr.json").write_text(json.dumps(group))
        for a in range(ARRAYS_PER_GROUP):
            doc = _array_document([8, 6], [4, 3])
            consolidated[f"g{g}/a{a}"] = doc
            (root / f"g{g}/a{a}").mkdir()
            (root / f"g{g}/a{a}/zarr.json").write_text(json.dumps(doc))
    (root / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {},
                "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": consolidated},
            }
        )
    )
    return _upload(s3_filesystem, root)


def _browse(path: Path) -> list[str]:
    """`find -ls`: every entry listed and stat'ed (info's size included); their paths."""
    listing = subprocess.run(["find", str(path), "-ls"], capture_output=True, text=True, check=True).stdout
    return [line.rsplit(" ", 1)[-1] for line in listing.splitlines()]


def test_mounting_reads_the_root_document_once_and_lists_the_root_once(mount, proxy, two_hundred_arrays):
    """Before the mount is ready: one listing (is it an Icechunk repository?) and one GET
    of the root's zarr.json, which holds the consolidated metadata."""
    proxy.reset()
    _mount(mount, two_hundred_arrays, proxy)
    requests = [(kind, path.partition("/")[2].partition("/")[2]) for kind, path, _ in proxy.requests]
    assert sorted(requests) == [("get", "h.zarr/zarr.json"), ("list", "")], requests


def test_browsing_with_consolidated_metadata_asks_the_store_nothing_after_mounting(mount, proxy, two_hundred_arrays):
    m = _mount(mount, two_hundred_arrays, proxy)
    proxy.reset()
    paths = _browse(m.path)
    assert sum(1 for p in paths if p.endswith("/data")) == GROUPS * ARRAYS_PER_GROUP
    counts = proxy.counts()
    assert counts["total"] <= 2, counts


def test_browsing_without_consolidated_metadata_lists_each_group_once_and_reads_each_node_once(
    mount, proxy, two_hundred_arrays
):
    m = _mount(mount, two_hundred_arrays, proxy, "--consolidated", "never")
    proxy.reset()
    paths = _browse(m.path)
    assert sum(1 for p in paths if p.endswith("/data")) == GROUPS * ARRAYS_PER_GROUP
    counts = proxy.counts()
    nodes = 1 + GROUPS + GROUPS * ARRAYS_PER_GROUP
    assert counts.get("list", 0) <= 1 + GROUPS, counts
    assert counts.get("get", 0) + counts.get("range", 0) + counts.get("head", 0) <= nodes, counts
    reads = [path for kind, path, _ in proxy.requests if kind in ("get", "range")]
    assert len(reads) == len(set(reads)), "a document was read twice"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, s3_filesystem) -> tuple[str, np.ndarray]:
    """A 2-D float32 array in 2 shards of 4 x 4 inner chunks (16 x 16 elements each)."""
    import zarr

    root = tmp_path_factory.mktemp("sharded") / "h.zarr"
    values = np.random.default_rng(0).random((64, 128), dtype="float32")
    array = zarr.create_array(
        str(root), name="s", shape=values.shape, chunks=(16, 16), shards=(64, 64), dtype="float32", compressors=None
    )
    array[...] = values
    return _upload(s3_filesystem, root), values


def test_an_inner_chunk_costs_two_ranged_gets_cold_and_none_warm(mount, proxy, sharded):
    url, values = sharded
    m = _mount(mount, url, proxy)
    (m / "s/chunks").is_dir()  # metadata read; the shard not yet
    proxy.reset()
    chunk = (m / "s/chunks/1/5").read_bytes()
    assert np.array_equal(np.frombuffer(chunk, "<f4").reshape(16, 16), values[16:32, 80:96])
    shard_reads = [r for r in proxy.requests if r[1].endswith("/s/c/0/1")]
    assert len(shard_reads) <= 2 and all(kind == "range" for kind, _, _ in shard_reads), proxy.requests
    proxy.reset()
    assert (m / "s/chunks/1/5").read_bytes() == chunk
    assert proxy.counts()["total"] == 0, proxy.requests
    # another inner chunk of the same shard: its index is known, so one ranged GET
    other = (m / "s/chunks/3/4").read_bytes()
    assert np.array_equal(np.frombuffer(other, "<f4").reshape(16, 16), values[48:64, 64:80])
    assert [kind for kind, _, _ in proxy.requests] == ["range"], proxy.requests


@pytest.fixture(scope="module")
def big_plain(tmp_path_factory, s3_filesystem) -> tuple[str, np.ndarray]:
    """16 MiB of float32 in 128 uncompressed chunks of 128 KiB."""
    import zarr

    root = tmp_path_factory.mktemp("plain") / "h.zarr"
    values = np.random.default_rng(1).random(4 << 20, dtype="float32")
    array = zarr.create_array(
        str(root), name="p", shape=values.shape, chunks=(32 << 10,), dtype="float32", compressors=None
    )
    array[...] = values
    return _upload(s3_filesystem, root), values


@contextlib.contextmanager
def _bucket_latency(proxy: LatencyProxy):
    """Counts reset, and 20 ms per request (a bucket's) while the block runs."""
    proxy.reset()
    proxy.latency = 0.02
    try:
        yield
    finally:
        proxy.latency = 0.005


def test_a_sequential_reader_keeps_eight_requests_in_flight(mount, proxy, big_plain):
    url, values = big_plain
    m = _mount(mount, url, proxy)
    (m / "p/data").stat()
    with _bucket_latency(proxy):
        out = subprocess.run(["dd", f"if={m / 'p/data'}", "bs=1M", "status=none"], capture_output=True, check=True)
    assert out.stdout == values.tobytes()
    counts = proxy.counts()
    assert counts["max_in_flight"] >= 8 and counts["mean_in_flight"] >= 8, counts


def test_copying_a_chunk_directory_keeps_requests_in_flight_and_fetches_each_chunk_once(
    mount, proxy, big_plain, tmp_path
):
    """`cp -r` opens the chunk files one after another: the chunks past the one it copies
    are fetched ahead (fs/decoded/walk.py), each once, many at a time."""
    url, values = big_plain
    m = _mount(mount, url, proxy)
    (m / "p/chunks").is_dir()
    with _bucket_latency(proxy):
        subprocess.run(["cp", "-r", str(m / "p/chunks"), str(tmp_path / "copy")], check=True)
    n, size = 128, 32 << 10
    for i in range(n):
        assert (tmp_path / "copy" / str(i)).read_bytes() == values[i * size : (i + 1) * size].tobytes(), i
    chunk_reads = [path for _, path, _ in proxy.requests if "/p/c/" in path]
    assert len(chunk_reads) == len(set(chunk_reads)) == n, proxy.requests
    assert proxy.counts()["max_in_flight"] >= 8, proxy.counts()


@pytest.fixture(scope="module")
def big_sharded(tmp_path_factory, s3_filesystem) -> tuple[str, np.ndarray, int]:
    """16 MiB of float32 in 4 uncompressed shards of 16 inner chunks (256 KiB each)."""
    import zarr

    root = tmp_path_factory.mktemp("big_sharded") / "h.zarr"
    values = np.random.default_rng(2).random((4096, 1024), dtype="float32")
    array = zarr.create_array(
        str(root),
        name="s",
        shape=values.shape,
        chunks=(64, 1024),
        shards=(1024, 1024),
        dtype="float32",
        compressors=None,
    )
    array[...] = values
    return _upload(s3_filesystem, root), values, 4


def test_the_first_lookup_after_mounting_reads_only_the_node_not_the_root_again(mount, proxy, sharded):
    """The root's zarr.json is read once, while mounting (no consolidated metadata there):
    the tree's first look at the root takes it, so opening `s/data` costs the array's
    document alone. (Before: a second GET of the root's, in the first lookup.)"""
    url, _ = sharded
    proxy.reset()
    m = _mount(mount, url, proxy)
    assert [path.rsplit("/h.zarr/", 1)[1] for kind, path, _ in proxy.requests if kind != "list"] == ["zarr.json"]
    proxy.reset()
    (m / "s/data").stat()
    assert [path.rsplit("/h.zarr/", 1)[1] for _, path, _ in proxy.requests] == ["s/zarr.json"], proxy.requests


def test_a_sequential_reader_of_a_sharded_array_gets_each_shard_whole_once(mount, proxy, big_sharded):
    """`dd` reads ahead in whole shards, from its first read: one GET per shard (as
    tensorstore reads them), no index read before it, no shard asked for in pieces."""
    url, values, shards = big_sharded
    m = _mount(mount, url, proxy)
    (m / "s/data").stat()
    proxy.reset()
    out = subprocess.run(["dd", f"if={m / 's/data'}", "bs=1M", "status=none"], capture_output=True, check=True)
    assert out.stdout == values.tobytes()
    reads = [(path.rsplit("/s/", 1)[1], rng) for kind, path, rng in proxy.requests if kind in ("get", "range")]
    assert sorted(key for key, _ in reads) == [f"c/{i}/0" for i in range(shards)], proxy.requests
    assert all(rng == "" or rng.startswith("bytes=0-") for _, rng in reads), proxy.requests


@pytest.fixture(scope="module")
def raw_hierarchy(tmp_path_factory, s3_filesystem) -> str:
    """200 arrays in 20 groups written by zarr-python, 4 chunks each: 1,021 keys."""
    import zarr

    root = tmp_path_factory.mktemp("raw") / "h.zarr"
    hierarchy = zarr.open_group(str(root), mode="w")
    for g in range(GROUPS):
        group = hierarchy.create_group(f"g{g}")
        for a in range(ARRAYS_PER_GROUP):
            group.create_array(f"a{a}", shape=(4, 4), chunks=(1, 4), dtype="uint8", fill_value=0)[...] = a + 1
    return _upload(s3_filesystem, root)


def _bucket_keys(s3_filesystem, url: str) -> dict[str, int]:
    """Every key under the mounted prefix with its size, as s3fs sees them."""
    base = url.removeprefix("s3://") + "/"
    return {path[len(base) :]: info["size"] for path, info in s3_filesystem.find(base, detail=True).items()}


def _find_raw(path: Path) -> tuple[dict[str, int], set[str]]:
    """`find` with each entry's type and size (so every entry is stat'ed): files with their
    sizes, directories."""
    out = subprocess.run(
        ["find", str(path), "-mindepth", "1", "-printf", r"%y %s %P\n"], capture_output=True, text=True, check=True
    ).stdout
    files, dirs = {}, set()
    for line in out.splitlines():
        kind, size, name = line.split(" ", 2)
        if kind == "d":
            dirs.add(name)
        else:
            files[name] = int(size)
    return files, dirs


def _prefixes(keys) -> set[str]:
    return {key.rsplit("/", i)[0] for key in keys for i in range(1, key.count("/") + 1)}


def _mount_raw(mount, url: str, proxy: LatencyProxy, ttl: str = "120", *options: str):
    return mount(
        url,
        "--raw",
        "--metadata-ttl",
        ttl,
        "--storage-option",
        f"endpoint_url={proxy.url}",
        *options,
        env={**os.environ, **CREDENTIALS},
    )


def test_raw_find_costs_one_list_per_thousand_keys_one_head_per_object_and_nothing_more_within_the_ttl(
    mount, proxy, raw_hierarchy, s3_filesystem
):
    m = _mount_raw(mount, raw_hierarchy, proxy)
    stored = _bucket_keys(s3_filesystem, raw_hierarchy)
    proxy.reset()
    files, dirs = _find_raw(m.path)
    assert files == stored
    assert dirs == _prefixes(stored)
    counts = proxy.counts()
    assert counts.get("list", 0) <= math.ceil(len(stored) / 1000), counts
    # listings carry no user metadata: each object's mode, owner and times cost a HEAD
    assert counts.get("head", 0) == len(stored), counts
    assert counts["total"] == counts["list"] + counts["head"], counts  # no GET
    proxy.reset()
    assert _find_raw(m.path) == (files, dirs)
    assert proxy.counts()["total"] == 0, proxy.requests


def test_with_use_server_modtime_find_costs_the_listings_alone_and_shows_the_stores_times(
    mount, proxy, raw_hierarchy, s3_filesystem
):
    """As rclone's --use-server-modtime: no HEAD per object; each file's time is the
    LastModified its listing gives, and a chmod or touch is kept by the mount alone."""
    m = _mount_raw(mount, raw_hierarchy, proxy, "120", "--use-server-modtime")
    stored = _bucket_keys(s3_filesystem, raw_hierarchy)
    proxy.reset()
    files, dirs = _find_raw(m.path)
    assert files == stored and dirs == _prefixes(stored)
    counts = proxy.counts()
    assert counts["total"] == counts.get("list", 0) <= math.ceil(len(stored) / 1000), counts
    key = "g2/a3/c/1/0"
    modified = s3_filesystem.info(raw_hierarchy.removeprefix("s3://") + "/" + key)["LastModified"]
    assert (os.stat(m / key).st_mode & 0o777, os.stat(m / key).st_mtime) == (0o644, modified.timestamp())
    proxy.reset()
    os.chmod(m / key, 0o600)
    os.utime(m / key, (1_000_000_000, 1_000_000_000))
    assert (os.stat(m / key).st_mode & 0o777, os.stat(m / key).st_mtime) == (0o600, 1_000_000_000)
    assert proxy.counts()["total"] == 0, proxy.requests  # neither a HEAD nor a copy
    assert s3_filesystem.info(raw_hierarchy.removeprefix("s3://") + "/" + key)["LastModified"] == modified


def test_a_raw_mount_lists_the_bucket_again_once_the_ttl_has_passed(mount, proxy, raw_hierarchy, s3_filesystem):
    m = _mount_raw(mount, raw_hierarchy, proxy, ttl="1")
    assert sorted(os.listdir(m / "g4/a2/c")) == ["0", "1", "2", "3"]
    another = raw_hierarchy.removeprefix("s3://") + "/g4/a2/c/9/0"
    s3_filesystem.pipe(another, b"written by another program")
    try:
        proxy.reset()
        # seen once the 1 s ttl has passed, through a listing of the bucket
        wait_for(lambda: "9" in os.listdir(m / "g4/a2/c"), timeout=30, interval=0.1)
        assert sorted(os.listdir(m / "g4/a2/c")) == ["0", "1", "2", "3", "9"]
        assert proxy.counts().get("list", 0) >= 1, proxy.requests
    finally:
        s3_filesystem.rm(another)


def test_a_file_written_through_a_raw_mount_is_listed_at_once(mount, proxy, raw_hierarchy, s3_filesystem):
    m = _mount_raw(mount, raw_hierarchy, proxy)
    _find_raw(m.path)
    (m / "g3/a1/c/new").mkdir()
    (m / "g3/a1/c/new/0").write_bytes(b"written")
    assert os.listdir(m / "g3/a1/c/new") == ["0"]
    files, dirs = _find_raw(m.path)
    assert files["g3/a1/c/new/0"] == 7 and "g3/a1/c/new" in dirs
    assert files == _bucket_keys(s3_filesystem, raw_hierarchy)
    (m / "g3/a1/c/new/0").unlink()
    assert "g3/a1/c/new/0" not in _find_raw(m.path)[0]
