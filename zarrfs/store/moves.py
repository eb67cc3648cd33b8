"""Renames by copy then delete (object stores, in-memory stores): the copy through memory
of stores that cannot copy by themselves, in bounded batches; and the delete step,
retried with backoff within the store's deadline, node documents first, what is still
left named in one log line and counted (`rename_leftovers`)."""

from __future__ import annotations

import logging
import time
from typing import Protocol

from .byte_range import ByteRange
from .errors import StoreError
from .retries import Retries

log = logging.getLogger(__name__)

# tries of the delete step, each with the store's own retries of transient failures
ERASE_ATTEMPTS = 4
_LEAST_DELAY = 0.05  # seconds before the first retry (doubled at each)
_NAMED = 20  # leftover keys named in the log line; the rest are counted
# the largest value copied through the daemon's memory, by stores that cannot copy by
# themselves (docs/errors.md, Bounded memory): larger ones are refused unread
COPY_THROUGH_MEMORY = 64 << 20


class Moving(Protocol):
    """The primitives of a Store that a rename uses."""

    url: str

    def _get_many(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> list[bytes | None]: ...

    def _set_many(self, items: dict[str, bytes]) -> None: ...

    def _list_prefix_sizes(self, prefix: str) -> dict[str, int]: ...

    def _erase_many(self, keys: list[str]) -> None: ...

    def _list_prefix(self, prefix: str) -> list[str]: ...

    def _get_info(self, key: str) -> tuple[int, float | None] | None: ...

    def count_leftovers(self, n: int) -> None: ...


def is_document(key: str) -> bool:
    """A node's document (`zarr.json`, `.zarray`, `.zattrs`, …): what makes a prefix a node
    in a listing; chunks are not."""
    name = key.rpartition("/")[2]
    return name.startswith(".") or name.endswith(".json")


def documents_last(keys: list[str]) -> tuple[list[str], list[str]]:
    """(the keys that are no node document, those that are): the order a move copies
    them in, so that one cut short (a killed daemon) never leaves a document at the new
    name over chunks not yet copied (a node that reads as fill values)."""
    return [key for key in keys if not is_document(key)], [key for key in keys if is_document(key)]


def move_through_memory(store: Moving, src: str, dst: str) -> None:
    """Copy then delete; `src` and `dst` are both keys or both prefixes ending in "/".
    Values are copied in batches of up to COPY_THROUGH_MEMORY bytes (a larger value
    alone), so moving an array holds about that much in memory, not the array; the
    sources are erased once all are copied."""
    sizes = store._list_prefix_sizes(src) if src.endswith("/") else {src: 0}
    batch: list[str] = []
    held = 0
    for key, size in sizes.items():
        if batch and held + size > COPY_THROUGH_MEMORY:
            _copy_batch(store, batch, src, dst)
            batch, held = [], 0
        batch.append(key)
        held += size
    if batch:
        _copy_batch(store, batch, src, dst)
    erase_moved(store, src, dst, list(sizes), Retries(store.url, delay=0.0))


def _copy_batch(store: Moving, sources: list[str], src: str, dst: str) -> None:
    values = store._get_many([(key, None) for key in sources])
    store._set_many({dst + key[len(src) :]: v for key, v in zip(sources, values) if v is not None})


def erase_moved(store: Moving, src: str, dst: str, sources: list[str], retries: Retries) -> None:
    """Erase the `sources` of a rename of `src` (a key, or a prefix ending in "/") to
    `dst`, all copied already. The source's documents go first, so that where the rest
    cannot be erased the source is no node any more (its chunks are left, unlisted by
    the decoded tree). What is left is logged and counted; StoreError where the source
    is still whole (its documents, or the value itself, left): both copies stand."""
    if src.endswith("/"):
        first = [key for key in sources if is_document(key)]
        rest = [key for key in sources if not is_document(key)]
    else:
        first, rest = list(sources), []
    failure = _erase(store, first, retries)
    left = _left(store, src, first) if failure is not None else []
    if left:
        left += rest  # the source stands whole: its values are kept with it
    elif rest:
        failure = _erase(store, rest, retries)
        left = _left(store, src, rest) if failure is not None else []
    if not left:
        return
    store.count_leftovers(len(left))
    named = ", ".join(left[:_NAMED]) + (f" and {len(left) - _NAMED} more" if len(left) > _NAMED else "")
    whole = left[: len(first)] == first and bool(first)
    log.warning(
        "%s: rename of %s to %s: %d source key(s) left in the store (%s), not deleted after %d tries: %s; %s",
        store.url,
        src.rstrip("/"),
        dst.rstrip("/"),
        len(left),
        named,
        ERASE_ATTEMPTS,
        failure,
        "both copies stand" if whole else "the source is no node any more",
    )
    if whole:
        raise StoreError(
            f"copied to {dst.rstrip('/')}, but the source could not be deleted: {failure}", src.rstrip("/")
        )


def _erase(store: Moving, keys: list[str], retries: Retries) -> StoreError | None:
    """Erase `keys`, retrying with backoff until ERASE_ATTEMPTS tries or the deadline;
    None once done, else the last failure."""
    if not keys:
        return None
    deadline = retries.deadline()
    for attempt in range(ERASE_ATTEMPTS):
        try:
            store._erase_many(keys)
            return None
        except StoreError as error:
            failure = error
        if attempt + 1 == ERASE_ATTEMPTS or time.monotonic() >= deadline:
            break
        time.sleep(min(max(retries.delay, _LEAST_DELAY) * 2**attempt, max(0.0, deadline - time.monotonic())))
    return failure


def _left(store: Moving, src: str, keys: list[str]) -> list[str]:
    """Which of `keys` the store still holds (all of them where it cannot tell)."""
    try:
        if not src.endswith("/"):
            return keys if store._get_info(src) is not None else []
        held = set(store._list_prefix(src))
    except StoreError:
        return keys
    return [key for key in keys if key in held]
