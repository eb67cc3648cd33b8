"""The store's own keys of an array, at their paths in the array's directory (key_names.py
says which names they are): read by range and written whole, bytes as stored, as `--raw`
serves them (passthrough/files.py's RawFile, passthrough/readahead.py's RangeReader), so that zarr-python,
xarray or tensorstore opening the mount as a local store read and write what the store
holds. A key stored or erased here is forgotten by the caches of the array's decoded
views (Array.stored_value_changed), and the kernel's pages of them go, as for any write
through the mount."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, cast

from ...format import NodeNotFoundError
from ...store import ValueTooLargeError
from ...store.keys import join_path
from ..core import Attributes
from ..directories import links
from ..errors import FsError, log_failure
from ..passthrough.files import KeyFileOpen, RawFile, close_one, truncated_if
from ..passthrough.readahead import RangeReader, ReadaheadBudget
from . import key_names
from .entries import ARRAY, KEY, KEY_DIR, Entry, directory

if TYPE_CHECKING:
    from ...format import Array
    from ..core import OpenFile
    from .registry import PendingRegistry
    from .tree import Tree

log = logging.getLogger(__name__)

_READAHEAD_THREADS = 4
_READAHEAD_MEMORY = 64 << 20  # fetched ahead of all sequential readers of key paths
# the size a lookup found serves the open that follows it for this long, rather than a
# second HEAD per chunk on an object store (a size found stale only bounds read-ahead)
_INFO_KEPT = 1.0
_INFOS_MOST = 4096


class KeysCore(Protocol):
    """What the store's keys ask of the decoded core (core.py): the arrays, where writes
    to them wait, and what is told of opens for writing and of what was stored."""

    read_only: bool
    pending: PendingRegistry
    tree: Tree

    def opened_for_writing(self, path: str, file: OpenFile) -> None: ...

    def closed(self, file: OpenFile) -> None: ...

    def stored(self, node_path: str, node_changed: bool = True) -> None: ...


class KeyOpen(KeyFileOpen):
    """One open of a key path: the file (shared by every open of the key) and this
    open's reads. Direct I/O: the key changes with every write to its array's views, and
    its size with it, so neither the kernel's pages nor the size it was told may cut a
    read short."""

    direct_io = True
    keep_cache = False

    def __init__(self, keys: StoreKeys, file: RawFile, node: str, writes: bool) -> None:
        self.keys = keys
        self.file = file
        self.node = node
        self.writes = writes
        self.reader = RangeReader(file, keys.executor, keys.budget)

    def _store(self) -> None:
        self.keys.store_file(self.file, self.node, last=self.keys.only_open(self.file))

    def fsync(self) -> None:
        self.keys.store_file(self.file, self.node)

    def release(self) -> None:
        self.reader.close()
        self.keys.closed(self)


class StoreKeys:
    """The key paths of a decoded mount. Thread-safe: the open files, by store key, are
    under `_lock`; store calls and spool I/O run outside it."""

    def __init__(self, core: KeysCore, spool_dir: str | None) -> None:
        self._core = core
        self._spool_dir = spool_dir
        self._lock = threading.Lock()
        self._files: dict[str, tuple[RawFile, str]] = {}  # store key -> open file, its array's path
        self._opens: dict[int, int] = {}  # opens per open file, by id
        self._infos: dict[str, tuple[float, int, float | None]] = {}  # store key -> (found at, size, mtime)
        self._executor: ThreadPoolExecutor | None = None
        self.budget = ReadaheadBudget(_READAHEAD_MEMORY)

    @property
    def executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(_READAHEAD_THREADS, thread_name_prefix="zarrfs-key-readahead")
            return self._executor

    def _array(self, node: str) -> Array:
        return self._core.tree.array(node)

    # ------------------------------------------------------------------ reading
    def attributes(self, entry: Entry) -> Attributes:
        array = self._array(entry.node)
        key = join_path(array.path, entry.name)
        with self._lock:
            open_file = self._files.get(key)
        if open_file is not None:
            file = open_file[0]
            return Attributes(False, file.size(), mtime=file.modified)
        info = array.store.get_info(key)
        if info is None:
            raise NodeNotFoundError(f"no key {entry.name!r} stored for array /{entry.node}")
        with self._lock:
            if len(self._infos) >= _INFOS_MOST:
                self._infos.clear()
            self._infos[key] = (time.monotonic(), *info)
        return Attributes(False, info[0], mtime=info[1])

    def _info(self, array: Array, key: str) -> tuple[int, float | None] | None:
        """(size, mtime) of a key: as its lookup just found it, else from the store."""
        with self._lock:
            known = self._infos.pop(key, None)
        if known is not None and time.monotonic() - known[0] < _INFO_KEPT:
            return known[1], known[2]
        return cast("tuple[int, float | None] | None", array.store.get_info(key))

    def listing(self, entry: Entry) -> list[tuple[str, Entry, Attributes]]:
        """What a key directory holds: the keys and key directories the store holds below
        it, from one listing (sizes included), and keys open here and not stored yet."""
        array = self._array(entry.node)
        prefix = join_path(array.path, entry.name)
        files, dirs = array.store.list_dir_info(prefix + "/")
        out: dict[str, tuple[Entry, Attributes]] = {}
        for name in dirs:
            if key_names.name_kind(array, entry.name, name) == key_names.KEY_DIR:
                out[name] = (Entry(KEY_DIR, entry.node, join_path(entry.name, name)), directory(links(0)))
        for name, (size, mtime) in files.items():
            if key_names.name_kind(array, entry.name, name) == key_names.KEY:
                out[name] = (Entry(KEY, entry.node, join_path(entry.name, name)), Attributes(False, size, mtime=mtime))
        with self._lock:
            unstored = [(k, f) for k, (f, _) in self._files.items() if k.rpartition("/")[0] == prefix]
        for key, file in unstored:
            name = key.rpartition("/")[2]
            if name not in out and not file.unlinked:
                out[name] = (Entry(KEY, entry.node, join_path(entry.name, name)), Attributes(False, file.size()))
        return [(name, *out[name]) for name in sorted(out)]

    # ------------------------------------------------------------------ opening
    def open(self, entry: Entry, flags: int) -> KeyOpen:
        array = self._array(entry.node)
        key = join_path(array.path, entry.name)
        writes = flags & os.O_ACCMODE != os.O_RDONLY or bool(flags & os.O_TRUNC)
        if writes:
            self._writable()
        with self._lock:
            known = self._files.get(key)
        if known is None:
            info = self._info(array, key) if not writes else array.store.get_info(key)
            if info is None:
                raise FsError(errno.ENOENT, f"no key {entry.name!r} stored for array /{entry.node}")
            file = RawFile(array.store, key, info[0], self._spool_dir, array.context.unanswered)
            with self._lock:
                known = self._files.setdefault(key, (file, entry.node))
            if known[0] is not file:
                file.close()  # opened meanwhile by another: share that one
        return truncated_if(self._open(known[0], entry.node, writes), flags)

    def creates(self, parent: Entry, name: str) -> bool:
        """Whether a file created as `name` in `parent` is one of the store's keys."""
        if parent.kind not in (KEY_DIR, ARRAY):
            return False
        prefix = parent.name if parent.kind == KEY_DIR else ""
        return key_names.name_kind(self._array(parent.node), prefix, name) == key_names.KEY

    def create(self, parent: Entry, name: str) -> tuple[KeyOpen, Attributes]:
        self._writable()
        array = self._array(parent.node)
        rel = join_path(parent.name if parent.kind == KEY_DIR else "", name)
        key = join_path(array.path, rel)
        file = RawFile(array.store, key, None, self._spool_dir, array.context.unanswered)
        file.create()
        with self._lock:
            known = self._files.setdefault(key, (file, parent.node))
        if known[0] is not file:
            file.close()
        return self._open(known[0], parent.node, True), Attributes(False, known[0].size(), mtime=known[0].modified)

    def _open(self, file: RawFile, node: str, writes: bool) -> KeyOpen:
        with self._lock:
            self._opens[id(file)] = self._opens.get(id(file), 0) + 1
        opened = KeyOpen(self, file, node, writes)
        if writes:  # (its array is not erased or moved while it is open)
            self._core.opened_for_writing(file.key, opened)
        return opened

    def _writable(self) -> None:
        if self._core.read_only:
            raise FsError(errno.EROFS, "read-only mount")

    def only_open(self, file: RawFile) -> bool:
        with self._lock:
            return self._opens.get(id(file)) == 1

    # ------------------------------------------------------------------ storing
    def store_file(self, file: RawFile, node: str, last: bool = False) -> bool:
        """Store a file's bytes at its key if they changed; True if they were. As --raw:
        a value the store refuses as too large fails EFBIG, and what a close failed to
        store is not stored by a later one unless written again."""
        if file.refused:
            return False
        try:
            if not file.dirty:
                return False
            self._before_change(node)
            if not file.flush(last):
                return False
        except ValueTooLargeError as exc:
            raise FsError(errno.EFBIG, f"not stored: {exc.message}") from None
        self._changed(node, file.key)
        return True

    def closed(self, opened: KeyOpen) -> None:
        """The last close of one open: the last one of the file stores it and lets it go."""
        file = opened.file
        self._core.closed(opened)

        def let_go() -> None:
            if self._files.get(file.key, (None,))[0] is file:
                del self._files[file.key]
            file.close()

        close_one(self._lock, self._opens, file, lambda: self.store_file(file, opened.node, last=True), let_go)

    def store_key(self, node: str, key: str, value: bytes | int) -> None:
        """Store `value` (bytes, or a file descriptor read from its start) as key `key`
        (relative to the array) of the array at `node`, as it is, and have every decoded
        view of the array show it at once: what a scratch file renamed onto a key path
        of an array directory (a v2 array's `0.0`) is stored as."""
        self._writable()
        array = self._array(node)
        if key_names.name_kind(array, key.rpartition("/")[0], key.rpartition("/")[2]) != key_names.KEY:
            raise FsError(errno.EINVAL, f"{key!r} is no key of array /{node}")
        full = join_path(array.path, key)
        self._before_change(node)
        if isinstance(value, int):
            array.store.set_file(full, value)
        else:
            array.store.set(full, value)
        self._changed(node, full)

    def unlink(self, entry: Entry) -> None:
        self._writable()
        array = self._array(entry.node)
        key = join_path(array.path, entry.name)
        if not self._detach(key) and array.store.get_info(key) is None:
            raise FsError(errno.ENOENT, f"no key {entry.name!r} stored for array /{entry.node}")
        self._before_change(entry.node)
        array.store.erase_values([key])
        self._changed(entry.node, key)

    def _detach(self, key: str) -> bool:
        """The open file of `key`, if any, no longer is the key's: its opens keep its bytes
        until their last close, as an unlinked file's do, and it is never stored again."""
        with self._lock:
            known = self._files.get(key)
        if known is None:
            return False
        known[0].hold()
        known[0].unlinked = True
        with self._lock:
            if self._files.get(key) is known:
                del self._files[key]
        return True

    def rename(self, entry: Entry, parent: Entry, name: str, replace: bool) -> None:
        """A key moved onto another key of the same array (zarr-python's
        `KEY.<uuid>.partial` onto KEY): moved in the store, the target's views renewed."""
        self._writable()
        if not (parent.kind in (ARRAY, KEY_DIR) and parent.node == entry.node and self.creates(parent, name)):
            raise FsError(errno.EXDEV, "a key moves only onto another key of its array")
        array = self._array(entry.node)
        src = join_path(array.path, entry.name)
        dst = join_path(array.path, join_path(parent.name if parent.kind == KEY_DIR else "", name))
        with self._lock:
            known = self._files.get(src)
        if known is not None:  # written and still open: stored first, then moved
            self.store_file(known[0], entry.node)
        if not replace and array.store.get_info(dst) is not None:
            raise FsError(errno.EEXIST, "the destination exists")
        self._detach(dst)  # the opens of the key it replaces keep that one, never stored again
        self._before_change(entry.node)
        array.store.move(src, dst, replace=True)
        with self._lock:
            moved = self._files.pop(src, None)
            if moved is not None:
                moved[0].key = dst
                self._files[dst] = moved
        self._changed(entry.node, dst, src)

    def truncate(self, entry: Entry, size: int) -> None:
        opened = self.open(entry, os.O_WRONLY)
        try:
            opened.truncate(size)
            opened.flush()
        finally:
            opened.release()

    def _before_change(self, node: str) -> None:
        """Before a key of the array at `node` is stored or erased: the writes to its
        `data` acknowledged before are stored first, so that none lands over it later."""
        try:
            pending = self._core.pending.of(self._array(node))
        except NodeNotFoundError:
            return
        if pending:
            pending.flush()

    def _changed(self, node: str, *keys: str) -> None:
        """Keys of the array at `node` were stored or erased: the caches of its decoded
        views forget those chunks, and the kernel its pages (a key that names no chunk of
        the grid, a temporary, changes no view)."""
        try:
            array = self._array(node)
        except Exception as exc:  # the array is gone or unreadable: nothing decoded of it is served
            log.debug("/%s changed: %s", node, exc)
            return
        encoding = array.metadata.chunk_key_encoding
        prefix = array.path + "/" if array.path else ""
        with self._lock:
            for key in keys:
                self._infos.pop(key, None)
        for key in keys:
            coords = encoding.parse_key(key[len(prefix) :], len(array.stored_grid.grid_shape))
            if coords is not None and array.stored_grid.contains(coords):
                array.stored_value_changed(coords)
        self._core.stored(node, node_changed=False)

    # ------------------------------------------------------------------ the mount
    def shutdown(self) -> None:
        """Store what open key files hold that is not stored yet."""
        with self._lock:
            files = list(self._files.values())
        for file, node in files:
            try:
                self.store_file(file, node)
            except Exception as exc:
                log_failure("flush at unmount", "/" + file.key, exc)

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
