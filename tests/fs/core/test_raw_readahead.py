"""Reads of passthrough files without a kernel (views/raw.py): random reads cost one get
each, of little more than they ask for; sequential runs are served from few, large,
bounded readahead gets."""

from __future__ import annotations

import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from zarrfs.fs.passthrough.files import RawFile
from zarrfs.fs.passthrough.readahead import READAHEAD_FIRST, READAHEAD_LARGEST, RangeReader, ReadaheadBudget
from zarrfs.store import ByteRange, open_store

SIZE = 32 << 20
KERNEL_READ = 128 << 10  # the largest read the kernel sends a FUSE filesystem here


class CountingStore:
    """A store that records the ranges it was asked for."""

    def __init__(self, store) -> None:
        self.store = store
        self.ranges: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        with self._lock:
            self.ranges.append((byte_range.start, byte_range.end))
        return self.store.get(key, byte_range)


@pytest.fixture(scope="module")
def value() -> bytes:
    return np.random.default_rng(7).integers(0, 256, SIZE, dtype=np.uint8).tobytes()


@pytest.fixture
def stored(value):
    store = open_store(f"memory://raw-{uuid.uuid4().hex}")
    store.set("k", value)
    counting = CountingStore(store)
    executor = ThreadPoolExecutor(4)
    yield counting, executor
    executor.shutdown(wait=True)


def reader_for(counting: CountingStore, executor, budget: ReadaheadBudget | None = None) -> RangeReader:
    file = RawFile(counting, "k", SIZE, "/tmp")
    return RangeReader(file, executor, budget or ReadaheadBudget(256 << 20))


def test_a_random_read_split_by_the_kernel_costs_one_get_of_what_it_asks_for(stored, value):
    counting, executor = stored
    reader = reader_for(counting, executor)
    slots = random.Random(0).sample(range(SIZE // (4 << 20) - 1), 7) * 4  # 4 MiB apart
    for slot in slots:
        offset = slot * (4 << 20) + random.Random(slot).randrange(1 << 20)
        # an unaligned 256 KiB pread arrives as two kernel reads and a page
        parts = [reader.read(offset + i * KERNEL_READ, KERNEL_READ) for i in range(2)]
        parts.append(reader.read(offset + 2 * KERNEL_READ, 4096))
        assert b"".join(parts) == value[offset : offset + 2 * KERNEL_READ + 4096]
    assert len(counting.ranges) == len(slots)
    assert all(end - start <= READAHEAD_FIRST for start, end in counting.ranges)


def test_small_random_reads_cost_one_get_each(stored, value):
    counting, executor = stored
    reader = reader_for(counting, executor)
    for slot in range(0, SIZE // (4 << 20)):
        offset = slot * (4 << 20) + 12345
        assert reader.read(offset, 4096) == value[offset : offset + 4096]
    assert len(counting.ranges) == SIZE // (4 << 20)


def test_a_sequential_read_is_served_by_few_large_gets(stored, value):
    counting, executor = stored
    reader = reader_for(counting, executor)
    data = b"".join(reader.read(offset, KERNEL_READ) for offset in range(0, SIZE, KERNEL_READ))
    assert data == value
    assert len(counting.ranges) <= 10
    assert max(end - start for start, end in counting.ranges) <= READAHEAD_LARGEST
    assert sum(min(end, SIZE) - start for start, end in counting.ranges) == SIZE  # nothing twice


def test_out_of_order_concurrent_sequential_reads_return_the_right_bytes(stored, value):
    counting, executor = stored
    reader = reader_for(counting, executor)
    offsets = list(range(0, 16 << 20, KERNEL_READ))
    with ThreadPoolExecutor(8) as pool:
        parts = list(pool.map(lambda o: reader.read(o, KERNEL_READ), offsets))
    assert b"".join(parts) == value[: 16 << 20]


def test_readahead_stays_within_the_budget_and_gives_it_back(stored, value):
    counting, executor = stored
    budget = ReadaheadBudget(4 << 20)
    reader = reader_for(counting, executor, budget)
    for offset in range(0, 24 << 20, KERNEL_READ):
        assert reader.read(offset, KERNEL_READ) == value[offset : offset + KERNEL_READ]
        assert budget.used <= budget.limit + READAHEAD_LARGEST  # the segment being read may exceed it
    reader.close()
    assert budget.used == 0


def test_reads_past_the_end_are_short(stored, value):
    counting, executor = stored
    reader = reader_for(counting, executor)
    assert reader.read(SIZE - 10, KERNEL_READ) == value[-10:]
    assert reader.read(0, 100) == value[:100]
    assert reader.read(SIZE - 5, KERNEL_READ) == value[-5:]
