"""The abstract Store: a blocking key/value interface in the terms of the Zarr abstract
store (get, set, erase, list, partial values). The public methods validate keys and
enforce read-only mode once, here; implementations fill in the `_` primitives."""

from __future__ import annotations

import builtins
import functools
import os
import threading
from abc import abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, overload

from .byte_range import ByteRange
from .counting import counted
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
from .listing import StoreListing
from .moves import COPY_THROUGH_MEMORY, move_through_memory
from .records import FileMeta, content_version
from .uploads import UploadParts, read_file
from .urls import is_remote

_LOCK_STRIPES = 64


class Store(StoreListing):
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
    # the longest key below the root, in UTF-8 bytes (S3: 1,024 less its prefix); None: a name's
    max_key_bytes: int | None = None
    # chunks are stored only below an array document already there (Icechunk, whose commit publishes all at once)
    chunks_need_their_node: bool = False

    def __init__(self, url: str, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only
        self._key_locks = tuple(threading.Lock() for _ in range(_LOCK_STRIPES))
        # calls by kind (ints) and their seconds (floats)
        self._counts: defaultdict[str, float] = defaultdict(int)
        self._counts_lock = threading.Lock()

    def request_stats(self) -> dict[str, float]:
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

    def keep_empty_directories(self) -> None:
        """Where removals and renames remove the directories they leave empty (a local
        store), stop doing so: a --raw mount keeps them, with their modes and times, as a
        filesystem does. Elsewhere nothing changes (an object store holds no directory)."""
        return  # (a no-op unless a store has directories)

    # Reading

    @counted("get")
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

    @counted("get")
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

    @counted("head")
    def get_info(self, key: str) -> tuple[int, float | None] | None:
        """(size, mtime as POSIX seconds or None) of the value at `key`; None if missing."""
        return self._get_info(validate_key(key))

    @counted("head")
    def get_token(self, key: str) -> str | None:
        """A token that changes whenever the value at `key` is replaced (an object's ETag;
        a local file's inode, size and times); None if there is no value. One HEAD on an
        object store, an lstat on a local one; what a cache revalidates its copy with."""
        return self._get_token(validate_key(key))

    @counted("head")
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

    @counted("set_meta")
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

    @counted("set")
    def set_values(self, items: Mapping[str, bytes]) -> None:
        """Store many values in one batch; each key is replaced atomically."""
        for key in items:
            self._check_writable(validate_key(key))
        if items:
            self._set_many({key: bytes(value) for key, value in items.items()})

    @counted("set")
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

    @counted("get")
    def get_versioned(self, key: str, *, max_size: int | None = None) -> tuple[bytes | None, str | None]:
        """The value at `key` (None if missing) and its version, read together. With
        `max_size`, a larger value raises ValueTooLargeError, as in get()."""
        value, version = self._get_versioned(validate_key(key))
        if max_size is not None and value is not None and len(value) > max_size:
            raise ValueTooLargeError(f"more than the {max_size} bytes the reader can take", key)
        return value, version

    @counted("set")
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

    @counted("set")
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

    @counted("erase")
    def erase_values(self, keys: Iterable[str]) -> None:
        """Remove many values in one batch; missing keys are skipped."""
        keys = list(keys)
        for key in keys:
            self._check_writable(validate_key(key))
        if keys:
            self._erase_many(keys)

    @counted("erase")
    def erase_prefix(self, prefix: str) -> None:
        """Remove every value under `prefix` ("" erases the whole store)."""
        self._check_writable(validate_prefix(prefix))
        self._erase_prefix(prefix)

    @counted("copy")
    def copy(self, src: str, dst: str) -> None:
        """Store a copy of the value at `src` at `dst`, replacing any value there. Stores
        that can copy by themselves (a local directory: the kernel copies; S3: CopyObject)
        hold none of it in memory; others copy through memory, up to COPY_THROUGH_MEMORY
        bytes (ValueTooLargeError beyond, nothing read). KeyNotFoundError if `src` holds
        no value."""
        validate_key(src)
        self._check_writable(validate_key(dst))
        self._copy_value(src, dst)

    @counted("move")
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
        """Copy then delete, through memory; `src` and `dst` are both keys or both
        prefixes ending in "/" (moves.move_through_memory)."""
        move_through_memory(self, src, dst)

    def _check_writable(self, key: str) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"{self.url} is read-only", key)
