"""The disk cache of a remote store, without a kernel: what a second cache on the same
directory serves from disk, ranges, the size bound, damaged entries, writes through it,
threads and a second process's cache on the same directory. The inner store is a real
memory:// store that records the reads reaching it; its answers are the oracle."""

from __future__ import annotations

import errno
import logging
import os
import random
import stat
import threading
import uuid
from pathlib import Path

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from zarrfs.store import ByteRange, DiskCache, FsspecStore, ValueTooLargeError, disk_cache
from zarrfs.store.disk_cache_layout import HEADER

KIB = 1 << 10


class RecordingStore(FsspecStore):
    """memory:// under an s3:// name, recording each (key, range) read that reaches it."""

    def __init__(self, root: str) -> None:
        super().__init__(MemoryFileSystem(), root, url=f"s3://bucket/{root}")
        self.gets: list[tuple[str, ByteRange | None]] = []
        self.after_get = lambda: None  # called once a read has its values, before it returns them
        self._gets_lock = threading.Lock()

    def get_partial_values(self, requests, *, max_size=None, buffers=False):
        with self._gets_lock:
            self.gets.extend(requests)
        values = super().get_partial_values(requests, max_size=max_size, buffers=buffers)
        self.after_get()
        return values

    def reads_of(self, key: str) -> int:
        return sum(1 for k, _ in self.gets if k == key)


@pytest.fixture
def inner():
    store = RecordingStore(f"zarrfs-cache-{uuid.uuid4().hex}")
    yield store
    store.erase_prefix("")  # memory:// is process-wide


@pytest.fixture
def directory(tmp_path) -> Path:
    return tmp_path / "cache"


def _metadata(key: str) -> bool:
    return key.rsplit("/", 1)[-1] in ("zarr.json", ".zarray")


def cache(inner, directory, max_bytes: int = 1 << 20) -> DiskCache:
    return DiskCache(inner, str(directory), max_bytes, uncached=_metadata)


def entry_files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*@*") if p.is_file() and ".tmp" not in p.parts]


def disk_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in entry_files(directory))


def test_a_later_cache_on_the_same_directory_reads_from_disk(inner, directory):
    value = os.urandom(10 * KIB)
    inner.set("a/c/0/0", value)
    first = cache(inner, directory)
    assert first.get("a/c/0/0") == value
    assert first.get("a/c/0/0") == value
    assert inner.reads_of("a/c/0/0") == 1
    second = cache(inner, directory)  # the next session
    assert second.get("a/c/0/0") == value
    assert inner.reads_of("a/c/0/0") == 1
    assert second.request_stats()["disk_cache_hits"] == 1


def test_the_directory_is_private_to_its_owner(inner, directory):
    cache(inner, directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_metadata_documents_are_always_read_from_the_store(inner, directory):
    inner.set("a/zarr.json", b'{"zarr_format": 3}')
    c = cache(inner, directory)
    c.get("a/zarr.json")
    inner.set("a/zarr.json", b'{"zarr_format": 3, "node_type": "group"}')  # changed by another writer
    assert c.get("a/zarr.json") == b'{"zarr_format": 3, "node_type": "group"}'
    assert inner.reads_of("a/zarr.json") == 2
    assert entry_files(directory) == []


def test_entries_of_another_source_are_never_served(inner, directory):
    inner.set("k", b"mine")
    cache(inner, directory).get("k")
    other = RecordingStore(f"zarrfs-cache-{uuid.uuid4().hex}")
    try:
        other.set("k", b"theirs")
        assert cache(other, directory).get("k") == b"theirs"
    finally:
        other.erase_prefix("")


RANGES = [
    None,
    ByteRange.suffix(16),
    ByteRange.suffix(5000),
    ByteRange.span(0, 100),
    ByteRange.span(100, 200),
    ByteRange.span(50, 150),
    ByteRange.span(4000, 4200),
    ByteRange.span(4200, 9000),
    ByteRange.from_offset(4090),
    ByteRange.span(5000, 6000),
    ByteRange.from_offset(3000),
]


@pytest.mark.parametrize("order", [1, 2, 3])
def test_ranged_reads_answer_what_the_store_answers(inner, directory, order):
    value = os.urandom(4096)
    inner.set("s/c/0", value)
    c = cache(inner, directory)
    requests = RANGES * 2
    random.Random(order).shuffle(requests)
    for byte_range in requests:
        assert c.get("s/c/0", byte_range) == inner.get("s/c/0", byte_range), byte_range


def test_a_span_made_of_adjacent_cached_spans_is_not_fetched(inner, directory):
    inner.set("shard", bytes(range(256)) * 4)
    c = cache(inner, directory)
    c.get("shard", ByteRange.span(0, 100))
    c.get("shard", ByteRange.span(100, 300))
    inner.gets.clear()
    assert c.get("shard", ByteRange.span(50, 250)) == (bytes(range(256)) * 4)[50:250]
    assert inner.gets == []
    c.get("shard", ByteRange.span(250, 400))  # reaches past what is cached
    assert inner.gets == [("shard", ByteRange.span(250, 400))]


def test_a_shard_index_read_as_a_suffix_is_served_from_the_whole_shard(inner, directory):
    shard = os.urandom(8 * KIB)
    inner.set("s/c/0/0", shard)
    c = cache(inner, directory)
    c.get("s/c/0/0")
    inner.gets.clear()
    assert c.get("s/c/0/0", ByteRange.suffix(272)) == shard[-272:]
    assert c.get("s/c/0/0", ByteRange.span(1000, 2000)) == shard[1000:2000]
    assert inner.gets == []


def test_a_cached_value_larger_than_the_reader_can_take_is_refused(inner, directory):
    inner.set("k", bytes(1000))
    c = cache(inner, directory)
    c.get("k")
    with pytest.raises(ValueTooLargeError):
        c.get("k", max_size=999)
    assert c.get("k", max_size=1000) == bytes(1000)


def test_the_size_bound_holds_and_the_least_recently_used_go_first(inner, directory):
    bound = 64 * KIB
    c = cache(inner, directory, bound)
    values = {f"c/{i}": os.urandom(4 * KIB) for i in range(40)}
    for key, value in values.items():
        inner.set(key, value)
    for key, value in values.items():
        assert c.get(key) == value
        c.get("c/0")  # kept in use
        assert disk_bytes(directory) <= bound
    assert c.request_stats()["disk_cache_bytes"] == disk_bytes(directory)
    assert c.request_stats()["disk_cache_evictions"] > 0
    inner.gets.clear()
    assert c.get("c/0") == values["c/0"] and c.get("c/39") == values["c/39"]
    assert c.get("c/1") == values["c/1"]
    assert [k for k, _ in inner.gets] == ["c/1"]


def test_a_later_cache_with_a_smaller_bound_keeps_the_most_recently_used(inner, directory):
    values = {f"c/{i}": os.urandom(4 * KIB) for i in range(12)}
    first = cache(inner, directory)
    for key, value in values.items():
        inner.set(key, value)
        first.get(key)
    first.get("c/0")  # now the most recently used
    room = 8 * (4 * KIB + HEADER.size)  # for 8 of them
    second = cache(inner, directory, room)
    assert disk_bytes(directory) == room
    inner.gets.clear()
    for key in ("c/0", "c/11", "c/5"):
        assert second.get(key) == values[key]
    assert inner.gets == []
    assert second.get("c/1") == values["c/1"]
    assert [k for k, _ in inner.gets] == ["c/1"]


def test_the_number_of_entries_is_bounded_whatever_their_sizes(inner, directory):
    """Each entry costs memory in the index: tiny values fill the count long before the bytes."""
    values = {f"c/{i}": os.urandom(16) for i in range(30)}
    for key, value in values.items():
        inner.set(key, value)
    c = DiskCache(inner, str(directory), 1 << 30, uncached=_metadata, max_entries=10)
    for key, value in values.items():
        assert c.get(key) == value
        c.get("c/0")  # kept in use
        assert len(entry_files(directory)) <= 10
    assert c.request_stats()["disk_cache_entries"] == 10
    inner.gets.clear()
    for key in ("c/0", "c/29", "c/21"):
        assert c.get(key) == values[key]
    assert inner.gets == []
    later = DiskCache(inner, str(directory), 1 << 30, uncached=_metadata, max_entries=4)
    assert len(entry_files(directory)) == 4
    assert later.get("c/21") == values["c/21"] and inner.gets == []


def test_a_value_larger_than_an_eighth_of_the_bound_is_not_kept(inner, directory):
    inner.set("big", bytes(10 * KIB))
    c = cache(inner, directory, 64 * KIB)
    c.get("big")
    c.get("big")
    assert inner.reads_of("big") == 2


@pytest.mark.parametrize("when", ["this session", "a later session"])
@pytest.mark.parametrize("damage", ["flip a byte", "truncate", "header", "empty", "another key's entry"])
def test_a_damaged_entry_is_a_miss_and_is_replaced(inner, directory, damage, when):
    value, other = os.urandom(2 * KIB), os.urandom(2 * KIB)
    inner.set("c/1", value)
    inner.set("c/2", other)
    c = cache(inner, directory)
    c.get("c/1")
    c.get("c/2")
    path = next(p for p in entry_files(directory) if p.name == "1@all")
    data = bytearray(path.read_bytes())
    if damage == "flip a byte":
        data[-100] ^= 0x40
    elif damage == "truncate":
        data = data[:-1]
    elif damage == "header":
        data[:8] = b"garbage!"
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray((path.parent / "2@all").read_bytes())
    path.write_bytes(bytes(data))
    reader = c if when == "this session" else cache(inner, directory)
    inner.gets.clear()
    assert reader.get("c/1") == value
    assert reader.get("c/1") == value
    assert inner.gets == [("c/1", None)]
    assert reader.request_stats()["disk_cache_damaged"] == 1
    assert path.read_bytes()[-len(value) :] == value  # replaced by a good entry


def test_writes_through_the_cache_are_never_followed_by_the_old_value(inner, directory):
    c = cache(inner, directory)
    for key in ("g/a/c/0", "g/a/c/1", "g/b/c/0", "k"):
        inner.set(key, b"old " + key.encode())
        c.get(key)
        c.get(key, ByteRange.span(0, 3))
    c.set("k", b"new")
    assert c.get("k") == b"new" and c.get("k", ByteRange.span(0, 3)) == b"new"
    c.set_partial_values([("k", 1, b"EW")])
    assert c.get("k") == b"nEW"
    c.erase("g/a/c/1")
    assert c.get("g/a/c/1") is None and c.get("g/a/c/1", ByteRange.span(0, 3)) is None
    c.move("g/a", "g/moved")
    assert c.get("g/a/c/0") is None and c.get("g/moved/c/0") == b"old g/a/c/0"
    c.erase_prefix("g/")
    assert c.get("g/b/c/0") is None
    c.set("g/b/c/0", b"again")
    assert c.get("g/b/c/0", ByteRange.span(0, 3)) == b"aga"


def test_a_whole_value_kept_in_place_of_its_spans_is_forgotten_by_a_write(inner, directory):
    inner.set("shard", b"old value")
    c = cache(inner, directory)
    c.get("shard", ByteRange.suffix(3))  # a shard's index
    c.get("shard")  # read whole before a write (read-modify-write): it replaces the entry above
    c.set("shard", b"new value")
    assert cache(inner, directory).get("shard") == b"new value"  # the next session


@pytest.mark.parametrize("writer", ["this mount", "another mount"])
def test_a_value_fetched_before_a_write_through_is_not_kept(inner, directory, writer):
    """The reader fetches k, a write through replaces k, then the reader's old value must
    not be kept (this mount and the next session would read it for good). Another mount
    of the same source on the directory counts as much as this one."""
    fetched, written = threading.Event(), threading.Event()

    def hold_the_reader() -> None:
        if threading.current_thread().name == "reader":
            fetched.set()
            written.wait(10)

    inner.set("k", b"old")
    inner.after_get = hold_the_reader
    reading = cache(inner, directory)
    writing = reading if writer == "this mount" else cache(inner, directory)  # its own file of the shared count
    reader = threading.Thread(target=reading.get, args=("k",), name="reader")
    reader.start()
    assert fetched.wait(10)  # the reader holds the old value, not yet kept
    writing.set("k", b"new")
    written.set()
    reader.join()
    assert reading.get("k") == writing.get("k") == b"new"
    assert cache(inner, directory).get("k") == b"new"


def test_writes_through_forget_many_keys_of_one_directory_listing_it_once(inner, directory, monkeypatch):
    from zarrfs.store import disk_cache_layout

    c = cache(inner, directory)
    c.set_values({f"a/c/0/{i}": b"v" for i in range(50)})
    assert all(c.get(f"a/c/0/{i}") == b"v" for i in range(50))  # kept
    listed = []
    listdir = disk_cache_layout.os.listdir
    monkeypatch.setattr(disk_cache_layout.os, "listdir", lambda path: (listed.append(path), listdir(path))[1])
    c.set_values({f"a/c/0/{i}": b"w" for i in range(50)})
    assert len(listed) == 2  # the directory, before the write and after it; not once per key
    assert all(c.get(f"a/c/0/{i}") == b"w" for i in range(50))


def test_failing_to_write_the_cache_serves_the_store_and_logs_once(inner, directory):
    c = cache(inner, directory)
    (directory / ".tmp").rmdir()
    (directory / ".tmp").write_text("in the way")  # every entry write now fails
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage()) if record.levelno >= logging.WARNING else None
    logger = logging.getLogger("zarrfs.store.disk_cache")
    logger.addHandler(handler)
    try:
        for i in range(3):
            inner.set(f"c/{i}", b"value %d" % i)
            assert c.get(f"c/{i}") == b"value %d" % i
    finally:
        logger.removeHandler(handler)
    assert len(lines) == 1 and "cannot write" in lines[0], lines
    assert c.request_stats()["disk_cache_write_errors"] == 3


def test_threads_reading_and_writing_see_the_store(inner, directory):
    values = {f"r/{i}": os.urandom(random.Random(i).randrange(1, 6 * KIB)) for i in range(30)}
    for key, value in values.items():
        inner.set(key, value)
    c = cache(inner, directory, 48 * KIB)  # small: entries are evicted all along
    failures: list[str] = []

    def read(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(300):
            key = rng.choice(list(values))
            start = rng.randrange(0, 6 * KIB)
            byte_range = rng.choice(
                [
                    None,
                    ByteRange.span(start, start + rng.randrange(1, 2 * KIB)),
                    ByteRange.suffix(rng.randrange(1, 3 * KIB)),
                ]
            )
            expected = inner.get(key, byte_range)
            if c.get(key, byte_range) != expected:
                failures.append(f"{key} {byte_range}")

    def write(seed: int) -> None:
        rng = random.Random(seed)
        for n in range(200):
            key = f"w{seed}/{rng.randrange(5)}"
            c.get(key)
            c.set(key, b"%d" % n)
            if c.get(key) != b"%d" % n or c.get(key, ByteRange.suffix(2)) != (b"%d" % n)[-2:]:
                failures.append(f"{key} after writing {n}")

    threads = [threading.Thread(target=read, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert disk_bytes(directory) <= 48 * KIB


def test_two_caches_on_one_directory_tolerate_each_other(inner, directory):
    values = {f"c/{i}": os.urandom(3 * KIB) for i in range(30)}
    for key, value in values.items():
        inner.set(key, value)
    one, two = cache(inner, directory, 32 * KIB), cache(inner, directory, 32 * KIB)
    for key, value in values.items():
        assert one.get(key) == value
        assert two.get(key) == value
    for key, value in values.items():  # each evicted files the other still counts
        assert one.get(key) == value and two.get(key) == value
    assert cache(inner, directory, 32 * KIB).request_stats()["disk_cache_bytes"] <= 32 * KIB


def test_caches_sharing_a_directory_keep_it_near_its_bound(inner, directory):
    """Each looks at the whole directory again once it kept an eighth of the bound, and
    evicts down to the bound what all of them keep: at most the bound and an eighth of
    it per cache, where each counting only its own entries would reach twice the bound."""
    bound, size = 64 * KIB, 2 * KIB
    one, two = cache(inner, directory, bound), cache(inner, directory, bound)
    for i in range(100):
        for c, name in ((one, "one"), (two, "two")):
            key = f"{name}/c/{i}"
            inner.set(key, os.urandom(size))
            c.get(key)
        assert disk_bytes(directory) <= bound + 2 * (bound // 8 + size)
    assert one.request_stats()["disk_cache_rescans"] > 0
    recent = [one.get(f"one/c/{i}") for i in (98, 99)] + [two.get(f"two/c/{i}") for i in (98, 99)]
    inner.gets.clear()
    assert recent == [one.get(f"one/c/{i}") for i in (98, 99)] + [two.get(f"two/c/{i}") for i in (98, 99)]
    assert inner.gets == []  # the most recently used of both are kept


def test_a_failed_look_at_the_shared_directory_is_logged_and_reading_goes_on(inner, directory, caplog, monkeypatch):
    bound = 64 * KIB
    c = cache(inner, directory, bound)

    def unreadable(path, remove_temps):
        raise PermissionError(errno.EACCES, "cannot list", str(path))

    monkeypatch.setattr(disk_cache, "on_disk", unreadable)
    values = {f"c/{i}": os.urandom(2 * KIB) for i in range(20)}  # past an eighth of the bound
    for key, value in values.items():
        inner.set(key, value)
    with caplog.at_level(logging.DEBUG, logger="zarrfs.store.disk_cache"):
        for key, value in values.items():
            assert c.get(key) == value
    assert "cannot look at" in caplog.text
    assert c.request_stats().get("disk_cache_rescans", 0) == 0
    monkeypatch.undo()  # the directory readable again: the next eighth looks at it
    for i in range(20, 40):
        inner.set(f"c/{i}", os.urandom(2 * KIB))
        c.get(f"c/{i}")
    assert c.request_stats()["disk_cache_rescans"] >= 1
    assert disk_bytes(directory) <= bound


def test_files_the_cache_did_not_write_are_left_alone(inner, directory):
    directory.mkdir()
    (directory / "notes.txt").write_text("mine")
    c = cache(inner, directory, 16 * KIB)
    for i in range(20):
        inner.set(f"c/{i}", bytes(KIB))
        c.get(f"c/{i}")
    source = next(p for p in directory.iterdir() if len(p.name) == 32)
    (source / "c" / "readme").write_text("also mine")
    cache(inner, directory, 4 * KIB)
    assert (directory / "notes.txt").read_text() == "mine"
    assert (source / "c" / "readme").read_text() == "also mine"


def test_a_write_forgets_what_another_cache_on_the_directory_kept(inner, directory):
    for key in ("g/a/c/0", "g/b/c/0", "k"):
        inner.set(key, b"old")
    writer = cache(inner, directory)  # started before the other kept anything
    other = cache(inner, directory)
    for key in ("g/a/c/0", "g/b/c/0", "k"):
        other.get(key)
    writer.set("k", b"new")
    writer.erase_prefix("g/a/")
    writer.move("g/b", "g/c")
    later = cache(inner, directory)
    assert later.get("k") == b"new" and later.get("g/a/c/0") is None
    assert later.get("g/b/c/0") is None and later.get("g/c/c/0") == b"old"
