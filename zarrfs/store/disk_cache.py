"""DiskCache: a Store over another (a remote one) that keeps the values it reads in a local
directory, so that a later session reads them from disk (`--cache-dir`). Bounded in size,
least recently used out first; every entry is checked when read, and revalidated against
the store's token of its value (an ETag) once it is older than a bound; writes through it
forget what they replace."""

from __future__ import annotations

import logging
import os
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from .base import Store
from .byte_range import ByteRange
from .disk_cache_index import EntryIndex, SharedCount
from .disk_cache_layout import (
    DAMAGED,
    GONE,
    HEADER,
    MAGIC,
    TEMP_DIR,
    UNREADABLE,
    contains,
    digest,
    entries_of,
    key_path,
    on_disk,
    plan,
    range_name,
    read_entry,
    rename,
    touch,
    unlink,
    write_temp,
)
from .errors import ValueTooLargeError
from .keys import validate_key
from .records import FileMeta, TreeListing

log = logging.getLogger(__name__)

# no single value may take more than this share of the bound
_LARGEST_SHARE = 8
# at most this many entries, whatever their sizes: each costs about 600 bytes of memory in
# the index below, so a bound of GiBs of tiny values cannot grow the daemon by GiBs
MOST_ENTRIES = 100_000
_TOKENS_AT_ONCE = 16  # HEADs in flight for the tokens of the values a read misses


class DiskCache(Store):
    """The store `inner`, with the values read from it kept under `directory` (made with
    mode 0700), at most `max_bytes` in all (headers included) and `max_entries` entries,
    oldest use out first.

    Entries are files `<digest of inner.url>/<key>@<range>`, where range is `all`, `s<N>`
    (the last N bytes), `<start>-<end>` or `<start>-`. A read is answered from one entry or
    from several adjacent spans of the same key; anything else goes to `inner`, and what
    comes back is kept. Keys for which `uncached(key)` is true, listings and sizes always go
    to `inner`. Safe to share with other threads and with another process using the same
    directory (entries are renamed into place; one that vanishes is a miss).

    With `validate_after` (seconds), each entry records the store's token of the value it
    was read from (`Store.get_token`, asked before the value is fetched, so that a value
    replaced meanwhile is found changed later, never the other way round); an entry not
    confirmed by this cache within that many seconds is confirmed by asking the token
    again before it is served (one HEAD per key and read), and dropped and fetched anew
    where the token changed. 0 confirms every read; None (the default) never does.
    """

    def __init__(
        self,
        inner: Store,
        directory: str,
        max_bytes: int,
        uncached: Callable[[str], bool] = lambda key: False,
        max_entries: int = MOST_ENTRIES,
        validate_after: float | None = None,
    ) -> None:
        super().__init__(inner.url, inner.read_only)
        self.inner = inner
        self.lists_trees = inner.lists_trees  # listings are never cached: passed through
        self.keeps_meta = inner.keeps_meta  # and attributes
        self.keeps_dir_meta = inner.keeps_dir_meta
        self.chunks_need_their_node = inner.chunks_need_their_node
        self.directory = os.path.abspath(directory)
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._uncached = uncached
        self.validate_after = validate_after
        self._source = digest(inner.url).hex()
        self._temp = os.path.join(self.directory, TEMP_DIR)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        os.makedirs(self._temp, mode=0o700, exist_ok=True)
        # guards everything below; file I/O happens outside it, except unlinking
        self._lock = threading.Lock()
        self._index = EntryIndex(self._source)
        self._epoch = 0  # advanced by every write through: values fetched before it are not kept
        # the same, shared with the other mounts of this source on the directory: a count in
        # a file of its own, advanced and compared under an flock of it
        self._shared = SharedCount(os.path.join(self.directory, f"{self._source}.writes"))
        self._stats: Counter[str] = Counter()
        self._failing = False
        # what this cache kept since it last looked at the whole directory, where other
        # mounts may have kept entries too; after an eighth of the bound, it looks again
        self._kept_since_scan = 0
        self._rescanning = False
        self._recent: set[str] = set()  # kept while a look at the directory is under way
        self._scan()

    def request_stats(self) -> dict[str, float]:
        """The inner store's calls (what reached it), and this cache's counters."""
        with self._lock:
            mine = {f"disk_cache_{name}": n for name, n in self._stats.items()}
            mine.update(disk_cache_bytes=self._index.total, disk_cache_entries=len(self._index.lru))
        return {**self.inner.request_stats(), **mine}

    # Reading

    def _get_many(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> list[bytes | None]:
        with self._lock:
            epoch = (self._epoch, self._shared.value())
        results: list[bytes | None] = [None] * len(requests)
        misses = []
        tokens: dict[str, str | None] = {}  # the store's tokens asked in this read
        for i, (key, byte_range) in enumerate(requests):
            value = self._lookup(key, byte_range, tokens) if self._cacheable(key, byte_range) else None
            if value is None:
                misses.append(i)
                continue
            if max_size is not None and len(value) > max_size:
                raise ValueTooLargeError(f"more than the {max_size} bytes the reader can take; not read", key)
            results[i] = value
        if misses:
            if self.validate_after is not None:  # the tokens of what is fetched, asked first
                self._ask_tokens(
                    [key for i in misses for key, byte_range in [requests[i]] if self._cacheable(key, byte_range)],
                    tokens,
                )
            fetched = self.inner.get_partial_values([requests[i] for i in misses], max_size=max_size)
            for i, value in zip(misses, fetched):
                results[i] = value
                key, byte_range = requests[i]
                token = "" if self.validate_after is None else tokens.get(key)
                if value is not None and token is not None and self._cacheable(key, byte_range):
                    self._keep(key, byte_range, value, epoch, token)
        return results

    def _ask_tokens(self, keys: list[str], tokens: dict[str, str | None]) -> None:
        """Add the store's tokens of `keys` not asked yet to `tokens`, several at once."""
        wanted = [key for key in dict.fromkeys(keys) if key not in tokens]
        if len(wanted) > 1:
            with ThreadPoolExecutor(min(len(wanted), _TOKENS_AT_ONCE), thread_name_prefix="zarrfs-token") as pool:
                tokens.update(zip(wanted, pool.map(self.inner.get_token, wanted)))
        elif wanted:
            tokens[wanted[0]] = self.inner.get_token(wanted[0])

    def _cacheable(self, key: str, byte_range: ByteRange | None) -> bool:
        return not self._uncached(key) and not (byte_range is not None and byte_range.is_empty)

    def _lookup(self, key: str, byte_range: ByteRange | None, tokens: dict[str, str | None]) -> bytes | None:
        path = key_path(key)
        with self._lock:
            ranges = self._index.ranges(path)
        pieces = plan(ranges, byte_range)
        if pieces is None:
            self._count(misses=1)
            return None
        parts = []
        for name, start, end in pieces:
            entry = self._read_entry(path, name, key)
            value = None if entry is None else entry[0]
            if value is not None and len(value) != ranges[name]:  # replaced by another process
                self._drop(f"{self._source}/{path}@{name}")
                value = None
            if entry is not None and value is not None and not self._current(key, path, name, entry[1], tokens):
                value = None
            if value is None:
                self._count(misses=1)
                return None
            parts.append(value if start == 0 and end is None else value[start:end])
        value = parts[0] if len(parts) == 1 else b"".join(parts)
        self._count(hits=1, hit_bytes=len(value))
        return value

    def _current(self, key: str, path: str, name: str, token: bytes, tokens: dict[str, str | None]) -> bool:
        """Whether an entry, read from the store when it held the value of `token` (its
        digest), may be served: confirmed recently enough, or its key's token unchanged
        (asked now, once per read). An entry found changed is removed."""
        relative = f"{self._source}/{path}@{name}"
        if self.validate_after is None:
            return True
        now = time.monotonic()
        with self._lock:
            confirmed = self._index.confirmed(relative)
        if confirmed is not None and now - confirmed < self.validate_after:
            return True
        if key not in tokens:
            tokens[key] = self.inner.get_token(key)
            self._count(revalidations=1)
        current = tokens[key]
        if current is not None and digest(current) == token:
            with self._lock:
                self._index.confirm(relative, now)
            return True
        self._count(refetches=1)
        self._drop(relative, delete=True)
        return False

    def _read_entry(self, path: str, name: str, key: str) -> tuple[bytes, bytes] | None:
        """The value of one entry, checked, and the digest of the token it was read with;
        None (and the entry dropped) if it is gone or does not check."""
        relative = f"{self._source}/{path}@{name}"
        full = os.path.join(self.directory, relative)
        try:
            found = read_entry(full, digest(self.url, key, name))
        except OSError as exc:
            log.warning("disk cache: cannot read %s (%s); reading the store", full, exc)
            found = UNREADABLE
        if isinstance(found, tuple):
            with self._lock:
                self._index.used(relative)
            return found
        if found == DAMAGED:
            log.warning("disk cache: entry %s is damaged; removed, reading the store", full)
            self._count(damaged=1)
        self._drop(relative, delete=found != GONE)  # gone: evicted or forgotten by another process
        return None

    # Sizes and listings: always the inner store's (they change under a mount)

    def _get_info(self, key: str) -> tuple[int, float | None] | None:
        return self.inner.get_info(key)

    def _get_token(self, key: str) -> str | None:
        return self.inner.get_token(key)

    def keep_empty_directories(self) -> None:
        self.inner.keep_empty_directories()

    def get_meta(self, key: str, *, directory: bool = False) -> FileMeta | None:
        return self.inner.get_meta(key, directory=directory)

    def get_metas(self, keys: Sequence[str]) -> dict[str, FileMeta]:
        return self.inner.get_metas(keys)

    def set_meta(self, key: str, meta: FileMeta, *, directory: bool = False) -> FileMeta:
        return self.inner.set_meta(key, meta, directory=directory)  # the value stays: its entries too

    def _list_prefix(self, prefix: str) -> list[str]:
        return self.inner.list_prefix(prefix)

    def _list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        return self.inner.list_prefix_sizes(prefix)

    def _list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        return self.inner.list_dir(prefix)

    def _list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], list[str]]:
        return self.inner.list_dir_info(prefix)

    def _list_tree_info(self, prefix: str, max_keys: int) -> TreeListing:
        return self.inner.list_tree_info(prefix, max_keys)

    # Keeping

    def _keep(self, key: str, byte_range: ByteRange | None, value: bytes, epoch: tuple[int, int], token: str) -> None:
        size = HEADER.size + len(value)
        if size > self.max_bytes // _LARGEST_SHARE:
            return
        path, name = key_path(key), range_name(byte_range)
        relative = f"{self._source}/{path}@{name}"
        full = os.path.join(self.directory, relative)
        try:
            temp = write_temp(
                self._temp,
                value,
                HEADER.pack(MAGIC, zlib.crc32(value), len(value), digest(self.url, key, name), digest(token)),
            )
        except OSError as exc:
            with self._lock:
                self._write_failed(exc)
            return
        # renamed into place under the locks, so that no value fetched before a write
        # through (by this mount or another on the directory) can replace what was kept after it
        with self._lock, self._shared.held():
            if (self._epoch, self._shared.value()) != epoch:  # written through since it was fetched: it may be old
                unlink(temp)
                return
            try:
                rename(temp, full)
                touch(full)
            except OSError as exc:
                unlink(temp)
                self._write_failed(exc)
                return
            self._failing = False
            ranges = self._index.ranges(path)
            for other in [n for n in ranges if n != name and contains(name, len(value), n, ranges[n])]:
                self._remove(f"{self._source}/{path}@{other}")
            self._index.put(relative, size, len(value), time.monotonic())
            self._evict()
            self._recent.add(relative)
            self._kept_since_scan += size
            look_again = self._kept_since_scan >= self.max_bytes // _LARGEST_SHARE and not self._rescanning
            if look_again:
                self._rescanning, self._kept_since_scan, self._recent = True, 0, set()
        if look_again:
            self._rescan()

    def _evict(self) -> None:
        """Remove the least recently used entries until the total and the count are within
        their bounds (the lock held). The newest entry is never one: no entry is larger
        than the bound."""
        while (oldest := self._index.oldest_beyond(self.max_bytes, self.max_entries)) is not None:
            self._remove(oldest)
            self._stats["evictions"] += 1

    def _write_failed(self, exc: OSError) -> None:
        """Count a failed write (the lock held)."""
        self._stats["write_errors"] += 1
        first, self._failing = not self._failing, True
        # one line when writing starts to fail, not one per read while the disk is full
        (log.warning if first else log.debug)(
            "disk cache: cannot write to %s (%s); reading on from the store", self.directory, exc
        )

    # Writing through: forget what is replaced, before (so that a failed write leaves
    # nothing stale) and after (values fetched meanwhile may be old)

    def _set_many(self, items: dict[str, bytes]) -> None:
        self._write_through(list(items), [], lambda: self.inner.set_values(items))

    def _get_versioned(self, key: str) -> tuple[bytes | None, str | None]:
        return self.inner.get_versioned(key)  # a version is the store's: never from the cache

    def _set_if(self, key: str, value: bytes, version: str | None) -> bool:
        stored: list[bool] = []
        self._write_through([key], [], lambda: stored.append(self.inner.set_if(key, value, version)))
        return stored[0]

    def _set_file(self, key: str, fd: int, consume: bool = False) -> int:
        sizes = []
        self._write_through([key], [], lambda: sizes.append(self.inner.set_file(key, fd, consume=consume)))
        return sizes[0]

    def _set_file_meta(self, key: str, fd: int, consume: bool, meta: FileMeta) -> int:
        sizes = []
        self._write_through([key], [], lambda: sizes.append(self.inner.set_file(key, fd, consume=consume, meta=meta)))
        return sizes[0]

    def _erase_many(self, keys: list[str]) -> None:
        self._write_through(keys, [], lambda: self.inner.erase_values(keys))

    def _erase_prefix(self, prefix: str) -> None:
        self._write_through([], [prefix], lambda: self.inner.erase_prefix(prefix))

    def _copy_value(self, src: str, dst: str) -> None:
        self._write_through([dst], [], lambda: self.inner.copy(src, dst))

    def move(self, src: str, dst: str, *, replace: bool = False) -> None:
        # checked before any path in the cache directory is made of them
        keys, prefixes = [validate_key(src), validate_key(dst)], [src + "/", dst + "/"]
        self._write_through(keys, prefixes, lambda: self.inner.move(src, dst, replace=replace))

    def _write_through(self, keys: Sequence[str], prefixes: Sequence[str], write: Callable[[], None]) -> None:
        self._forget(keys, prefixes)
        try:
            write()
        finally:
            self._forget(keys, prefixes)

    def _forget(self, keys: Sequence[str], prefixes: Sequence[str]) -> None:
        """Remove the entries of `keys` and of every key under `prefixes`: those this
        cache knows, and those on disk (another mount on the directory may have kept them)."""
        paths = {key_path(key) for key in keys}
        starts = tuple(key_path(prefix[:-1]) + "/" if prefix else "" for prefix in prefixes)
        with self._lock, self._shared.held():
            self._epoch += 1
            self._shared.advance()
            gone = [p for p in self._index.paths() if p in paths or (starts and p.startswith(starts))]
            for path in gone:
                for name in self._index.ranges(path):
                    self._remove(f"{self._source}/{path}@{name}")
            for relative in entries_of(self.directory, self._source, paths, starts):
                self._remove(relative)

    # Entries

    def _remove(self, relative: str) -> None:
        """Forget an entry and delete its file (the lock held)."""
        self._index.forget(relative)
        unlink(os.path.join(self.directory, relative))

    def _drop(self, relative: str, delete: bool = False) -> None:
        with self._lock:
            if delete:
                self._remove(relative)
            else:
                self._index.forget(relative)

    def _count(self, **counts: int) -> None:
        with self._lock:
            self._stats.update(counts)

    def _scan(self) -> None:
        """Account what earlier sessions left (every source's entries share the bound),
        oldest use first; remove temporary files left by a crash."""
        found = on_disk(self.directory, remove_temps=True)
        with self._lock:
            for _, relative, size in sorted(found):
                self._index.account(relative, size)
            self._evict()

    def _rescan(self) -> None:
        """Account the directory anew, other mounts' entries included, and evict down to
        the bound, oldest use first (the files' modification times: every mount touches an
        entry it reads). So N mounts sharing a directory hold at most the bound and an
        eighth of it per mount. Entries this cache kept while the directory was walked are
        kept in the account."""
        try:
            found = on_disk(self.directory, remove_temps=False)
            with self._lock:
                self._index.rebuild(found, self._recent)
                self._stats["rescans"] += 1
                self._evict()
        except OSError as exc:  # the directory went away under a running mount
            log.debug("disk cache: cannot look at %s again: %s", self.directory, exc)
        finally:
            with self._lock:
                self._rescanning = False
