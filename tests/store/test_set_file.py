"""Store.set_file, without a kernel: a local file is stored whole, byte for byte, on every
kind of store (S3 in parts past one part, with the memory they hold bounded); a local
store copies it in the kernel and keeps its holes; a long copy is not a hung one."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from zarrfs.store import LocalStore, Store, local_writes
from zarrfs.store.uploads import read_file

MIB = 1 << 20


def _spool(tmp_path: Path, size: int, data_at: list[int]) -> int:
    """An open file of `size` bytes, random MiB at the offsets `data_at`, holes elsewhere."""
    fd = os.open(tmp_path / "spool", os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    os.ftruncate(fd, size)
    for offset in data_at:
        os.pwrite(fd, os.urandom(MIB), offset)
    return fd


def _digest(fd: int) -> str:
    return hashlib.sha256(read_file(fd)).hexdigest()


def test_a_file_is_stored_whole_in_parts_where_the_store_uploads(store: Store, tmp_path):
    store.set("big", b"old")
    fd = _spool(tmp_path, 21 * MIB + 5, [0, 9 * MIB, 20 * MIB])  # three parts of 8 MiB on S3
    try:
        assert store.set_file("big", fd) == 21 * MIB + 5
        assert hashlib.sha256(store.get("big")).hexdigest() == _digest(fd)
        assert store.request_stats()["upload_parts_bytes"] == 0
    finally:
        os.close(fd)


def test_a_small_file_and_an_empty_one_are_stored(store: Store, tmp_path):
    fd = _spool(tmp_path, 0, [])
    try:
        assert store.set_file("empty", fd) == 0
        assert store.get("empty") == b""
        os.pwrite(fd, b"tiny", 0)
        assert store.set_file("a/b/tiny", fd) == 4
        assert store.get("a/b/tiny") == b"tiny"
    finally:
        os.close(fd)


def test_the_read_through_memory_reads_on_where_one_read_returns_less(tmp_path, monkeypatch):
    """Linux returns at most 2 GiB less 4 KiB per read (a raw file larger than that was
    stored cut short): modelled with reads of at most 1000 bytes."""
    value = os.urandom(12345)
    (tmp_path / "f").write_bytes(value)
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, size, offset: real(fd, min(size, 1000), offset))
    fd = os.open(tmp_path / "f", os.O_RDONLY)
    try:
        assert read_file(fd) == value
    finally:
        os.close(fd)


def test_a_local_store_keeps_holes_and_fsyncs(tmp_path, monkeypatch):
    store = LocalStore(str(tmp_path / "root"))
    size = 1 << 30
    fd = _spool(tmp_path, size, [4 * MIB])
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda f: (synced.append(os.readlink(f"/proc/self/fd/{f}")), real_fsync(f)))
    try:
        assert store.set_file("sparse", fd) == size
    finally:
        os.close(fd)
    stored = tmp_path / "root" / "sparse"
    assert stored.stat().st_size == size
    assert stored.stat().st_blocks * 512 < 16 * MIB, "the holes were written out"
    # the file under its temporary name before the rename, then its directory
    assert [Path(p).parent for p in synced] == [tmp_path / "root", tmp_path] and synced[1] == str(tmp_path / "root")


def test_a_long_local_copy_outlives_the_deadline_while_it_progresses(tmp_path, monkeypatch):
    store = LocalStore(str(tmp_path / "root"), timeout=0.5)
    real = local_writes._copy_piece
    monkeypatch.setattr(local_writes, "_COPY_PIECE", MIB)

    def slow_piece(*args):
        time.sleep(0.1)  # 12 pieces: 1.2 s in all, each well within the deadline
        return real(*args)

    monkeypatch.setattr(local_writes, "_copy_piece", slow_piece)
    fd = _spool(tmp_path, 12 * MIB, list(range(0, 12 * MIB, MIB)))
    try:
        assert store.set_file("slow", fd) == 12 * MIB
        assert (tmp_path / "root" / "slow").read_bytes() == read_file(fd)
    finally:
        os.close(fd)
