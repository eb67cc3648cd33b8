"""FsspecStore: the Store over an fsspec filesystem and a root path inside it (object
stores, memory, zip, HTTP; local directories are LocalStore's). Remote calls that fail
transiently are retried with exponential backoff. fsspec itself is imported by whoever
makes the filesystem: a local mount never needs it."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from ..defaults import STORE_TIMEOUT
from . import fsspec_info, object_meta, pending_uploads, s3fs_deletes, s3fs_uploads, s3fs_versions
from .base import Store
from .byte_range import ByteRange
from .errors import (
    KeyNotFoundError,
    StoreError,
    StoreUnavailableError,
    ValueTooLargeError,
    is_unsatisfiable_range,
    translate_error,
)
from .keys import is_valid_key
from .moves import documents_last, erase_moved
from .records import FileMeta, TreeListing
from .retries import Retries, exhausted
from .s3_options import S3_KEY_BYTES
from .uploads import read_file

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

T = TypeVar("T")

# fsspec expands these as glob patterns in rm(list), so such keys are removed one by one.
_GLOB_CHARS = frozenset("*?[")
# CopyObject copies at most this much (S3's limit): the metadata of a larger object is
# not changed in place
COPY_OBJECT_LIMIT = 5 << 30
_HEADS_AT_ONCE = 16  # HEADs in flight for the attributes of a directory's objects


class FsspecStore(Store):
    """A Store whose keys are the paths under `root` in the fsspec filesystem `fs`.

    `attempts` bounds the tries of an operation that fails with StoreUnavailableError;
    the n-th retry waits `retry_delay * 2**(n-1)` seconds (no wait on local and memory).
    """

    def __init__(
        self,
        fs: AbstractFileSystem,
        root: str,
        *,
        url: str | None = None,
        read_only: bool = False,
        attempts: int = 3,
        retry_delay: float = 0.1,
        timeout: float = STORE_TIMEOUT,
    ) -> None:
        self.fs = fs
        root = fs._strip_protocol(root) if root else ""
        # Keys are appended to _base; _root is the directory that holds them.
        self._base = root.rstrip("/") + "/" if root else ""
        self._root = self._base.rstrip("/") or self._base
        from fsspec.implementations.local import LocalFileSystem
        from fsspec.implementations.memory import MemoryFileSystem

        in_process = isinstance(fs, (LocalFileSystem, MemoryFileSystem))
        super().__init__(url or fs.unstrip_protocol(self._root), read_only)
        # S3 lists a prefix without a delimiter in pages of 1,000 keys; memory has no
        # requests to save. Other filesystems walk directory by directory (find).
        self.lists_trees = isinstance(fs, MemoryFileSystem) or fsspec_info.is_s3(fs)
        # S3 keeps modes, owners and times as user metadata (object_meta.py)
        self.keeps_meta = fsspec_info.is_s3(fs)
        if fsspec_info.is_s3(fs):  # (_base is "bucket/prefix/")
            self.max_key_bytes = S3_KEY_BYTES - len(self._base.partition("/")[2].encode())
        self._retries = Retries(self.url, attempts=attempts, delay=0.0 if in_process else retry_delay, timeout=timeout)

    # Reading

    def _get_many(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> list[bytes | None]:
        if max_size is not None:
            # No HEAD per read: ask for one byte more than allowed, then look at the length.
            capped: list[tuple[str, ByteRange | None]] = [
                (key, (rng or ByteRange()).capped(max_size)) for key, rng in requests
            ]
            values = self._get_many(capped)
            for (key, _), value in zip(requests, values):
                if value is not None and len(value) > max_size:
                    raise ValueTooLargeError(f"more than the {max_size} bytes the reader can take; not read", key)
            return values
        results: list[bytes | None] = [None] * len(requests)
        # Empty ranges and ranges past the end: the answer is b"" or None, by existence.
        empty = [rng is not None and rng.is_empty for _, rng in requests]
        by_existence = [i for i, is_empty in enumerate(empty) if is_empty]
        pending = [i for i, is_empty in enumerate(empty) if not is_empty]
        deadline = self._retries.deadline()
        for attempt in range(self._retries.attempts):
            if not pending:
                break
            bounds = [fsspec_info.fsspec_bounds(requests[i][1]) for i in pending]
            outcomes = self._call(
                requests[pending[0]][0],
                self.fs.cat_ranges,
                [self._path(requests[i][0]) for i in pending],
                [start for start, _ in bounds],
                [end for _, end in bounds],
                on_error="return",
                deadline=deadline,
            )
            retry = []
            for i, outcome in zip(pending, outcomes):
                if not isinstance(outcome, BaseException):
                    results[i] = bytes(outcome)
                elif isinstance(outcome, (IsADirectoryError, NotADirectoryError)):
                    continue
                elif is_unsatisfiable_range(outcome):
                    by_existence.append(i)
                else:
                    error = translate_error(outcome, requests[i][0])
                    if isinstance(error, KeyNotFoundError):
                        continue
                    if not isinstance(error, StoreUnavailableError):
                        raise error from outcome
                    if self._retries.gives_up(attempt + 1, deadline):
                        raise exhausted(error, attempt + 1) from outcome
                    retry.append(i)
            pending = retry
            if pending:
                self._retries.backoff(attempt)
        for i in by_existence:
            if self._get_info(requests[i][0]) is not None:
                results[i] = b""
        return results

    def _file_info(self, key: str) -> dict[str, Any] | None:
        """fsspec's info of the value at `key`; None where none is (or a directory is)."""
        try:
            info: dict[str, Any] = self._call(key, self.fs.info, self._path(key))
        except KeyNotFoundError:
            return None
        return info if info.get("type") == "file" else None

    def _get_info(self, key: str) -> tuple[int, float | None] | None:
        info = self._file_info(key)
        if info is None:
            return None
        size = info.get("size")
        if not isinstance(size, int) or size < 0:  # (a malformed reference: a size of any JSON)
            raise StoreError(f"{key}: the store gives no size but {size!r}", key)
        return size, fsspec_info.mtime(info)

    def _get_token(self, key: str) -> str | None:
        info = self._file_info(key)
        return None if info is None else fsspec_info.token(info)

    def _get_meta(self, key: str) -> FileMeta | None:
        if not self.keeps_meta:
            return super()._get_meta(key)
        head = self._head(key)
        if head is None:
            return None
        return object_meta.decode(head.get("Metadata") or {}, fsspec_info.ns(head.get("LastModified")))

    def get_metas(self, keys: Sequence[str]) -> dict[str, FileMeta]:
        if not self.keeps_meta or len(keys) <= 1:
            return super().get_metas(keys)
        with ThreadPoolExecutor(_HEADS_AT_ONCE, thread_name_prefix="zarrfs-head") as pool:
            metas = list(pool.map(self.get_meta, keys))
        return {key: meta for key, meta in zip(keys, metas) if meta is not None}

    def _head(self, key: str) -> dict[str, Any] | None:
        """HEAD of the object at `key` (botocore's answer); None if there is none."""
        bucket, path, _ = self.fs.split_path(self._path(key))
        try:
            head: dict[str, Any] = self._call(key, self.fs.call_s3, "head_object", Bucket=bucket, Key=path)
        except KeyNotFoundError:
            return None
        return head

    # Writing

    def _set_meta(self, key: str, meta: FileMeta) -> FileMeta:
        """CopyObject of the object onto itself with its metadata replaced (REPLACE keeps
        nothing by itself: the fields HEAD gave, and the Content-Type, are sent again)."""
        head = self._head(key)
        if head is None:
            raise KeyNotFoundError("no such key", key)
        if int(head.get("ContentLength", 0)) > COPY_OBJECT_LIMIT:
            raise ValueTooLargeError(
                f"the attributes of an object over {COPY_OBJECT_LIMIT} bytes cannot be changed in place (CopyObject)",
                key,
            )
        bucket, path, _ = self.fs.split_path(self._path(key))
        extra = {"ContentType": head["ContentType"]} if head.get("ContentType") else {}
        metadata = object_meta.merged(head.get("Metadata") or {}, meta)
        answer = self._call(
            key,
            self.fs.call_s3,
            "copy_object",
            Bucket=bucket,
            Key=path,
            CopySource={"Bucket": bucket, "Key": path},
            MetadataDirective="REPLACE",
            Metadata=metadata,
            **extra,
        )
        self.fs.invalidate_cache(self._path(key))
        copied = (answer.get("CopyObjectResult") or {}).get("LastModified") or head.get("LastModified")
        return object_meta.decode(metadata, fsspec_info.ns(copied))

    def _set_file_meta(self, key: str, fd: int, consume: bool, meta: FileMeta) -> int:
        metadata = object_meta.encode(meta)
        size = os.fstat(fd).st_size
        part, _ = self._uploads.plan(size)
        if size > part:
            return self._upload_file(key, fd, functools.partial(self._multipart, metadata=metadata))
        bucket, path, _ = self.fs.split_path(self._path(key))
        self._call(
            key, self.fs.call_s3, "put_object", Bucket=bucket, Key=path, Body=read_file(fd, 0, size), Metadata=metadata
        )
        self.fs.invalidate_cache(self._path(key))
        return size

    def _set_many(self, items: dict[str, bytes]) -> None:
        paths = {self._path(key): value for key, value in items.items()}
        # (botocore's read timeout never starts on a PUT whose body the endpoint does not
        # take, aiohttp waiting for "100 Continue": _call cancels it at the deadline)
        self._call(next(iter(items)), self.fs.pipe, paths)

    def _get_versioned(self, key: str) -> tuple[bytes | None, str | None]:
        if not fsspec_info.is_s3(self.fs):
            return super()._get_versioned(key)
        deadline = self._retries.deadline()
        try:
            return self._retries.call(
                key, s3fs_versions.get_versioned, self.fs, self._path(key), self._retries.timeout, deadline=deadline
            )
        except KeyNotFoundError:
            return None, None

    def _set_if(self, key: str, value: bytes, version: str | None) -> bool:
        if not fsspec_info.is_s3(self.fs) or (version is not None and not version.startswith('"')):
            return super()._set_if(key, value, version)
        path, timeout = self._path(key), self._retries.timeout
        return self._put_conditionally(
            key,
            value,
            version,
            lambda: self._retries.call(key, s3fs_versions.put_if, self.fs, path, value, version, timeout),
        )

    def _set_file(self, key: str, fd: int, consume: bool = False) -> int:
        if not fsspec_info.is_s3(self.fs):
            return super()._set_file(key, fd)
        return self._upload_file(key, fd, self._multipart)

    @pending_uploads.noting
    def _multipart(
        self, key: str, fd: int, size: int, part: int, in_flight: int, metadata: dict[str, str] | None = None
    ) -> None:
        s3fs_uploads.multipart(
            self._call, self.fs, self._path(key), key, fd, (size, part, in_flight), self._uploads, metadata
        )

    def upload_target(self, key: str) -> tuple[str | None, str]:
        return s3fs_uploads.target(self.fs, self._path(key))

    def remove_stale_temporaries(self) -> int:
        return s3fs_uploads.abort_left(self.fs, self._root, functools.partial(self._call, "", self.fs.call_s3))

    def _erase_many(self, keys: list[str]) -> None:
        singles = keys
        if self.fs.async_impl:
            literal = [key for key in keys if not _GLOB_CHARS & set(key)]
            if literal:
                paths, call = [self._path(key) for key in literal], functools.partial(self._call, literal[0])
                s3fs_deletes.remove(self.fs, paths, call)  # one call; missing keys are no error
            singles = [key for key in keys if _GLOB_CHARS & set(key)]
        for key in singles:
            with contextlib.suppress(KeyNotFoundError):
                self._call(key, self.fs.rm_file, self._path(key))

    def _copy_value(self, src: str, dst: str) -> None:  # on the server (s3fs: CopyObject, multipart past 5 GB)
        self._call(src, self.fs.copy, self._path(src), self._path(dst))

    def _move(self, src: str, dst: str) -> None:
        sources = self._list_prefix(src) if src.endswith("/") else [src]
        for batch in filter(None, documents_last(sources)):
            moved = [self._path(dst + k[len(src) :]) for k in batch]
            self._call(src, self.fs.copy, [self._path(k) for k in batch], moved)
        erase_moved(self, src, dst, sources, self._retries)

    # Listing

    def _list_prefix(self, prefix: str) -> list[str]:
        try:
            names = self._call(prefix, self.fs.find, self._dir(prefix), withdirs=False)
        except KeyNotFoundError:
            return []
        keys = {self._relative(name) for name in names}
        return sorted(k for k in keys if k and k.startswith(prefix) and is_valid_key(k))

    def _list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        try:
            entries = self._call(prefix, self.fs.find, self._dir(prefix), withdirs=False, detail=True)
        except KeyNotFoundError:
            return {}
        sizes = {}
        for name, entry in entries.items():
            key = self._relative(name)
            if key and key.startswith(prefix) and is_valid_key(key):
                size = entry.get("size")
                sizes[key] = int(size) if isinstance(size, int) else (self._get_info(key) or (0,))[0]
        return dict(sorted(sizes.items()))

    def _list_tree_info(self, prefix: str, max_keys: int) -> TreeListing:
        if not self.lists_trees:
            return super()._list_tree_info(prefix, max_keys)
        try:
            entries = self._call(prefix, self._tree_entries, prefix, max_keys + 1)
        except KeyNotFoundError:
            entries = []
        files: dict[str, tuple[int, float | None]] = {}
        markers: set[str] = set()
        for entry in entries:
            name = entry["name"]
            key = self._relative(name.rstrip("/"))
            if not key or not key.startswith(prefix) or not is_valid_key(key):
                continue
            relative = key[len(prefix) :]
            if entry.get("type") == "directory" or name.endswith("/"):
                markers.add(relative)
                continue
            size = entry.get("size")
            info = (int(size), fsspec_info.mtime(entry)) if isinstance(size, int) else self._get_info(key)
            if info is not None:
                files[relative] = info
        empty = frozenset(markers - fsspec_info.holders([*files, *markers]))
        objects = sum(entry.get("type") != "directory" for entry in entries)
        return TreeListing(files, empty, complete=objects <= max_keys)

    def _tree_entries(self, prefix: str, limit: int, timeout: float | None = None) -> list[dict[str, Any]]:
        """fsspec's entries below `prefix` in key order, up to the `limit`-th object
        (directory entries too, where the filesystem has them), within `timeout` seconds."""
        from fsspec.asyn import sync
        from fsspec.implementations.memory import MemoryFileSystem

        if isinstance(self.fs, MemoryFileSystem):
            found = self.fs.find(self._dir(prefix), withdirs=True, detail=True)
            entries, objects = [], 0
            for name in sorted(found):
                entries.append(found[name])
                objects += found[name].get("type") != "directory"
                if objects >= limit:
                    break
            return entries
        bucket, key, _ = self.fs.split_path(self._dir(prefix))
        first: list[dict[str, Any]] = sync(
            self.fs.loop, fsspec_info.first_entries, self.fs, bucket, key + "/" if key else "", limit, timeout=timeout
        )
        return first

    def _list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        keys, prefixes = self._ls(prefix)
        return sorted(keys), sorted(prefixes)

    def _list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], list[str]]:
        keys, prefixes = self._ls(prefix)
        infos: dict[str, tuple[int, float | None]] = {}
        for name in sorted(keys):
            entry = keys[name]
            size = entry.get("size")
            info = (int(size), fsspec_info.mtime(entry)) if isinstance(size, int) else self._get_info(prefix + name)
            if info is not None:
                infos[name] = info
        return infos, sorted(prefixes)

    def _ls(self, prefix: str) -> tuple[dict[str, dict[str, Any]], set[str]]:
        """fsspec's entries for the keys directly under `prefix` by name, and the names of
        the prefixes directly under it."""
        try:
            entries = self._call(prefix, self.fs.ls, self._dir(prefix), detail=True)
        except KeyNotFoundError:
            return {}, set()
        keys: dict[str, dict[str, Any]] = {}
        prefixes: set[str] = set()
        for entry in entries:
            relative = self._relative(entry["name"].rstrip("/"))
            if not relative or not relative.startswith(prefix) or not is_valid_key(relative):
                continue
            name = relative[len(prefix) :]
            if not name or "/" in name:
                continue
            if entry.get("type") == "directory":
                prefixes.add(name)
            elif entry.get("type") == "file":
                keys[name] = entry
        return keys, prefixes

    # Paths and retries

    def _path(self, key: str) -> str:
        return self._base + key

    def _dir(self, key_or_prefix: str) -> str:
        """The filesystem path of a key, or of a prefix without its trailing slash."""
        path = self._base + key_or_prefix
        return path.rstrip("/") or path[:1]

    def _relative(self, name: str) -> str | None:
        """The key for a path that fsspec returned, None if it lies outside the root."""
        if not self._base:
            return name.lstrip("/")
        return name[len(self._base) :] if name.startswith(self._base) else None

    def _call(
        self, key: str, operation: Callable[..., T], *args: Any, deadline: float | None = None, **kwargs: Any
    ) -> T:
        """Run an fsspec operation, retrying transient failures within the deadline (the
        timeout from now by default), raising StoreError. On an async filesystem (S3,
        HTTP, GCS) each attempt is also cut at the deadline: a socket's read timeout never
        ends a response that trickles in, nor an answer that never starts (aiohttp's own
        bound is 300 s)."""
        deadline = self._retries.deadline() if deadline is None else deadline
        if self.fs.async_impl and _takes_timeout(operation):
            bounded = operation

            def operation(*args: Any, **kwargs: Any) -> T:
                # (fsspec takes a timeout of 0 for none at all)
                return bounded(*args, timeout=max(deadline - time.monotonic(), 0.001), **kwargs)

        return self._retries.call(key, operation, *args, deadline=deadline, **kwargs)


def _takes_timeout(operation: Callable[..., Any]) -> bool:
    """Whether `operation` runs a coroutine under a `timeout` (fsspec's sync wrappers, ours)."""
    return (
        inspect.iscoroutinefunction(getattr(operation, "__wrapped__", None))
        or getattr(operation, "__func__", None) is FsspecStore._tree_entries
    )
