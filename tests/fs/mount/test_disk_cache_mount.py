"""--cache-dir on a real mount of a moto S3 bucket, behind a proxy that counts requests:
a second mount on the same cache directory reads no chunk from the bucket, sharded
arrays included; a chunk written through the mount is what the next mount reads; the
directory stays within --cache-dir-size; a chunk another mount rewrites in the bucket is
read anew once --metadata-ttl has passed (--cache-validate metadata), not with
--cache-validate never. zarr-python, reading the bucket, is the oracle."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.storage import FsspecStore

from bench.s3proxy import LatencyProxy
from tests.conftest import wait_for, zarrfs
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem  # noqa: F401


@pytest.fixture(scope="module")
def proxy(s3_endpoint):
    proxy = LatencyProxy(s3_endpoint, latency=0.0).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def bucket(s3_bucket, s3_endpoint):
    """s3://BUCKET/h.zarr: `plain` (16 zstd chunks), `sharded` (4 shards of 16 inner chunks)
    and `big` (1 MiB in 64 uncompressed chunks); and zarr-python's view of it."""
    url = f"s3://{s3_bucket}/h.zarr"
    store = FsspecStore.from_url(url, storage_options={"endpoint_url": s3_endpoint, "asynchronous": True})
    g = zarr.open_group(store, mode="w")
    rng = np.random.default_rng(7)
    g.create_array("plain", shape=(256, 256), chunks=(64, 64), dtype="float32")[...] = rng.random((256, 256))
    g.create_array("sharded", shape=(128, 128), chunks=(16, 16), shards=(64, 64), dtype="float32")[...] = rng.random(
        (128, 128)
    )
    g.create_array("big", shape=(1 << 18,), chunks=(1 << 12,), dtype="float32", compressors=None)[...] = rng.random(
        1 << 18
    )
    return url, store


def _mount(mount, url: str, proxy: LatencyProxy, cache: Path, *options: str):
    return mount(url, "--storage-option", f"endpoint_url={proxy.url}", "--cache-dir", str(cache), *options)


def _read(path: Path) -> bytes:
    return subprocess.run(["dd", f"if={path}", "bs=1M", "status=none"], capture_output=True, check=True).stdout


def _read_afresh(path: Path) -> bytes:
    """The file's bytes as the mount gives them now, not the kernel's cached pages of it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return _read(path)


def _chunk_gets(proxy: LatencyProxy) -> list:
    return [r for r in proxy.requests if r[0] in ("get", "range") and "/c/" in r[1]]


def _oracle(store, name: str) -> np.ndarray:
    return zarr.open_group(store, mode="r")[name][...].astype("<f4")


FILES = ["plain/data", "plain/chunks/1/2", "sharded/data", "sharded/chunks/3/4", "sharded/chunks/7/0"]


def test_a_second_mount_reads_no_chunk_from_the_bucket(mount, proxy, bucket, tmp_path):
    url, store = bucket
    cache = tmp_path / "cache"
    first = _mount(mount, url, proxy, cache, "--read-only")
    proxy.reset()
    cold = {name: _read(first / name) for name in FILES}
    assert _chunk_gets(proxy), "the first mount read nothing from the bucket"
    first.unmount()

    second = _mount(mount, url, proxy, cache, "--read-only")
    proxy.reset()
    warm = {name: _read(second / name) for name in FILES}
    assert _chunk_gets(proxy) == []
    plain, sharded = _oracle(store, "plain"), _oracle(store, "sharded")
    expected = {
        "plain/data": plain.tobytes(),
        "plain/chunks/1/2": plain[64:128, 128:192].tobytes(),
        "sharded/data": sharded.tobytes(),
        "sharded/chunks/3/4": sharded[48:64, 64:80].tobytes(),
        "sharded/chunks/7/0": sharded[112:128, 0:16].tobytes(),
    }
    assert warm == cold == expected
    stats = json.loads((second / ".zarrfs/stats").read_text())
    assert stats["disk_cache_hits"] > 0 and stats["disk_cache_bytes"] > 0, stats
    assert stats.get("disk_cache_misses", 0) == 0, stats


def test_a_chunk_written_through_the_mount_is_what_the_next_mount_reads(mount, proxy, bucket, tmp_path):
    url, store = bucket
    cache = tmp_path / "cache"
    first = _mount(mount, url, proxy, cache)
    for name in ("plain/chunks/0/0", "sharded/chunks/0/0", "sharded/chunks/0/1"):
        _read(first / name)  # now kept in the cache
    new_plain = np.full((64, 64), 2.5, dtype="<f4")
    new_inner = np.arange(256, dtype="<f4").reshape(16, 16)
    (first / "plain/chunks/0/0").write_bytes(new_plain.tobytes())
    (first / "sharded/chunks/0/0").write_bytes(new_inner.tobytes())
    first.unmount()
    plain, sharded = _oracle(store, "plain"), _oracle(store, "sharded")
    np.testing.assert_array_equal(plain[:64, :64], new_plain)  # the bucket holds the new values
    np.testing.assert_array_equal(sharded[:16, :16], new_inner)

    second = _mount(mount, url, proxy, cache, "--read-only")
    assert _read(second / "plain/chunks/0/0") == new_plain.tobytes()
    assert _read(second / "sharded/chunks/0/0") == new_inner.tobytes()
    assert _read(second / "sharded/chunks/0/1") == sharded[:16, 16:32].tobytes()
    assert _read(second / "plain/data") == plain.tobytes()


def test_the_cache_directory_stays_within_its_size(mount, proxy, bucket, tmp_path):
    url, store = bucket
    cache = tmp_path / "cache"
    bound = 256 << 10
    m = mount(url, "--storage-option", f"endpoint_url={proxy.url}", "-o", f"ro,cache_dir={cache},cache_dir_size=256KiB")
    assert _read(m / "big/data") == _oracle(store, "big").tobytes()  # 1 MiB of 16 KiB chunks
    on_disk = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    stats = json.loads((m / ".zarrfs/stats").read_text())
    assert 0 < on_disk <= bound and stats["disk_cache_bytes"] == on_disk, (on_disk, stats)
    assert stats["disk_cache_evictions"] > 0, stats
    assert oct(cache.stat().st_mode & 0o777) == "0o700"


def test_a_local_source_with_a_cache_dir_is_refused(tmp_path):
    zarr.open_group(str(tmp_path / "local.zarr"), mode="w")
    (tmp_path / "m").mkdir()
    result = zarrfs(
        "mount",
        tmp_path / "local.zarr",
        tmp_path / "m",
        "--cache-dir",
        tmp_path / "cache",
        check=False,
        env={**os.environ},
    )
    assert result.returncode == 1
    assert "--cache-dir keeps chunks of object stores" in result.stderr, result.stderr
    assert not (tmp_path / "cache").exists()


def test_a_second_raw_mount_reads_keys_from_the_cache_dir(mount, proxy, bucket, tmp_path):
    url, store = bucket
    cache = tmp_path / "cache"
    first = _mount(mount, url, proxy, cache, "--raw", "--read-only")
    proxy.reset()
    cold = _read(first / "plain/c/1/2")
    assert _chunk_gets(proxy)
    first.unmount()
    second = _mount(mount, url, proxy, cache, "--raw", "--read-only")
    proxy.reset()
    assert _read(second / "plain/c/1/2") == cold
    assert _chunk_gets(proxy) == []
    np.testing.assert_array_equal(  # what zarr-python reads from the bucket, through the mount
        zarr.open_group(str(second.path), mode="r")["plain"][64:128, 128:192], _oracle(store, "plain")[64:128, 128:192]
    )


def test_a_chunk_another_node_rewrites_is_read_anew_after_the_metadata_ttl(mount, proxy, bucket, s3_endpoint, tmp_path):
    url, store = bucket
    name = "plain/chunks/0/0"
    # two readers, each with its own cache directory and no decoded chunks kept in memory
    exact = _mount(mount, url, proxy, tmp_path / "exact", "--read-only", "--metadata-ttl", "1", "--cache-size", "0")
    never = _mount(
        mount, url, proxy, tmp_path / "never", "--read-only", "--cache-size", "0", "--cache-validate", "never"
    )
    old = _oracle(store, "plain")[:64, :64].tobytes()
    assert _read(exact / name) == _read(never / name) == old  # both now kept on disk
    proxy.reset()
    assert _read_afresh(exact / name) == old  # within the ttl: from the disk cache, no request
    assert _chunk_gets(proxy) == []

    writer = mount(url, "--storage-option", f"endpoint_url={s3_endpoint}")  # another node
    new = np.full((64, 64), 7.25, dtype="<f4")
    (writer / name).write_bytes(new.tobytes())
    writer.unmount()
    np.testing.assert_array_equal(_oracle(store, "plain")[:64, :64], new)  # the bucket holds it

    wait_for(lambda: _read_afresh(exact / name) == new.tobytes(), timeout=20)
    stats = json.loads((exact / ".zarrfs/stats").read_text())
    assert stats["disk_cache_revalidations"] >= 1 and stats["disk_cache_refetches"] >= 1, stats
    assert _read_afresh(never / name) == old  # kept, never asked again
    assert json.loads((never / ".zarrfs/stats").read_text()).get("disk_cache_revalidations", 0) == 0
    proxy.reset()
    assert _read_afresh(exact / name) == new.tobytes()  # the new value is what is kept now
    assert _chunk_gets(proxy) == []


def test_a_later_mount_reads_a_chunk_rewritten_since_the_cache_kept_it(mount, proxy, bucket, s3_endpoint, tmp_path):
    url, store = bucket
    cache, name = tmp_path / "cache", "plain/chunks/1/1"
    first = _mount(mount, url, proxy, cache, "--read-only")
    assert _read(first / name) == _oracle(store, "plain")[64:128, 64:128].tobytes()
    first.unmount()
    new = np.full((64, 64), -3.0, dtype="<f4")
    g = zarr.open_group(store, mode="r+")  # another program rewrites it
    g["plain"][64:128, 64:128] = new
    second = _mount(mount, url, proxy, cache, "--read-only")
    assert _read(second / name) == new.tobytes()
    stats = json.loads((second / ".zarrfs/stats").read_text())
    assert stats["disk_cache_refetches"] == 1, stats
