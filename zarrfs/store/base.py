"""The abstract Store: a blocking key/value interface in the terms of the Zarr abstract
store (get, set, erase, list, partial values). The public methods validate keys and
enforce read-only mode once, here; implementations fill in the `_` primitives."""

from __future__ import annotations

import builtins
import functools
import hashlib
import os
import threading
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Concatenate, Literal, ParamSpec, TypeVar, overload

from .byte_range import ByteRange
from .errors import (
    InvalidKeyError,
    KeyExistsError,
    KeyNotFoundError,
    ReadOnlyStoreError,
    StoreError,
    ValueTooLargeError,
    is_precondition_failure,
)
from .keys import validate_key, validate_prefix
from .moves import erase_moved
from .retries import Retries
from .urls import is_remote

_LOCK_STRIPES = 64
_READ_AT_ONCE = 1 << 30
# S3 parts: at least 8 MiB (S3's least is 5 MiB), larger for a file of more than 10,000
# of them (S3's most)
_LEAST_PART = 8 << 20
_MOST_PARTS = 10_000
# the largest value copied through the daemon's memory, by stores that cannot copy by
# themselves (docs/errors.md, Bounded memory): larger ones are refused unread
COPY_THROUGH_MEMORY = 64 << 20

S = TypeVar("S", bound="Store")
P = ParamSpec("P")
R = TypeVar("R")


def _counted(kind: str) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Count a public store call and the seconds it took, under `kind` (get, head, set,
    erase, move, list), for the mount's stats."""

    def wrap(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def counted(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            start = time.monotonic()
            try:
                return method(self, *args, **kwargs)
            finally:
                with self._counts_lock:
                    self._counts[f"store_{kind}"] += 1
                    self._counts[f"store_{kind}_seconds"] += time.monotonic() - start

        return counted

    return wrap


@dataclass(frozen=True)
class TreeListing:
    """What one recursive listing found below a prefix, as names relative to it.

    `files`: each key's (size, mtime) as get_info gives them; `dirs`: directories the
    store holds with no key below them (S3 folder markers, empty directories). When
    `complete` is False the listing stopped early: it holds the first names below the
    prefix in key order, every one up to the greatest name it holds (directories that
    reach past that name may hold more than it shows).
    """

    files: dict[str, tuple[int, float | None]]
    dirs: frozenset[str]
    complete: bool


@dataclass(frozen=True)
class FileMeta:
    """The POSIX attributes a store keeps beside a value or a directory (None: not kept
    there). `mode` holds the permission bits alone (07777); times are POSIX nanoseconds
    (rsync compares them to the nanosecond).
    Local stores keep them on the file itself; object stores as user metadata beside
    the object (object_meta.py)."""

    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    atime_ns: int | None = None
    mtime_ns: int | None = None
    ctime_ns: int | None = None

    def updated(self, other: FileMeta) -> FileMeta:
        """These attributes with those `other` gives (not None) in their place."""
        return FileMeta(*(b if b is not None else a for a, b in zip(self.fields(), other.fields())))

    def fields(self) -> tuple:
        return (self.mode, self.uid, self.gid, self.atime_ns, self.mtime_ns, self.ctime_ns)


class Store(ABC):
    """A Zarr store. Safe to call from many threads at once.

    Read-modify-write operations (set_partial_values) are serialised per key within one
    Store object; a plain set() racing with them on the same key may be overwritten.
    `lists_trees` says whether list_tree_info lists a whole subtree in one go (a few
    requests, not one per directory).
    """

    lists_trees: bool = False
    # whether the store keeps FileMeta beside values (`keeps_meta`) and directories
    # (`keeps_dir_meta`); where it does not, get_meta gives the mtime alone
    keeps_meta: bool = False
    keeps_dir_meta: bool = False
    # bytes of a file being stored (set_file) that the store may hold in memory at once:
    # the upload parts in flight of every upload together (the mount's memory budget)
    upload_memory: int = 64 << 20
    # the longest key, in UTF-8 bytes, that the store takes below its root (S3: 1,024 bytes
    # less its prefix); None: no limit but a name's
    max_key_bytes: int | None = None

    def __init__(self, url: str, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only
        self._key_locks = tuple(threading.Lock() for _ in range(_LOCK_STRIPES))
        # calls by kind (ints) and their seconds (floats)
        self._counts: defaultdict[str, float] = defaultdict(int)
        self._counts_lock = threading.Lock()

    def request_stats(self) -> dict:
        """Calls by kind (`store_get`, …) and their total seconds (`store_get_seconds`);
        `upload_parts_bytes`: what uploads hold in memory now."""
        with self._counts_lock:
            stats = {k: round(v, 6) if k.endswith("_seconds") else v for k, v in self._counts.items()}
        stats.setdefault("store_precondition_failed", 0)  # conditional writes another writer forestalled
        stats.setdefault("rename_leftovers", 0)  # source keys a rename by copy and delete could not delete
        return {**stats, "upload_parts_bytes": self._uploads.held}

    def count_leftovers(self, n: int) -> None:
        """Count source keys that a rename (copy then delete) left in the store."""
        with self._counts_lock:
            self._counts["rename_leftovers"] += n

    def limit_uploads(self, nbytes: int) -> None:
        """Hold at most `nbytes` of files being stored in memory at once (upload_memory)."""
        self.upload_memory = nbytes
        self.__dict__.pop("_uploads", None)

    @functools.cached_property
    def _uploads(self) -> UploadParts:
        return UploadParts(self.upload_memory)

    @property
    def remote(self) -> bool:
        """An object store or a web server (urls.is_remote)."""
        return is_remote(self.url)

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "read-write"
        return f"<{type(self).__name__} {self.url} {mode}>"

    def keep_empty_directories(self) -> None:  # noqa: B027 (a no-op unless a store has directories)
        """Where removals and renames remove the directories they leave empty (a local
        store), stop doing so: a --raw mount keeps them, with their modes and times, as a
        filesystem does. Elsewhere nothing changes (an object store holds no directory)."""

    # Reading

    @_counted("get")
    def get(self, key: str, byte_range: ByteRange | None = None, *, max_size: int | None = None) -> bytes | None:
        """The value at `key` (or the bytes of it `byte_range` selects); None if missing.

        With `max_size`, a selection larger than that raises ValueTooLargeError rather
        than being read (at most max_size + 1 bytes are fetched to find out).
        """
        return self._get_many([(validate_key(key), byte_range)], max_size)[0]

    # self positional-only (`/`) in the overloads: _counted's Concatenate makes the
    # implementation's so, and mypy wants no overload to take what the implementation does not
    @overload
    def get_partial_values(
        self,
        /,
        requests: Sequence[tuple[str, ByteRange | None]],
        *,
        max_size: int | None = None,
        buffers: Literal[False] = False,
    ) -> builtins.list[bytes | None]: ...

    @overload
    def get_partial_values(
        self,
        /,
        requests: Sequence[tuple[str, ByteRange | None]],
        *,
        max_size: int | None = None,
        buffers: bool,
    ) -> builtins.list[bytes | memoryview | None]: ...

    @_counted("get")
    def get_partial_values(
        self,
        requests: Sequence[tuple[str, ByteRange | None]],
        *,
        max_size: int | None = None,
        buffers: bool = False,
    ) -> Sequence[bytes | memoryview | None]:
        """Many gets in one batch, overlapping their latency; None where a key is missing.
        `max_size` bounds each answer, as in get(). With `buffers`, a value may come as a
        read-only memoryview of the client's own buffer where a store can hand it over
        without a copy (`_get_many_buffers`); for a caller that only reads it (decoding)."""
        for key, _ in requests:
            validate_key(key)
        if buffers:
            return self._get_many_buffers(list(requests), max_size)
        return self._get_many(list(requests), max_size)

    @_counted("head")
    def get_info(self, key: str) -> tuple[int, float | None] | None:
        """(size, mtime as POSIX seconds or None) of the value at `key`; None if missing."""
        return self._get_info(validate_key(key))

    @_counted("head")
    def get_token(self, key: str) -> str | None:
        """A token that changes whenever the value at `key` is replaced (an object's ETag;
        a local file's inode, size and times); None if there is no value. One HEAD on an
        object store, an lstat on a local one; what a cache revalidates its copy with."""
        return self._get_token(validate_key(key))

    @_counted("head")
    def get_meta(self, key: str, *, directory: bool = False) -> FileMeta | None:
        """The attributes kept beside the value at `key` (with `directory`: of the
        directory `key`); None if there is none. One request on an object store (HEAD:
        a listing does not return user metadata), an lstat on a local one."""
        if directory:
            validate_prefix(key + "/")
            return self._get_dir_meta(key) if self.keeps_dir_meta else None
        return self._get_meta(validate_key(key))

    def get_metas(self, keys: Sequence[str]) -> dict[str, FileMeta]:
        """get_meta of many keys, overlapping their requests where the store can; keys
        that hold no value are left out."""
        metas = {key: self.get_meta(key) for key in keys}
        return {key: meta for key, meta in metas.items() if meta is not None}

    @_counted("set_meta")
    def set_meta(self, key: str, meta: FileMeta, *, directory: bool = False) -> FileMeta:
        """Keep `meta` beside the value at `key` (with `directory`: on the directory
        `key`, made if the store holds none), in place of what it gives (fields None
        stay as they were). An object store copies the object onto itself with the new
        metadata (CopyObject, on the server); nothing passes through the daemon.
        Returns the attributes kept now. KeyNotFoundError if `key` holds no value;
        NotImplementedError where the store keeps no such attributes."""
        self._check_writable(validate_key(key))
        if directory:
            if not self.keeps_dir_meta:
                raise NotImplementedError(f"{type(self).__name__} keeps no attributes of directories")
            return self._set_dir_meta(key, meta)
        if not self.keeps_meta:
            raise NotImplementedError(f"{type(self).__name__} keeps no attributes of values")
        return self._set_meta(key, meta)

    def get_size(self, key: str) -> int | None:
        """Size in bytes of the value at `key`; None if missing."""
        info = self.get_info(key)
        return None if info is None else info[0]

    def exists(self, key: str) -> bool:
        """Whether `key` holds a value (a prefix alone does not count)."""
        return self.get_info(key) is not None

    # Writing

    def set(self, key: str, value: bytes) -> None:
        """Store `value` at `key`, replacing any old value atomically."""
        self.set_values({key: value})

    @_counted("set")
    def set_values(self, items: Mapping[str, bytes]) -> None:
        """Store many values in one batch; each key is replaced atomically."""
        for key in items:
            self._check_writable(validate_key(key))
        if items:
            self._set_many({key: bytes(value) for key, value in items.items()})

    @_counted("set")
    def set_file(self, key: str, fd: int, *, consume: bool = False, meta: FileMeta | None = None) -> int:
        """Store the content of the open local file `fd` at `key`, replacing any old value
        atomically; returns the size stored. The file is read at explicit offsets (its
        offset may move) and must not shrink meanwhile. Stores that can stream hold a
        bounded part of it in memory at a time (local: the kernel copies, holes stay
        holes; S3: a multipart upload in parts); others read it whole (`_set_file`).
        With `consume` the caller gives the file up: a local store on its filesystem
        makes that very file the value (a link, nothing copied), so it must never be
        written again. `meta`: the attributes the new value is given, where the store
        keeps them (in the same request on an object store)."""
        self._check_writable(validate_key(key))
        if meta is None or not self.keeps_meta:
            return self._set_file(key, fd, consume)
        return self._set_file_meta(key, fd, consume, meta)

    # Conditional writes (compare-and-swap): a value's version is a token the store gives
    # with it (S3: its ETag; a local file: its inode and times; elsewhere its content's
    # digest), None where there is no value. Writers on other hosts see them too where
    # the store keeps them (docs/cluster.md says which stores do).

    @_counted("get")
    def get_versioned(self, key: str, *, max_size: int | None = None) -> tuple[bytes | None, str | None]:
        """The value at `key` (None if missing) and its version, read together. With
        `max_size`, a larger value raises ValueTooLargeError, as in get()."""
        value, version = self._get_versioned(validate_key(key))
        if max_size is not None and value is not None and len(value) > max_size:
            raise ValueTooLargeError(f"more than the {max_size} bytes the reader can take", key)
        return value, version

    @_counted("set")
    def set_if(self, key: str, value: bytes, version: str | None) -> bool:
        """Store `value` at `key` only if the value there is still the one `version`
        names (None: only if there is none). False, nothing written, where another
        writer changed it since (counted as `store_precondition_failed`)."""
        self._check_writable(validate_key(key))
        stored = self._set_if(key, bytes(value), version)
        if not stored:
            with self._counts_lock:
                self._counts["store_precondition_failed"] += 1
        return stored

    def create(self, key: str, value: bytes) -> None:
        """Store `value` at `key` where no value is: KeyExistsError where one is (another
        writer's, made meanwhile), nothing written."""
        if not self.set_if(key, value, None):
            raise KeyExistsError("another writer made it first", key)

    @_counted("set")
    def set_partial_values(self, items: Sequence[tuple[str, int, bytes]]) -> None:
        """Write each (key, offset, bytes) into the value at key, in order (read-modify-write).

        A missing value starts empty; a gap before `offset` is filled with zero bytes.
        """
        edits: dict[str, list[tuple[int, bytes]]] = {}
        for key, offset, data in items:
            self._check_writable(validate_key(key))
            if offset < 0:
                raise ValueError(f"negative offset {offset} for key {key!r}")
            edits.setdefault(key, []).append((offset, data))
        for key, key_edits in edits.items():
            with self._key_locks[hash(key) % _LOCK_STRIPES]:
                value = bytearray(self._get_many([(key, None)])[0] or b"")
                for offset, data in key_edits:
                    if offset > len(value):
                        value.extend(bytes(offset - len(value)))
                    value[offset : offset + len(data)] = data
                self._set_many({key: bytes(value)})

    def erase(self, key: str) -> None:
        """Remove the value at `key`; a missing key is not an error."""
        self.erase_values([key])

    @_counted("erase")
    def erase_values(self, keys: Iterable[str]) -> None:
        """Remove many values in one batch; missing keys are skipped."""
        keys = list(keys)
        for key in keys:
            self._check_writable(validate_key(key))
        if keys:
            self._erase_many(keys)

    @_counted("erase")
    def erase_prefix(self, prefix: str) -> None:
        """Remove every value under `prefix` ("" erases the whole store)."""
        self._check_writable(validate_prefix(prefix))
        self._erase_prefix(prefix)

    @_counted("copy")
    def copy(self, src: str, dst: str) -> None:
        """Store a copy of the value at `src` at `dst`, replacing any value there. Stores
        that can copy by themselves (a local directory: the kernel copies; S3: CopyObject)
        hold none of it in memory; others copy through memory, up to COPY_THROUGH_MEMORY
        bytes (ValueTooLargeError beyond, nothing read). KeyNotFoundError if `src` holds
        no value."""
        validate_key(src)
        self._check_writable(validate_key(dst))
        self._copy_value(src, dst)

    @_counted("move")
    def move(self, src: str, dst: str, *, replace: bool = False) -> None:
        """Rename the value at `src`, or every value under prefix `src/`, to `dst`.

        `dst` must hold neither a value nor a prefix; with `replace`, a value at `dst` is
        replaced when `src` is a value too. Atomic on local stores, copy-then-delete on
        object stores.
        """
        self._check_writable(validate_key(src))
        self._check_writable(validate_key(dst))
        if dst == src or dst.startswith(src + "/"):
            raise InvalidKeyError(f"cannot move {src!r} into itself", dst)
        src_is_value = self._get_info(src) is not None
        if self._list_prefix(dst + "/") or (self._get_info(dst) is not None and not (replace and src_is_value)):
            raise KeyExistsError("the destination already exists", dst)
        if src_is_value:
            self._move(src, dst)
        elif self._list_prefix(src + "/"):
            self._move(src + "/", dst + "/")
        else:
            raise KeyNotFoundError("no such key or prefix", src)

    # Listing

    @_counted("list")
    def list(self) -> builtins.list[str]:
        """Every key in the store, sorted."""
        return self._list_prefix("")

    @_counted("list")
    def list_prefix(self, prefix: str) -> builtins.list[str]:
        """Every key under `prefix` (full keys), sorted."""
        return self._list_prefix(validate_prefix(prefix))

    @_counted("list")
    def list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        """Every key under `prefix` with its size: from the listing itself where the store
        returns sizes there (one request per listing page on S3, not one per key)."""
        return self._list_prefix_sizes(validate_prefix(prefix))

    @_counted("list")
    def list_dir(self, prefix: str) -> tuple[builtins.list[str], builtins.list[str]]:
        """(keys, prefixes) directly under `prefix`, as sorted names relative to it."""
        return self._list_dir(validate_prefix(prefix))

    @_counted("list")
    def list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], builtins.list[str]]:
        """Like list_dir, with each key's (size, mtime) as get_info gives them: from the
        listing itself where the store returns them there, not one request per key."""
        return self._list_dir_info(validate_prefix(prefix))

    def prefix_times(self, prefix: str) -> tuple[float, float] | None:
        """(mtime, ctime) of the directory `prefix` is, where the store keeps directories
        of its own (a local store); None elsewhere, and where there is none."""
        return self._prefix_times(validate_prefix(prefix))

    @_counted("list")
    def list_tree_info(self, prefix: str, max_keys: int) -> TreeListing:
        """Every key below `prefix` with its (size, mtime), in one recursive listing
        (S3: ListObjectsV2 without a delimiter, 1,000 keys a page). It stops once more
        than `max_keys` keys were seen, and says so (`complete` False). Only where
        `lists_trees`; elsewhere NotImplementedError."""
        if max_keys < 0:
            raise ValueError(f"max_keys must not be negative, not {max_keys}")
        return self._list_tree_info(validate_prefix(prefix), max_keys)

    # Primitives for implementations: arguments are already validated.

    @abstractmethod
    def _get_many(
        self, requests: builtins.list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> builtins.list[bytes | None]: ...

    def _get_many_buffers(
        self, requests: builtins.list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> Sequence[bytes | memoryview | None]:
        """`_get_many`, where values may be memoryviews (see get_partial_values)."""
        return self._get_many(requests, max_size)

    @abstractmethod
    def _get_info(self, key: str) -> tuple[int, float | None] | None: ...

    def _get_token(self, key: str) -> str | None:
        info = self._get_info(key)
        return None if info is None else f"{info[0]}:{info[1]!r}"

    def _get_versioned(self, key: str) -> tuple[bytes | None, str | None]:
        value = self._get_many([(key, None)])[0]
        return value, content_version(value)

    def _put_conditionally(self, key: str, value: bytes, version: str | None, put: Callable[[], object]) -> bool:
        """_set_if for object stores: `put()` sends the conditional PUT, raising StoreError.
        A refusal (a 412, or a 404 for If-Match of a value removed since) is False; a
        retried PUT whose first try was stored meets its own value, which is True."""
        try:
            put()
        except KeyNotFoundError:
            return False
        except StoreError as error:
            if error.__cause__ is None or not is_precondition_failure(error.__cause__):
                raise
            return version is not None and self._get_many([(key, None)])[0] == value
        return True

    def _set_if(self, key: str, value: bytes, version: str | None) -> bool:
        # the store's own writes agree through the key's lock; other processes' writes
        # between the read and the write go unseen (stores that can do better override it)
        with self._key_locks[hash(key) % _LOCK_STRIPES]:
            if content_version(self._get_many([(key, None)])[0]) != version:
                return False
            self._set_many({key: value})
            return True

    @abstractmethod
    def _set_many(self, items: dict[str, bytes]) -> None: ...

    @abstractmethod
    def _erase_many(self, keys: builtins.list[str]) -> None: ...

    @abstractmethod
    def _list_prefix(self, prefix: str) -> builtins.list[str]: ...

    @abstractmethod
    def _list_dir(self, prefix: str) -> tuple[builtins.list[str], builtins.list[str]]: ...

    def _list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], builtins.list[str]]:
        keys, prefixes = self._list_dir(prefix)
        infos = {name: self._get_info(prefix + name) for name in keys}
        return {name: info for name, info in infos.items() if info is not None}, prefixes

    def _get_meta(self, key: str) -> FileMeta | None:
        info = self._get_info(key)
        if info is None:
            return None
        return FileMeta(mtime_ns=None if info[1] is None else int(info[1] * 1e9))

    def _get_dir_meta(self, key: str) -> FileMeta | None:
        raise NotImplementedError

    def _set_meta(self, key: str, meta: FileMeta) -> FileMeta:
        raise NotImplementedError

    def _set_dir_meta(self, key: str, meta: FileMeta) -> FileMeta:
        raise NotImplementedError

    def _set_file_meta(self, key: str, fd: int, consume: bool, meta: FileMeta) -> int:
        size = self._set_file(key, fd, consume)
        self._set_meta(key, meta)
        return size

    def _prefix_times(self, prefix: str) -> tuple[float, float] | None:
        return None

    def _list_tree_info(self, prefix: str, max_keys: int) -> TreeListing:
        raise NotImplementedError(f"{type(self).__name__} does not list trees")

    def _list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        infos = {key: self._get_info(key) for key in self._list_prefix(prefix)}
        return {key: info[0] for key, info in infos.items() if info is not None}

    def _erase_prefix(self, prefix: str) -> None:
        keys = self._list_prefix(prefix)
        if keys:
            self._erase_many(keys)

    def _set_file(self, key: str, fd: int, consume: bool = False) -> int:
        value = read_file(fd)
        self._set_many({key: value})
        return len(value)

    def _upload_file(self, key: str, fd: int, multipart: Callable[[str, int, int, int, int], None]) -> int:
        """_set_file for object stores: a file of one part or less is one PUT, a larger
        one `multipart(key, fd, size, part size, parts in flight)` (UploadParts.plan)."""
        size = os.fstat(fd).st_size
        part, in_flight = self._uploads.plan(size)
        if size <= part:
            value = read_file(fd, 0, size)
            self._set_many({key: value})
            return len(value)
        multipart(key, fd, size, part, in_flight)
        return size

    def _copy_value(self, src: str, dst: str) -> None:
        value = self._get_many([(src, None)], COPY_THROUGH_MEMORY)[0]
        if value is None:
            raise KeyNotFoundError("no such key", src)
        self._set_many({dst: value})

    def _move(self, src: str, dst: str) -> None:
        """Copy then delete; `src` and `dst` are both keys or both prefixes ending in "/".
        Values are copied in batches of up to COPY_THROUGH_MEMORY bytes (a larger value
        alone), so moving an array holds about that much in memory, not the array; the
        sources are erased once all are copied."""
        sizes = self._list_prefix_sizes(src) if src.endswith("/") else {src: 0}
        batch: list[str] = []
        held = 0
        for key, size in sizes.items():
            if batch and held + size > COPY_THROUGH_MEMORY:
                self._copy_batch(batch, src, dst)
                batch, held = [], 0
            batch.append(key)
            held += size
        if batch:
            self._copy_batch(batch, src, dst)
        erase_moved(self, src, dst, list(sizes), Retries(self.url, delay=0.0))

    def _copy_batch(self, sources: builtins.list[str], src: str, dst: str) -> None:
        values = self._get_many([(key, None) for key in sources])
        self._set_many({dst + key[len(src) :]: v for key, v in zip(sources, values) if v is not None})

    def _check_writable(self, key: str) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"{self.url} is read-only", key)


def content_version(value: bytes | None) -> str | None:
    """A version that names a value by its content (None: no value)."""
    return None if value is None else hashlib.blake2b(value, digest_size=16).hexdigest()


def read_file(fd: int, start: int = 0, end: int | None = None) -> bytes:
    """Bytes `start:end` (default: to its end) of the open file `fd`, read at explicit
    offsets, fewer where the file ends sooner. One pread returns at most 2 GiB less 4 KiB
    (Linux's MAX_RW_COUNT): it reads on. A read that returns all at once (any part of an
    upload) is its only copy in memory."""
    if end is None:
        end = os.fstat(fd).st_size
    pieces: list[bytes] = []
    offset = start
    while offset < end:
        piece = os.pread(fd, min(end - offset, _READ_AT_ONCE), offset)
        if not piece:  # the file ends sooner
            break
        pieces.append(piece)
        offset += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


class UploadParts:
    """The parts of files being uploaded (set_file to an object store) that are held in
    memory, within `limit` bytes for all uploads together: a part is read from its file
    once its bytes are taken and given back once sent. An upload plans its parts with
    plan(); one part is always allowed, so a single upload never waits forever."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._room = threading.Condition()

    def plan(self, size: int) -> tuple[int, int]:
        """(part size, parts in flight) for a file of `size` bytes."""
        part = max(_LEAST_PART, -(-size // _MOST_PARTS))
        return part, max(1, self.limit // part)

    def take(self, nbytes: int) -> None:
        with self._room:
            self._room.wait_for(lambda: self.held == 0 or self.held + nbytes <= self.limit)
            self.held += nbytes

    def give(self, nbytes: int) -> None:
        with self._room:
            self.held -= nbytes
            self._room.notify_all()
