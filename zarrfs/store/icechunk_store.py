"""IcechunkStore: the Store over one Icechunk session. Icechunk's store is asynchronous
(zarr-python's Store ABC); its coroutines run on a private event loop in a thread of
its own, so that callers block as on any other Store and no caller's loop (trio's, in
the mount) ever runs them. A branch's store can commit and carry on in a new session.
asyncio comes with the first repository opened (every mount imports this module to look
for one). What differs between icechunk 1.x and 2.x is icechunk_library.py's."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .base import Store
from .byte_range import ByteRange
from .errors import StoreError, ValueTooLargeError
from .icechunk_library import (
    UNAUTHORIZED,
    CommitGate,
    EventLoopThread,
    conflicts,
    first_line,
    means_missing,
    means_node_exists,
)

T = TypeVar("T")
log = logging.getLogger(__name__)


class CommitConflictError(StoreError):
    """The branch moved since the session began: the commit was refused, nothing changed."""


class IcechunkStore(Store):
    """The keys of one version of an Icechunk repository: a read-only session (a tag, a
    snapshot, a branch's head) or, for a branch, a writable session whose changes stay
    staged until `commit`. `version` says which version it shows; `repository` is the
    repository it came from, for the other versions."""

    chunks_need_their_node = True  # staged changes are published by one commit: no order to keep

    def __init__(
        self,
        url: str,
        session: Any,
        loop: EventLoopThread,
        *,
        timeout: float = 60.0,
        renew: Callable[[], Any] | None = None,
        rearrange: Callable[[], Any] | None = None,
        repository: Any = None,
        label: str | None = None,
    ) -> None:
        super().__init__(url, read_only=session.read_only)
        self.repository = repository
        self.label = label  # "branch NAME", "tag NAME", or None for a snapshot named by id
        self._session = session
        self._loop = loop
        self._timeout = timeout
        self._renew = renew  # a new writable session on the same branch, after a commit
        self._rearrange = rearrange  # a session that moves nodes on the branch (icechunk 2)
        self._gate = CommitGate()
        # zarr-python comes with icechunk, which only a repository's stores need
        from zarr.core.buffer import default_buffer_prototype

        self._prototype = default_buffer_prototype()

    @property
    def branch(self) -> str | None:
        branch: str | None = self._session.branch
        return branch

    @property
    def snapshot_id(self) -> str:
        """The snapshot this store shows (for a writable session: the one it began from)."""
        return str(self._session.snapshot_id)

    @property
    def version(self) -> str:
        """Which version this store shows, in words: "branch main at snapshot ID"."""
        snapshot = f"snapshot {self._session.snapshot_id}"
        return f"{self.label} at {snapshot}" if self.label else snapshot

    def has_staged_changes(self) -> bool:
        with self._gate.call():
            return not self.read_only and self._session.has_uncommitted_changes

    def commit(self, message: str, *, rebase: bool = False) -> str | None:
        """Commit what is staged; the new snapshot's id, or None when nothing was staged.
        Raises CommitConflictError (the changes stay staged) when the branch has moved,
        unless `rebase` and the changes touch nothing the branch's new commits touched."""
        import icechunk

        if self.read_only or self._renew is None:
            raise StoreError("only a branch's writable session can commit", self.url)
        with self._gate.commit():
            if not self._session.has_uncommitted_changes:
                return None
            try:
                solver = icechunk.ConflictDetector() if rebase else None
                snapshot: str = self._session.commit(message, rebase_with=solver)
            except icechunk.RebaseFailedError as exc:
                raise CommitConflictError(
                    f"the branch's new commits changed what these change: {conflicts(exc)}"
                ) from None
            except icechunk.ConflictError as exc:
                raise CommitConflictError(f"the branch moved since these changes began: {exc}") from None
            except Exception as exc:
                raise StoreError(f"the commit failed: {first_line(exc)}") from None
            self._session = self._renew()
            return snapshot

    def commit_aside(self, message: str) -> tuple[str, str]:
        """Commit what is staged onto a new branch, `BRANCH-unmount-ID`, whose parent is
        the snapshot the session began from: for changes that the branch, moved since,
        cannot take and that must outlive the session. The branch and the snapshot id;
        the session is done."""
        if self.read_only or self._renew is None:
            raise StoreError("only a branch's writable session can commit", self.url)
        with self._gate.commit():
            branch = self._session.branch
            try:
                snapshot = self._session.flush(message)  # a snapshot that no branch names yet
                name = f"{branch}-unmount-{snapshot}"
                self.repository.repo.create_branch(name, snapshot)
            except Exception as exc:
                raise StoreError(f"the commit failed: {first_line(exc)}") from None
        return name, snapshot

    def _move_node(self, src: str, dst: str) -> str | None:
        """Move the node at prefix `src` to `dst` by metadata alone, in a commit of its own
        (icechunk 2); its snapshot id, or None where it cannot: icechunk 1, or writes
        staged (a rearrange session holds moves only, and committing the writes first is
        the user's call), or a prefix that is no node. Then the keys are copied."""
        if self._rearrange is None or self._renew is None or self.read_only:
            return None
        src, dst = "/" + src.rstrip("/"), "/" + dst.rstrip("/")
        with self._gate.commit():
            if self._session.has_uncommitted_changes:
                return None
            try:
                session = self._rearrange()
                session.move(src, dst)
            except Exception:
                return None
            try:
                snapshot: str = session.commit(f"zarrfs: moved {src} to {dst}")
            except Exception as exc:
                raise StoreError(f"the move was not committed: {first_line(exc)}", src) from None
            self._session = self._renew()
        log.info("moved %s to %s by metadata: snapshot %s", src, dst, snapshot)
        return snapshot

    # ------------------------------------------------------------------ primitives
    def _run(self, key: str | None, action: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        with self._gate.call():
            store = self._session.store
            try:
                return self._loop.run(action(store), self._timeout)
            except StoreError:
                raise
            except Exception as exc:
                raise StoreError(first_line(exc), key) from None

    def _get_many(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> list[bytes | None]:
        import asyncio

        async def get_all(store: Any) -> list[bytes | None]:
            return list(await asyncio.gather(*(self._get(store, key, rng, max_size) for key, rng in requests)))

        return self._run(requests[0][0] if requests else None, get_all)

    async def _get(self, store: Any, key: str, byte_range: ByteRange | None, max_size: int | None) -> bytes | None:
        try:
            if key.rpartition("/")[2] == "zarr.json":
                # Icechunk 1.1 answers suffix ranges of metadata wrongly: sliced here (a
                # snapshot's metadata is in memory once the snapshot is read)
                buffer = await store.get(key, self._prototype)
                if buffer is None:
                    return None
                data: bytes = buffer.to_bytes()
                start, end = (byte_range or ByteRange()).resolve(len(data))
                selected = data[start:end]
            else:
                # ... and ranges past a chunk's end: sizes come from the manifest, and
                # ranges are clamped here
                if not await self._exists(store, key):
                    return None
                size = await store.getsize(key)
                start, end = (byte_range or ByteRange()).resolve(size)
                if max_size is not None and end - start > max_size:
                    raise ValueTooLargeError(f"more than the {max_size} bytes the reader can take; not read", key)
                if start >= end:
                    return b""
                from zarr.abc.store import RangeByteRequest

                whole = start == 0 and end == size
                buffer = await store.get(key, self._prototype, None if whole else RangeByteRequest(start, end))
                if buffer is None:
                    return None
                selected = buffer.to_bytes()
        except StoreError:
            raise
        except Exception as exc:
            if means_missing(exc):
                return None
            container = UNAUTHORIZED.search(str(exc))
            if container:
                prefix = container.group(1)
                raise StoreError(
                    f"a virtual chunk in the container {prefix}, which the mount does not authorize: "
                    f"mount with --virtual-chunks {prefix} to read it",
                    key,
                ) from None
            raise
        if max_size is not None and len(selected) > max_size:
            raise ValueTooLargeError(f"more than the {max_size} bytes the reader can take; not read", key)
        return selected

    @staticmethod
    async def _exists(store: Any, key: str) -> bool:
        try:
            return bool(await store.exists(key))
        except Exception as exc:
            if means_missing(exc):
                return False
            raise

    def _get_info(self, key: str) -> tuple[int, float | None] | None:
        async def info(store: Any) -> tuple[int, float | None] | None:
            if not await self._exists(store, key):
                return None
            return await store.getsize(key), None

        return self._run(key, info)

    def _set_many(self, items: dict[str, bytes]) -> None:
        import asyncio

        async def set_one(store: Any, key: str, value: bytes) -> None:
            buffer = self._prototype.buffer.from_bytes(value)
            try:
                await store.set(key, buffer)
            except Exception as exc:
                if key.rpartition("/")[2] != "zarr.json" or not means_node_exists(exc):
                    raise
                # Icechunk turns no group into an array in place: an empty group goes first,
                # as zarr-python's overwrite does (one with children would take them along)
                names = [name async for name in store.list_dir(key.removesuffix("zarr.json").rstrip("/"))]
                if set(names) != {"zarr.json"}:
                    raise StoreError("a group with children cannot become an array here", key) from None
                await store.delete(key)
                await store.set(key, buffer)

        async def set_all(store: Any) -> None:
            await asyncio.gather(*(set_one(store, key, value) for key, value in items.items()))

        self._run(next(iter(items)), set_all)

    def _erase_many(self, keys: list[str]) -> None:
        async def erase_all(store: Any) -> None:
            for key in keys:
                if await self._exists(store, key):
                    await store.delete(key)

        self._run(keys[0], erase_all)

    def _erase_prefix(self, prefix: str) -> None:
        if not prefix:
            super()._erase_prefix(prefix)
            return

        async def erase(store: Any) -> None:
            await store.delete_dir(prefix.rstrip("/"))

        self._run(prefix, erase)

    def _move(self, src: str, dst: str) -> None:
        if not src.endswith("/"):
            super()._move(src, dst)
            return
        if self._move_node(src, dst):
            return
        # icechunk 2 takes a chunk only under an array it holds: the metadata documents
        # go first, parents before children (the copy below sets them once more)
        documents = [key for key in self._list_prefix(src) if key.rpartition("/")[2] == "zarr.json"]
        for key in sorted(documents, key=lambda key: key.count("/")):
            self._copy_value(key, dst + key[len(src) :])
        super()._move(src, dst)

    def _list_prefix(self, prefix: str) -> list[str]:
        async def listing(store: Any) -> list[str]:
            try:
                return sorted([key async for key in store.list_prefix(prefix)])
            except Exception as exc:
                if means_missing(exc):
                    return []
                raise

        return self._run(prefix, listing)

    def _list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        import asyncio

        async def listing(store: Any) -> tuple[list[str], list[str]]:
            try:
                names = [name async for name in store.list_dir(prefix.rstrip("/"))]
            except Exception as exc:
                if means_missing(exc):
                    return [], []
                raise
            # Icechunk lists keys and prefixes alike: a name that holds a value is a key.
            is_key = await asyncio.gather(*(self._exists(store, prefix + name) for name in names))
            keys = sorted(n for n, k in zip(names, is_key) if k)
            return keys, sorted(n for n, k in zip(names, is_key) if not k)

        return self._run(prefix, listing)
