"""LocalStore: the Store over a local directory, confined to it. Keys are regular files
below the root and prefixes real directories; symbolic links, FIFOs, sockets and devices
are not values (they read as missing, are not listed and are never removed), and nothing
is reached through a link (see local_files.py for how, and what it costs). Every call has
a deadline (deadlines.py): a file on a hung mount below the root cannot hold a caller."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from ..defaults import STORE_TIMEOUT
from . import local_files, local_versions, local_writes, stale_temporaries
from .base import Store
from .byte_range import ByteRange
from .deadlines import Deadlines, reached
from .errors import ConfinementError, KeyNotFoundError, StorePermissionError, ValueTooLargeError, translate_error
from .keys import is_valid_key
from .records import FileMeta

T = TypeVar("T")
_MISSING = (FileNotFoundError, NotADirectoryError, ConfinementError)


class LocalStore(Store):
    """Modes, owners and times (FileMeta) are those of the files and directories
        themselves: kept by the filesystem, read with one lstat.

    A Store whose keys are the files below the directory `root`. Writes are atomic
        (temporary file, then rename); erasing a key removes the directories it leaves empty,
        never the root. Once the root is removed or replaced, every call raises
        StoreVanishedError. A call not answered within `timeout` seconds fails with
        StoreUnavailableError; a write that did may still land later (deadlines.py)."""

    keeps_meta = True
    keeps_dir_meta = True

    def __init__(
        self, root: str, *, url: str | None = None, read_only: bool = False, timeout: float = STORE_TIMEOUT
    ) -> None:
        self.root = os.path.abspath(os.path.expanduser(root))
        super().__init__(url or "file://" + self.root, read_only)
        self._root = local_files.Root(self.root)  # which directory that is (docs/errors.md, a store that vanishes)
        self.deadlines = Deadlines(self.url, timeout)
        self._prune = True  # removals remove the directories they leave empty

    # Reading

    def _get_many(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> list[bytes | None]:
        return [self._call(key, self._read, key, byte_range, max_size) for key, byte_range in requests]

    def _read(self, key: str, byte_range: ByteRange | None, max_size: int | None) -> bytes | None:
        *dirs, name = key.split("/")
        try:
            with local_files.directories(self._root, dirs) as fds:
                reached(key)
                opened = local_files.open_regular(fds[-1], name)
        except _MISSING:
            return None
        if opened is None:
            return None
        fd, info = opened
        try:
            start, end = (0, info.st_size) if byte_range is None else byte_range.resolve(info.st_size)
            if max_size is not None and end - start > max_size:
                raise ValueTooLargeError(
                    f"{end - start} bytes, more than the {max_size} the reader can take; not read", key
                )
            return local_files.read_at(fd, start, end - start)
        finally:
            os.close(fd)

    def _get_info(self, key: str) -> tuple[int, float | None] | None:
        info = self._call(key, self._stat, key)
        return None if info is None else (info.st_size, info.st_mtime)

    def _get_token(self, key: str) -> str | None:
        info = self._call(key, self._stat, key)
        # a file replaced by a rename is another inode; one written in place has new times
        return None if info is None else f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"

    def _stat(self, key: str) -> os.stat_result | None:
        """The lstat of the regular file at `key`; None if there is none."""
        *dirs, name = key.split("/")
        try:
            with local_files.directories(self._root, dirs) as fds:
                reached(key)
                return local_files.regular_info(fds[-1], name)
        except _MISSING:
            return None

    def _get_meta(self, key: str) -> FileMeta | None:
        return self._entry_meta(key, directory=False)

    def _get_dir_meta(self, key: str) -> FileMeta | None:
        return self._entry_meta(key, directory=True)

    def _entry_meta(self, key: str, directory: bool) -> FileMeta | None:
        try:
            info = self._call(key, local_files.entry_info, self._root, key.split("/"), directory)
        except KeyNotFoundError:
            return None
        if info is None:
            return None
        return FileMeta(
            stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, info.st_atime_ns, info.st_mtime_ns, info.st_ctime_ns
        )

    # Writing

    def _set_meta(self, key: str, meta: FileMeta) -> FileMeta:
        return self._set_entry_meta(key, meta, directory=False)

    def _set_dir_meta(self, key: str, meta: FileMeta) -> FileMeta:
        return self._set_entry_meta(key, meta, directory=True)

    def _set_file_meta(self, key: str, fd: int, consume: bool, meta: FileMeta) -> int:
        size = self._set_file(key, fd, consume)
        try:
            self._set_meta(key, meta)
        except StorePermissionError:  # not ours to give away (a daemon not run by root)
            self._set_meta(key, replace(meta, uid=None, gid=None))
        return size

    def _set_entry_meta(self, key: str, meta: FileMeta, directory: bool) -> FileMeta:
        owner = None
        if meta.uid is not None or meta.gid is not None:
            owner = (-1 if meta.uid is None else meta.uid, -1 if meta.gid is None else meta.gid)
        times = None if meta.atime_ns is None and meta.mtime_ns is None else (meta.atime_ns, meta.mtime_ns)
        if not self._call(
            key, local_files.set_attributes, self._root, key.split("/"), directory, meta.mode, owner, times
        ):
            raise KeyNotFoundError("no such key" if not directory else "no such directory", key)
        kept = self._entry_meta(key, directory)
        if kept is None:  # removed at once by another
            raise KeyNotFoundError("no such key", key)
        return kept

    def keep_empty_directories(self) -> None:
        self._prune = False

    def remove_stale_temporaries(self) -> int:
        """Remove what the atomic writes of killed processes left (stale_temporaries.py);
        how many. Walks the whole store: a mount calls it once, on a thread of its own."""
        return stale_temporaries.remove_stale(self._root)

    def _set_many(self, items: dict[str, bytes]) -> None:
        for key, value in items.items():
            self._call(key, local_writes.write_atomic, self._root, key.split("/"), value)

    def _get_versioned(self, key: str) -> tuple[bytes | None, str | None]:
        return self._call(key, local_versions.read_versioned, self._root, key.split("/"))

    def _set_if(self, key: str, value: bytes, version: str | None) -> bool:
        with self._key_locks[hash(key) % len(self._key_locks)]:  # (record locks are the process's)
            return self._call(key, local_versions.write_if, self._root, key.split("/"), value, version)

    def _set_file(self, key: str, fd: int, consume: bool = False) -> int:
        # the copy renews its deadline piece by piece (deadlines.progressed): --timeout
        # bounds a filesystem that stops answering, not how long a big file takes to copy
        return self._call(key, local_writes.write_file_atomic, self._root, key.split("/"), fd, consume)

    def _erase_many(self, keys: list[str]) -> None:
        for key in keys:
            self._call(key, local_files.remove_file, self._root, key.split("/"), self._prune)

    def _erase_prefix(self, prefix: str) -> None:
        self._call(prefix, local_files.remove_tree, self._root, _parts(prefix), self._prune)

    def _copy_value(self, src: str, dst: str) -> None:
        if not self._call(src, local_writes.copy_atomic, self._root, src.split("/"), dst.split("/")):
            raise KeyNotFoundError("no such key", src)

    def _move(self, src: str, dst: str) -> None:
        self._call(src, local_files.rename, self._root, _parts(src), _parts(dst), self._prune)

    # Listing

    def _list_prefix(self, prefix: str) -> list[str]:
        return sorted(key for key, _ in self._walk(prefix, with_info=False))

    def _list_prefix_sizes(self, prefix: str) -> dict[str, int]:
        sizes: dict[str, int] = {}
        for key, info in sorted(self._walk(prefix, with_info=True)):
            assert info is not None  # walked with_info: each file's lstat
            sizes[key] = info.st_size
        return sizes

    def _walk(self, prefix: str, with_info: bool) -> list[tuple[str, os.stat_result | None]]:
        def walk() -> list[tuple[str, os.stat_result | None]]:
            try:
                with local_files.directories(self._root, _parts(prefix)) as fds:
                    return [(k, i) for k, i in local_files.walk_files(fds[-1], prefix, with_info) if is_valid_key(k)]
            except _MISSING:
                return []

        return self._call(prefix, walk)

    def _list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        files, prefixes = self._scan(prefix, with_info=False)
        return sorted(files), prefixes

    def _list_dir_info(self, prefix: str) -> tuple[dict[str, tuple[int, float | None]], list[str]]:
        files, prefixes = self._scan(prefix, with_info=True)
        return {name: (info.st_size, info.st_mtime) for name, info in sorted(files.items())}, prefixes

    def _prefix_times(self, prefix: str) -> tuple[float, float] | None:
        def times() -> tuple[float, float] | None:
            try:
                with local_files.directories(self._root, _parts(prefix)) as fds:
                    info = os.fstat(fds[-1])
            except _MISSING:
                return None
            return info.st_mtime, info.st_ctime

        return self._call(prefix, times)

    def _scan(self, prefix: str, with_info: bool) -> tuple[dict[str, Any], list[str]]:
        def scan() -> list[tuple[str, bool, os.stat_result | None]]:
            try:
                with local_files.directories(self._root, _parts(prefix)) as fds:
                    return local_files.scan(fds[-1], with_info)
            except _MISSING:
                return []

        files, prefixes = {}, []
        for name, is_dir, info in self._call(prefix, scan):
            if not is_valid_key(prefix + name):
                continue
            if is_dir:
                prefixes.append(name)
            else:
                files[name] = info
        return files, sorted(prefixes)

    def _call(self, key: str, operation: Callable[..., T], *args: Any) -> T:
        """Run a file operation within the deadline, raising StoreError (a missing key is
        the caller's business)."""
        try:
            return self.deadlines.run(key, operation, *args)
        except OSError as exc:
            raise translate_error(exc, key) from exc


def _parts(key_or_prefix: str) -> list[str]:
    """The path components of a key or of a prefix ("" is the root: none)."""
    return [part for part in key_or_prefix.split("/") if part]
