"""ObstoreStore: the Store over an S3 bucket through obstore (Rust's object_store). Its
calls block in Rust with the GIL released, so the caller's threads overlap their requests
with no event-loop thread between them; transient failures are retried within each call's
deadline by the same policy as FsspecStore's."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..defaults import STORE_TIMEOUT
from . import object_meta, pending_uploads
from .base import Store
from .byte_range import ByteRange
from .errors import KeyNotFoundError, StoreError, ValueTooLargeError, is_unsatisfiable_range
from .keys import is_valid_key
from .moves import documents_last, erase_moved
from .records import FileMeta, TreeListing, content_version
from .retries import Retries
from .s3_options import S3_CONNECTIONS, S3_KEY_BYTES, ObstoreSettings
from .uploads import read_file

if TYPE_CHECKING:
    from obstore import Bytes, GetOptions, ObjectMeta, OffsetRange, SuffixRange

T = TypeVar("T")
V = TypeVar("V", bytes, memoryview)  # the form a fetched value is given
log = logging.getLogger(__name__)

# s3fs's choice: one PUT up to 100 MiB, above that a multipart upload of 50 MiB parts
_MULTIPART_ABOVE = 100 << 20
_PART_SIZE = 50 << 20
# obstore's message when a server ignored the Range header and sent the whole value
_NOT_PARTIAL = "non-partial response"


class ObstoreStore(Store):
    """A Store whose keys are the objects under `prefix` in S3 bucket `bucket`.

    Requests of one batch (get_partial_values, set_values, a move) run at once on a pool
    of up to 64 threads; a batch of one runs in the caller's thread. `attempts`,
    `retry_delay` and `timeout` are FsspecStore's. obstore refuses a whole listing that
    meets a key it cannot represent (an empty segment, `.`, `..`, a control character);
    such a listing is made by the Store that `lister` opens (s3fs), which skips those that
    are no keys (keys.py). A key with a control character is one (S3 takes it, and other
    tools make it): every request that names one goes through that Store too.
    """

    lists_trees = True
    keeps_meta = True  # as user metadata (object_meta.py); HEADs and copies through `lister`

    def __init__(
        self,
        bucket: str,
        prefix: str,
        settings: ObstoreSettings,
        *,
        url: str | None = None,
        read_only: bool = False,
        attempts: int = 3,
        retry_delay: float = 0.1,
        timeout: float = STORE_TIMEOUT,
        lister: Callable[[], Store] | None = None,
    ) -> None:
        # imported here: obstore is optional (the s3 extra), and the store package is not
        import obstore
        from obstore.store import S3Store

        self._obstore = obstore
        prefix = prefix.strip("/")
        self._s3 = S3Store(
            bucket,
            prefix=prefix or None,
            config=settings.config,
            client_options=settings.client_options,
            retry_config={"max_retries": 0},  # Retries below bound the call as a whole
            credential_provider=settings.credential_provider,
        )
        super().__init__(url or f"s3://{bucket}/{prefix}".rstrip("/"), read_only)
        self.max_key_bytes = S3_KEY_BYTES - len(f"{prefix}/".encode()) if prefix else S3_KEY_BYTES
        self._retries = Retries(self.url, attempts=attempts, delay=retry_delay, timeout=timeout)
        self._pool: ThreadPoolExecutor | None = None
        self._open_lister = lister
        self._lister: Store | None = None
        self._lazy_lock = threading.Lock()

    # Reading

    def _get_many(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> list[bytes | None]:
        return self._read_many(requests, max_size, bytes)

    def _get_many_buffers(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> list[bytes | memoryview | None]:
        """Values as memoryviews of obstore's own buffers: copying one into `bytes` holds
        the GIL for about 2 ms per 4 MB, which the FUSE thread waits out."""
        return self._read_many(requests, max_size, memoryview)

    def _read_many(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None, form: Callable[[Bytes], V]
    ) -> list[V | bytes | None]:
        """The values `requests` ask for (see _get_many), each one fetched as `form` makes
        it of obstore's buffer."""
        deadline = self._retries.deadline()
        if max_size is not None:
            # No HEAD per read: ask for one byte more than allowed, then look at the length.
            requests = [(key, (rng or ByteRange()).capped(max_size)) for key, rng in requests]
        values = self._each([functools.partial(self._get, key, rng, deadline, form) for key, rng in requests])
        for (key, _), value in zip(requests, values):
            if max_size is not None and value is not None and len(value) > max_size:
                raise ValueTooLargeError(f"more than the {max_size} bytes the reader can take; not read", key)
        return values

    def _get(
        self, key: str, byte_range: ByteRange | None, deadline: float, form: Callable[[Bytes], V]
    ) -> V | bytes | None:
        """One value or range of it (fetched, as `form` makes it; empty, as bytes); None if
        the key holds no value."""
        if not _nameable(key):
            return self._meta_store()._get_many([(key, byte_range)])[0]
        if byte_range is not None and byte_range.is_empty:
            return None if self._get_info(key) is None else b""
        try:
            value: V = self._retries.call(key, self._fetch, key, _obstore_range(byte_range), form, deadline=deadline)
            return value
        except KeyNotFoundError:
            return None
        except StoreError as error:
            cause = error.__cause__
            if cause is not None and is_unsatisfiable_range(cause):  # starts at or past the end
                return None if self._get_info(key) is None else b""
            if cause is not None and _NOT_PARTIAL in str(cause) and byte_range is not None:
                # The server sent the whole value (S3 does for a suffix of an empty one)
                # and obstore refused it; take the selection from the whole value.
                whole = self._get(key, None, deadline, bytes)
                return None if whole is None else whole[slice(*byte_range.resolve(len(whole)))]
            raise

    def _fetch(
        self, key: str, obstore_range: tuple[int, int] | OffsetRange | SuffixRange | None, form: Callable[[Bytes], V]
    ) -> V:
        options: GetOptions | None = None if obstore_range is None else {"range": obstore_range}
        return form(self._obstore.get(self._s3, key, options=options).bytes())

    def _get_info(self, key: str) -> tuple[int, float | None] | None:
        if not _nameable(key):
            return self._meta_store()._get_info(key)
        try:
            meta = self._call(key, self._obstore.head, self._s3, key)
        except KeyNotFoundError:
            return None
        return int(meta["size"]), meta["last_modified"].timestamp()

    def _get_token(self, key: str) -> str | None:
        if not _nameable(key):
            return self._meta_store()._get_token(key)
        try:
            meta = self._call(key, self._obstore.head, self._s3, key)
        except KeyNotFoundError:
            return None
        return meta.get("e_tag") or meta.get("version") or f"{meta['size']}:{meta['last_modified'].timestamp()!r}"

    def _get_meta(self, key: str) -> FileMeta | None:
        # obstore's HEAD gives no user metadata: s3fs's does
        return self._meta_store()._get_meta(key)

    def get_metas(self, keys: Sequence[str]) -> dict[str, FileMeta]:
        metas = self._each([functools.partial(self.get_meta, key) for key in keys])
        return {key: meta for key, meta in zip(keys, metas) if meta is not None}

    def _meta_store(self) -> Store:
        """The s3fs Store: for user metadata, and for the keys obstore cannot name."""
        with self._lazy_lock:
            if self._lister is None:
                if self._open_lister is None:
                    raise StoreError("no S3 client to keep attributes with", self.url)
                self._lister = self._open_lister()
            return self._lister

    # Writing

    def _set_meta(self, key: str, meta: FileMeta) -> FileMeta:
        return self._meta_store()._set_meta(key, meta)

    def _set_file_meta(self, key: str, fd: int, consume: bool, meta: FileMeta) -> int:
        if not _nameable(key):
            return self._meta_store()._set_file_meta(key, fd, consume, meta)
        attributes = object_meta.encode(meta)
        size = os.fstat(fd).st_size
        part, in_flight = self._uploads.plan(size)
        if size <= part:
            self._retries.call(key, self._put, key, read_file(fd, 0, size), attributes)
        else:
            self._multipart(key, fd, size, part, in_flight, attributes)
        return size

    def _set_many(self, items: dict[str, bytes]) -> None:
        unnamed = {key: value for key, value in items.items() if not _nameable(key)}
        if unnamed:
            self._meta_store()._set_many(unnamed)
            items = {key: value for key, value in items.items() if key not in unnamed}
        deadline = self._retries.deadline()
        self._each(
            [
                functools.partial(self._retries.call, key, self._put, key, value, deadline=deadline)
                for key, value in items.items()
            ]
        )

    def _set_file(self, key: str, fd: int, consume: bool = False) -> int:
        if not _nameable(key):
            return self._meta_store()._set_file(key, fd, consume)
        return self._upload_file(key, fd, self._multipart)

    @pending_uploads.noting
    def _multipart(
        self, key: str, fd: int, size: int, part: int, in_flight: int, attributes: dict[str, str] | None = None
    ) -> None:
        # obstore reads `part` bytes at a time and sends up to `in_flight` parts at once, held
        # in the uploads' memory; a failed upload is retried whole, until the deadline.
        in_flight = max(1, in_flight - 1)  # and one part being read
        held = part * (in_flight + 1)
        self._uploads.take(held)
        try:
            self._retries.call(key, self._put_file, key, fd, part, in_flight, attributes)
        finally:
            self._uploads.give(held)

    def upload_target(self, key: str) -> tuple[str | None, str]:
        return cast("tuple[str | None, str]", self._meta_store().upload_target(key))  # type: ignore[attr-defined]

    def remove_stale_temporaries(self) -> int:  # (no S3 client made where no note is stale)
        return self._meta_store().remove_stale_temporaries() if pending_uploads.stale_notes() else 0  # type: ignore[attr-defined]

    def _put_file(self, key: str, fd: int, part: int, in_flight: int, attributes: dict[str, str] | None = None) -> None:
        # a descriptor of its own, whose offset starts at 0 and moves as obstore reads
        with open(f"/proc/self/fd/{fd}", "rb", buffering=0) as file:
            self._obstore.put(
                self._s3,
                key,
                file,
                use_multipart=True,
                chunk_size=part,
                max_concurrency=in_flight,
                attributes=attributes,
            )

    def _put(self, key: str, value: bytes, attributes: dict[str, str] | None = None) -> None:
        self._obstore.put(
            self._s3,
            key,
            value,
            use_multipart=len(value) > _MULTIPART_ABOVE,
            chunk_size=_PART_SIZE,
            attributes=attributes,
        )

    def _get_versioned(self, key: str) -> tuple[bytes | None, str | None]:
        if not _nameable(key):
            return self._meta_store()._get_versioned(key)
        try:
            value, etag = self._call(key, self._fetch_versioned, key)
        except KeyNotFoundError:
            return None, None
        return value, etag if etag is not None else content_version(value)

    def _fetch_versioned(self, key: str) -> tuple[bytes, str | None]:
        result = self._obstore.get(self._s3, key)
        return bytes(result.bytes()), result.meta.get("e_tag")

    def _set_if(self, key: str, value: bytes, version: str | None) -> bool:
        # PUT with If-None-Match: * (create) or If-Match: ETAG (update); a version that is
        # no ETag (a server that gives none) was read by content, and is written so
        if not _nameable(key) or (version is not None and not version.startswith('"')):
            return super()._set_if(key, value, version)
        mode: Any = "create" if version is None else {"e_tag": version}
        return self._put_conditionally(
            key, value, version, lambda: self._call(key, self._put_conditional, key, value, mode)
        )

    def _put_conditional(self, key: str, value: bytes, mode: Any) -> None:
        self._obstore.put(self._s3, key, value, mode=mode)

    def _erase_many(self, keys: list[str]) -> None:
        unnamed = [key for key in keys if not _nameable(key)]
        if unnamed:
            self._meta_store()._erase_many(unnamed)
            keys = [key for key in keys if _nameable(key)]
        if keys:  # DeleteObjects, up to 1,000 keys a request; missing keys are no error
            self._call(keys[0], self._obstore.delete, self._s3, keys)

    def _copy_value(self, src: str, dst: str) -> None:
        if not _nameable(src, dst):
            return self._meta_store()._copy_value(src, dst)
        self._call(src, self._obstore.copy, self._s3, src, dst)  # CopyObject: on the server

    def _move(self, src: str, dst: str) -> None:
        sources = self._list_prefix(src) if src.endswith("/") else [src]
        deadline = self._retries.deadline()
        for batch in documents_last(sources):  # (a move cut short leaves no document over missing chunks)
            self._each([functools.partial(self._copy, key, dst + key[len(src) :], deadline) for key in batch])
        erase_moved(self, src, dst, sources, self._retries)

    def _copy(self, key: str, target: str, deadline: float) -> None:
        with contextlib.suppress(KeyNotFoundError):  # gone since it was listed
            if not _nameable(key, target):
                self._meta_store()._copy_value(key, target)
            else:
                self._retries.call(key, self._obstore.copy, self._s3, key, target, deadline=deadline)

    # Listing

    def _list_prefix(self, prefix: str) -> list[str]:
        return sorted(self._list_prefix_sizes(prefix))

    def _list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        if not _nameable(prefix):
            return self._meta_store()._list_prefix_sizes(prefix)
        try:
            metas = self._call(prefix, self._list_all, prefix)
        except StoreError as error:
            if not _refused_path(error):
                raise
            return self._fallback(error)._list_prefix_sizes(prefix)
        sizes = {meta["path"]: int(meta["size"]) for meta in metas}
        # obstore gives a folder marker (an empty object "g/", as the S3 console makes
        # them) as key "g": one with keys below it is dropped, as s3fs drops them.
        parents = {key[:i] for key in sizes for i, c in enumerate(key) if c == "/"}
        return {
            key: sizes[key]
            for key in sorted(sizes)
            if key.startswith(prefix) and is_valid_key(key) and not (sizes[key] == 0 and key in parents)
        }

    def _list_all(self, prefix: str, limit: int | None = None) -> list[ObjectMeta]:
        """Every object below `prefix` (ListObjectsV2 without a delimiter, 1,000 a page),
        or the first pages of them, up to the one that holds the `limit`-th."""
        metas: list[ObjectMeta] = []
        for page in self._obstore.list(self._s3, prefix or None, chunk_size=1000):
            metas.extend(page)
            if limit is not None and len(metas) >= limit:
                return sorted(metas, key=lambda meta: meta["path"])[:limit]
        return metas

    def _list_tree_info(self, prefix: str, max_keys: int) -> TreeListing:
        if not _nameable(prefix):
            return self._meta_store()._list_tree_info(prefix, max_keys)
        try:
            metas = self._call(prefix, self._list_all, prefix, max_keys + 1)
        except StoreError as error:
            if not _refused_path(error):
                raise
            return self._fallback(error)._list_tree_info(prefix, max_keys)
        files = {
            meta["path"][len(prefix) :]: (int(meta["size"]), meta["last_modified"].timestamp())
            for meta in metas
            if meta["path"].startswith(prefix) and is_valid_key(meta["path"])
        }
        # a folder marker with keys below it is dropped, as _list_prefix_sizes drops it
        parents = {name[:i] for name in files for i, c in enumerate(name) if c == "/"}
        files = {name: info for name, info in sorted(files.items()) if name and not (info[0] == 0 and name in parents)}
        return TreeListing(files, frozenset(), complete=len(metas) <= max_keys)

    def _list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        infos, prefixes = self._list_dir_info(prefix)
        return sorted(infos), prefixes

    def _list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], list[str]]:
        if not _nameable(prefix):
            return self._meta_store()._list_dir_info(prefix)
        try:
            listing = self._call(prefix, self._obstore.list_with_delimiter, self._s3, prefix or None)
        except StoreError as error:
            if not _refused_path(error):
                raise
            return self._fallback(error)._list_dir_info(prefix)
        infos: dict[str, tuple[int, float | None]] = {}
        for meta in listing["objects"]:
            name = self._name_below(prefix, meta["path"])
            if name is not None:
                infos[name] = (int(meta["size"]), meta["last_modified"].timestamp())
        names = (self._name_below(prefix, path.rstrip("/")) for path in listing["common_prefixes"])
        return dict(sorted(infos.items())), sorted({name for name in names if name is not None})

    @staticmethod
    def _name_below(prefix: str, path: str) -> str | None:
        """The name of `path` directly under `prefix`, None if it is no valid key there."""
        if not path.startswith(prefix) or not is_valid_key(path):
            return None
        name = path[len(prefix) :]
        return name if name and "/" not in name else None

    # Calls

    def _call(self, key: str, operation: Callable[..., Any], *args: Any) -> Any:
        return self._retries.call(key, operation, *args)

    def _each(self, calls: Sequence[Callable[[], T]]) -> list[T]:
        """Run `calls` at once and return their results in order; the first failure
        (in order) is raised once all have ended."""
        if len(calls) <= 1:
            return [call() for call in calls]
        futures = [self._executor().submit(call) for call in calls]
        wait(futures)
        return [future.result() for future in futures]

    def _executor(self) -> ThreadPoolExecutor:
        with self._lazy_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(S3_CONNECTIONS, thread_name_prefix="zarrfs-s3")
            return self._pool

    def _fallback(self, error: StoreError) -> Store:
        """The Store that lists what obstore refused to (`error`), opened on first use."""
        with self._lazy_lock:
            if self._lister is None:
                if self._open_lister is None:
                    raise error
                log.info("%s: listing through s3fs: %s", self.url, error.message)
                self._lister = self._open_lister()
            return self._lister


def _nameable(*keys: str) -> bool:
    """Whether obstore can name each of `keys`: its paths hold no ASCII control character."""
    return not any(c < " " or c == "\x7f" for key in keys for c in key)


def _refused_path(error: StoreError) -> bool:
    """Whether `error` is obstore refusing a key that it cannot represent as a path."""
    return type(error.__cause__).__name__ == "InvalidPathError"


def _obstore_range(byte_range: ByteRange | None) -> tuple[int, int] | OffsetRange | SuffixRange | None:
    """obstore's GetOptions range for a non-empty ByteRange (None: the whole value)."""
    if byte_range is None:
        return None
    if byte_range.suffix_length is not None:
        return {"suffix": byte_range.suffix_length}
    if byte_range.end is None:
        return None if byte_range.start == 0 else {"offset": byte_range.start}
    return (byte_range.start, byte_range.end)
