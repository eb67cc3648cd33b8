"""FsspecStore: the Store over an fsspec filesystem and a root path inside it (object
stores, memory, zip, HTTP; local directories are LocalStore's). Remote calls that fail
transiently are retried with exponential backoff. fsspec itself is imported by whoever
makes the filesystem: a local mount never needs it."""

from __future__ import annotations

import contextlib
import datetime
import functools
import inspect
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from ..defaults import STORE_TIMEOUT
from . import move_order, object_meta, pending_uploads, s3fs_versions
from .base import FileMeta, Store, TreeListing, read_file
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
from .retries import Retries, exhausted
from .s3_options import S3_KEY_BYTES

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

T = TypeVar("T")

# fsspec expands these as glob patterns in rm(list), so such keys are removed one by one.
_GLOB_CHARS = frozenset("*?[")
_PART_COPIES = 2  # an upload part in memory: ours, and botocore's copy of it
# CopyObject copies at most this much (S3's limit): the metadata of a larger object is
# not changed in place
COPY_OBJECT_LIMIT = 5 << 30
_HEADS_AT_ONCE = 16  # HEADs in flight for the attributes of a directory's objects
_MTIME_FIELDS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created", "date_time")


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
        self.lists_trees = isinstance(fs, MemoryFileSystem) or _is_s3(fs)
        # S3 keeps modes, owners and times as user metadata (object_meta.py)
        self.keeps_meta = _is_s3(fs)
        if _is_s3(fs):  # (_base is "bucket/prefix/")
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
            bounds = [_fsspec_bounds(requests[i][1]) for i in pending]
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

    def _get_info(self, key: str) -> tuple[int, float | None] | None:
        try:
            info = self._call(key, self.fs.info, self._path(key))
        except KeyNotFoundError:
            return None
        if info.get("type") != "file":
            return None
        size = info.get("size")
        if not isinstance(size, int) or size < 0:  # (a malformed reference: a size of any JSON)
            raise StoreError(f"{key}: the store gives no size but {size!r}", key)
        return size, _mtime(info)

    def _get_meta(self, key: str) -> FileMeta | None:
        if not self.keeps_meta:
            return super()._get_meta(key)
        head = self._head(key)
        if head is None:
            return None
        return object_meta.decode(head.get("Metadata") or {}, _ns(head.get("LastModified")))

    def get_metas(self, keys) -> dict[str, FileMeta]:
        if not self.keeps_meta or len(keys) <= 1:
            return super().get_metas(keys)
        with ThreadPoolExecutor(_HEADS_AT_ONCE, thread_name_prefix="zarrfs-head") as pool:
            metas = list(pool.map(self.get_meta, keys))
        return {key: meta for key, meta in zip(keys, metas) if meta is not None}

    def _head(self, key: str) -> dict[str, Any] | None:
        """HEAD of the object at `key` (botocore's answer); None if there is none."""
        bucket, path, _ = self.fs.split_path(self._path(key))
        try:
            return self._call(key, self.fs.call_s3, "head_object", Bucket=bucket, Key=path)
        except KeyNotFoundError:
            return None

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
        return object_meta.decode(metadata, _ns(copied))

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
        if not _is_s3(self.fs):
            return super()._get_versioned(key)
        deadline = self._retries.deadline()
        try:
            return self._retries.call(
                key, s3fs_versions.get_versioned, self.fs, self._path(key), self._retries.timeout, deadline=deadline
            )
        except KeyNotFoundError:
            return None, None

    def _set_if(self, key: str, value: bytes, version: str | None) -> bool:
        if not _is_s3(self.fs) or (version is not None and not version.startswith('"')):
            return super()._set_if(key, value, version)
        path, timeout = self._path(key), self._retries.timeout
        return self._put_conditionally(
            key,
            value,
            version,
            lambda: self._retries.call(key, s3fs_versions.put_if, self.fs, path, value, version, timeout),
        )

    def _set_file(self, key: str, fd: int, consume: bool = False) -> int:
        if not _is_s3(self.fs):
            return super()._set_file(key, fd)
        return self._upload_file(key, fd, self._multipart)

    @pending_uploads.noting
    def _multipart(
        self, key: str, fd: int, size: int, part: int, in_flight: int, metadata: dict[str, str] | None = None
    ) -> None:
        bucket, path, _ = self.fs.split_path(self._path(key))
        target = {"Bucket": bucket, "Key": path}
        extra: dict[str, Any] = {} if metadata is None else {"Metadata": metadata}
        upload = self._call(key, self.fs.call_s3, "create_multipart_upload", **target, **extra)["UploadId"]
        try:
            # each part is a call of its own (its deadline, its retries), read from the
            # file only once its bytes are taken from the uploads' memory: twice its
            # size, as botocore holds a copy of the body it sends (measured)
            in_flight = max(1, in_flight // _PART_COPIES)
            with ThreadPoolExecutor(in_flight, thread_name_prefix="zarrfs-upload") as pool:
                sent = [
                    pool.submit(self._upload_part, key, fd, target, upload, start, part)
                    for start in range(0, size, part)
                ]
                try:
                    tags = [future.result() for future in sent]
                except BaseException:
                    for future in sent:  # the parts not yet begun are not sent at all
                        future.cancel()
                    raise
            parts = [{"PartNumber": n, "ETag": tag} for n, tag in enumerate(tags, 1)]
            self._call(
                key,
                self.fs.call_s3,
                "complete_multipart_upload",
                **target,
                UploadId=upload,
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            # no object was made: the parts sent are dropped, not left to be billed
            with contextlib.suppress(Exception):
                self._call(key, self.fs.call_s3, "abort_multipart_upload", **target, UploadId=upload)
            raise
        finally:
            self.fs.invalidate_cache(self._path(key))

    def upload_target(self, key: str) -> tuple[str | None, str]:
        """(endpoint, "bucket/key") of `key`: where a note of its upload points."""
        return getattr(self.fs, "endpoint_url", None), self._path(key)

    def remove_stale_temporaries(self) -> int:
        """Abort the multipart uploads that killed mounts left below the root."""
        if not _is_s3(self.fs):
            return 0
        call = functools.partial(self._call, "", self.fs.call_s3)
        return pending_uploads.abort_left(getattr(self.fs, "endpoint_url", None), self._root, call)

    def _upload_part(self, key: str, fd: int, target: dict, upload: str, start: int, part: int) -> str:
        """Send bytes start:start+part of the file as its part; the part's ETag."""
        self._uploads.take(part * _PART_COPIES)
        try:
            body = read_file(fd, start, start + part)
            answer = self._call(
                key, self.fs.call_s3, "upload_part", **target, UploadId=upload, PartNumber=start // part + 1, Body=body
            )
            return answer["ETag"]
        finally:
            self._uploads.give(part * _PART_COPIES)

    def _erase_many(self, keys: list[str]) -> None:
        singles = keys
        if self.fs.async_impl:
            # One batched call (S3: DeleteObjects), which ignores missing keys.
            literal = [key for key in keys if not _GLOB_CHARS & set(key)]
            if literal:
                self._call(literal[0], self.fs.rm, [self._path(key) for key in literal])
            singles = [key for key in keys if _GLOB_CHARS & set(key)]
        for key in singles:
            with contextlib.suppress(KeyNotFoundError):
                self._call(key, self.fs.rm_file, self._path(key))

    def _copy_value(self, src: str, dst: str) -> None:
        # on the server where the filesystem can (s3fs: CopyObject, multipart past 5 GB)
        self._call(src, self.fs.copy, self._path(src), self._path(dst))

    def _move(self, src: str, dst: str) -> None:
        sources = self._list_prefix(src) if src.endswith("/") else [src]
        for batch in move_order.documents_last(sources):
            if batch:
                targets = [dst + key[len(src) :] for key in batch]
                self._call(src, self.fs.copy, [self._path(k) for k in batch], [self._path(k) for k in targets])
        for batch in reversed(move_order.documents_last(sources)):  # the documents first
            if batch:
                self._erase_many(batch)

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
            info = (int(size), _mtime(entry)) if isinstance(size, int) else self._get_info(key)
            if info is not None:
                files[relative] = info
        empty = frozenset(markers - _holders([*files, *markers]))
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
        return sync(self.fs.loop, _first_entries, self.fs, bucket, key + "/" if key else "", limit, timeout=timeout)

    def _list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        keys, prefixes = self._ls(prefix)
        return sorted(keys), sorted(prefixes)

    def _list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], list[str]]:
        keys, prefixes = self._ls(prefix)
        infos: dict[str, tuple[int, float | None]] = {}
        for name in sorted(keys):
            entry = keys[name]
            size = entry.get("size")
            info = (int(size), _mtime(entry)) if isinstance(size, int) else self._get_info(prefix + name)
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
    """Whether `operation` is an async filesystem's blocking method as fsspec makes them
    (it runs the coroutine under a `timeout`), or one of ours that does the same."""
    return (
        inspect.iscoroutinefunction(getattr(operation, "__wrapped__", None))
        or getattr(operation, "__func__", None) is FsspecStore._tree_entries
    )


def _fsspec_bounds(byte_range: ByteRange | None) -> tuple[int | None, int | None]:
    """(start, end) for fsspec's cat_file: a negative start counts from the end."""
    if byte_range is None:
        return None, None
    if byte_range.suffix_length is not None:
        return -byte_range.suffix_length, None
    return byte_range.start, byte_range.end


def _holders(names: list[str]) -> set[str]:
    """Every directory that holds one of `names` (relative paths), at any depth."""
    holders: set[str] = set()
    for name in names:
        directory = name.rpartition("/")[0]
        while directory and directory not in holders:
            holders.add(directory)
            directory = directory.rpartition("/")[0]
    return holders


def _is_s3(fs: AbstractFileSystem) -> bool:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    return "s3" in protocols and hasattr(fs, "_iterdir")


async def _first_entries(fs: AbstractFileSystem, bucket: str, prefix: str, limit: int) -> list[dict[str, Any]]:
    """s3fs's entries of the first `limit` keys under `prefix` (ListObjectsV2 without a
    delimiter, page after page, stopping at the page that holds the limit)."""
    entries: list[dict[str, Any]] = []
    listing = fs._iterdir(bucket, delimiter="", prefix=prefix)
    try:
        async for entry in listing:
            entries.append(entry)
            if len(entries) >= limit:
                break
    finally:
        await listing.aclose()
    return entries


def _mtime(info: dict[str, Any]) -> float | None:
    """Modification time in POSIX seconds from whichever field this filesystem reports."""
    for field in _MTIME_FIELDS:
        value = info.get(field)
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, tuple) and len(value) >= 6:  # zip: (Y, M, D, h, m, s)
            return datetime.datetime(*value[:6]).timestamp()
        if isinstance(value, str):
            try:
                return datetime.datetime.fromisoformat(value).timestamp()
            except ValueError:
                continue
    return None


def _ns(when: datetime.datetime | None) -> int | None:
    if when is None:
        return None
    delta = when - datetime.datetime(1970, 1, 1, tzinfo=when.tzinfo or datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
