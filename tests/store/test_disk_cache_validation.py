"""Revalidation of the disk cache's entries (`validate_after`) over a local directory that
another process rewrites, without a kernel mount: each entry records the store's token of
the value it was read from (a file's inode, size and times), and one older than the bound
is confirmed against the store before it is served. The files on disk are the oracle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_for
from zarrfs.store import DiskCache, LocalStore


def _rewrite(path: Path, value: bytes) -> None:
    """Another process writes the file in place (same inode, same size)."""
    code = f"import sys; f = open({str(path)!r}, 'r+b'); f.write(sys.stdin.buffer.read()); f.close()"
    subprocess.run([sys.executable, "-c", code], input=value, check=True)


@pytest.fixture
def source(tmp_path) -> Path:
    root = tmp_path / "data"
    (root / "a" / "c").mkdir(parents=True)
    (root / "a" / "c" / "0").write_bytes(b"old value 0" * 100)
    (root / "a" / "c" / "1").write_bytes(b"old value 1" * 100)
    return root


def _cache(source: Path, directory: Path, validate_after: float | None) -> DiskCache:
    return DiskCache(LocalStore(str(source), read_only=True), str(directory), 1 << 20, validate_after=validate_after)


def test_a_value_rewritten_in_place_is_served_anew_once_the_bound_has_passed(source, tmp_path):
    cache = _cache(source, tmp_path / "cache", validate_after=0.3)
    assert cache.get("a/c/0") == b"old value 0" * 100
    new = b"new value 0" * 100
    _rewrite(source / "a/c/0", new)
    wait_for(lambda: cache.get("a/c/0") == new, timeout=10)
    assert new == (source / "a/c/0").read_bytes()
    stats = cache.request_stats()
    assert stats["disk_cache_refetches"] == 1 and stats["disk_cache_revalidations"] >= 1, stats
    assert cache.get("a/c/0") == new  # kept again with its new token
    assert cache.request_stats()["disk_cache_refetches"] == 1


def test_with_validation_at_every_read_a_rewrite_is_seen_at_once_and_ranges_too(source, tmp_path):
    from zarrfs.store import ByteRange

    cache = _cache(source, tmp_path / "cache", validate_after=0)
    assert cache.get("a/c/1", ByteRange(0, 9)) == b"old value"
    assert cache.get("a/c/1", ByteRange(0, 9)) == b"old value"
    hits = cache.request_stats()["disk_cache_hits"]
    assert hits == 1
    _rewrite(source / "a/c/1", b"NEW VALUE")
    assert cache.get("a/c/1", ByteRange(0, 9)) == b"NEW VALUE"
    assert cache.get("a/c/0") == b"old value 0" * 100  # unchanged values stay served from disk
    assert cache.get("a/c/0") == b"old value 0" * 100
    stats = cache.request_stats()
    assert stats["disk_cache_refetches"] == 1 and stats["disk_cache_hits"] == hits + 1, stats


def test_a_file_replaced_by_a_rename_of_the_same_size_and_time_is_seen(source, tmp_path):
    cache = _cache(source, tmp_path / "cache", validate_after=0)
    target = source / "a/c/0"
    assert cache.get("a/c/0") == target.read_bytes()
    other = source / "a/c/other"
    other.write_bytes(b"OLD VALUE 0" * 100)
    st = target.stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(other, target)
    assert cache.get("a/c/0") == b"OLD VALUE 0" * 100


def test_a_later_cache_confirms_what_an_earlier_session_kept(source, tmp_path):
    assert _cache(source, tmp_path / "cache", validate_after=60).get("a/c/0") == b"old value 0" * 100
    _rewrite(source / "a/c/0", b"new value 0" * 100)
    later = _cache(source, tmp_path / "cache", validate_after=60)
    assert later.get("a/c/0") == b"new value 0" * 100
    assert later.request_stats()["disk_cache_refetches"] == 1


def test_without_validation_a_kept_value_is_served_until_it_is_evicted(source, tmp_path):
    cache = _cache(source, tmp_path / "cache", validate_after=None)
    assert cache.get("a/c/0") == b"old value 0" * 100
    _rewrite(source / "a/c/0", b"new value 0" * 100)
    assert cache.get("a/c/0") == b"old value 0" * 100
    assert "disk_cache_revalidations" not in cache.request_stats()
