"""A store with no rename of its own (an Icechunk session) moves a prefix by copying its
values and then erasing them (store/base.py): in batches, so that moving an array holds
a batch's worth of values in memory, not the array."""

from __future__ import annotations

from zarrfs.store import Store
from zarrfs.store.moves import COPY_THROUGH_MEMORY

MiB = 1 << 20


class _DictStore(Store):
    """Values in a dictionary; notes the most bytes one `_get_many` handed out."""

    def __init__(self) -> None:
        super().__init__("dict://")
        self.values: dict[str, bytes] = {}
        self.most_fetched_at_once = 0

    def _get_many(self, requests, max_size=None):
        out = [self.values.get(key) for key, _ in requests]
        self.most_fetched_at_once = max(self.most_fetched_at_once, sum(len(v or b"") for v in out))
        return out

    def _get_info(self, key):
        return None if key not in self.values else (len(self.values[key]), None)

    def _set_many(self, items):
        self.values.update(items)

    def _erase_many(self, keys):
        for key in keys:
            self.values.pop(key, None)

    def _list_prefix(self, prefix):
        return sorted(key for key in self.values if key.startswith(prefix))

    def _list_dir(self, prefix):
        raise NotImplementedError


def test_moving_an_array_copies_it_in_batches_of_bounded_size_then_erases_it():
    store = _DictStore()
    chunks = {f"a/c/{i}": bytes([i]) * (16 * MiB) for i in range(12)}  # 192 MiB
    store.values.update(chunks, **{"a/zarr.json": b"{}"})
    store.move("a", "b")
    assert store.values == {"b/zarr.json": b"{}", **{"b" + key[1:]: value for key, value in chunks.items()}}
    assert store.most_fetched_at_once <= COPY_THROUGH_MEMORY


def test_a_value_larger_than_a_batch_is_moved_alone():
    store = _DictStore()
    store.values.update({"a/big": b"x" * (COPY_THROUGH_MEMORY + 1), "a/small": b"y"})
    store.move("a", "b")
    assert store.values == {"b/big": b"x" * (COPY_THROUGH_MEMORY + 1), "b/small": b"y"}
    assert store.most_fetched_at_once == COPY_THROUGH_MEMORY + 1
