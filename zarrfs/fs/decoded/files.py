"""The open files of the decoded tree that are written to (docs/semantics.md; those opened
for reading are view_files.py's): a chunk file or metadata document opened for writing,
each open its own copy, judged at every close and dropped only at the last; `data` opened
for writing, whose writes go to the array's pending chunks. Every method may block.
Importing this imports no numpy (the core opens documents before any array is read, some
on its event loop); the files of arrays import it when made."""

from __future__ import annotations

import errno
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ...format import AnyHierarchy, Group, InvalidWriteError, MetadataError, NodeNotFoundError, UnsupportedError
from ...format.nodes import MAX_DOCUMENT_BYTES
from ...views.layout import write_elements
from ..core import NotAtHand, OpenFile
from ..errors import FsError, errno_for

if TYPE_CHECKING:
    from ...format import Array
    from ...format.pending import PendingWrites
    from ...views.data import DataView
    from .documents import DocumentLocks

# what a commit refuses (kept while a descriptor is open, dropped at the last close): a bad
# write, or a node erased or moved since the open (at unmount, a node made under its name
# since then must not get it); anything else is a store failure, stored again at unmount
REFUSED = (FsError, InvalidWriteError, NodeNotFoundError)


class WriteHooks(Protocol):
    """What the decoded core does when an open for writing stores or closes."""

    def stored(self, node_path: str, node_changed: bool = True) -> None:
        """Something of the node at `node_path` was stored through the mount (a chunk file
        or a document: `node_changed`, what is known of the node is read anew; buffered
        writes to `data`: only the kernel's pages go)."""

    def unstored(self, file: BufferFile) -> None:
        """A store failed at the last close: keep the file, to store it at unmount."""

    def changing(self, node_path: str) -> None:
        """About to change the documents of the node at `node_path`: FsError where the
        change is not to be made (the consolidated metadata cannot follow it)."""

    def synced(self) -> None:
        """A document was fsynced: the consolidated metadata is written now too."""

    def closed(self, file: OpenFile) -> None:
        """The last close of an open for writing."""


class BufferFile(OpenFile):
    """One open-for-writing of a chunk file or document (docs/semantics.md "Descriptors are
    shared"): its own copy of the content, so that another writer's `O_TRUNC` or writes
    never reach it. Judged at every close (`flush`): a complete content is stored, an
    incomplete or invalid one is refused and kept, so a later close can find it complete;
    what is still refused at the last close (`release`) is dropped. A store failure keeps
    the content too: `unstored` gets it at the last close, to be stored at unmount."""

    direct_io = True  # readers and writers never share the kernel's pages or size
    keep_cache = False
    writes = True

    def __init__(self, load: Callable[[], bytes], node_path: str, hooks: WriteHooks) -> None:
        self._load = load
        self.node_path = node_path
        self._hooks = hooks
        self._buffer: bytearray | None = None
        self.dirty = False  # written since it was last stored
        self.refusal: Exception | None = None  # why the last commit refused the content
        self.unstored_at: tuple[int, int] | None = None  # its node's changes when its store failed
        self.lock = threading.RLock()

    def _content(self) -> bytearray:
        if self._buffer is None:
            self._buffer = bytearray(self._load())
        return self._buffer

    def let_go(self) -> None:
        """Its content will never be stored (a later write superseded it): dropped. Only
        for a file released (no descriptor left), and without its lock: the changes' lock
        is held (changes.py), and a store under this one may reach it."""
        self._buffer = None

    def size(self) -> int:
        with self.lock:
            return len(self._content())

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes:
        if not wait:
            raise NotAtHand
        with self.lock:
            return bytes(self._content()[offset : offset + size])

    def write(self, offset: int, data: bytes, *, wait: bool = True) -> int:
        if not wait:
            raise NotAtHand
        with self.lock:
            self.check_write(offset, len(data))
            buf = self._content()
            if offset > len(buf):
                buf.extend(bytes(offset - len(buf)))
            buf[offset : offset + len(data)] = data
            self._changed()
            return len(data)

    def truncate(self, size: int) -> None:
        with self.lock:
            self.check_write(size, 0)
            if self._buffer is None and size == 0:
                self._buffer = bytearray()  # O_TRUNC: what is stored is never needed
            buf = self._content()
            if size < len(buf):
                del buf[size:]
            else:
                buf.extend(bytes(size - len(buf)))
            self._changed()

    def _changed(self) -> None:
        self.dirty = True
        self.refusal = None

    def check_write(self, offset: int, length: int) -> None:
        """Refuse a write before taking it (nothing to refuse by default)."""

    def commit(self) -> bool:
        """Store the content if it changed; True when something was stored."""
        with self.lock:
            if not self.dirty:
                return False
            try:
                self.store(bytes(self._content()))
            except REFUSED as exc:
                self.refusal = exc
                raise
            self.dirty = False
        self._hooks.stored(self.node_path)
        return True

    def flush(self) -> None:
        try:
            self.commit()
        except REFUSED as exc:  # kept while a descriptor is open
            raise FsError(errno_for(exc), f"{exc} (kept until the last close)", quiet=True) from None

    def release(self) -> None:
        self._hooks.closed(self)
        if self.dirty and self.refusal is None:  # written since its last close was judged
            try:
                self.commit()
            except REFUSED:
                pass
            except Exception:  # the store failed: kept, and stored again at unmount
                self._hooks.unstored(self)
                raise
        if self.dirty and self.refusal is not None:
            raise FsError(errno_for(self.refusal), f"{self.refusal}; dropped at the last close, the store is unchanged")

    def store(self, content: bytes) -> None:
        raise NotImplementedError


class ChunkFile(BufferFile):
    """`chunks/…`: any offset inside the chunk; stored only when exactly full size, as a
    chunk of the array as it is at the store (`target()`: its pending writes under its
    current metadata): one whose metadata changed since the open never gets a chunk
    encoded as before, which it could not read."""

    def __init__(self, target: Callable[[], PendingWrites], coords: tuple[int, ...], hooks: WriteHooks) -> None:
        import numpy as np

        pending = target()
        array = pending.array
        self._target = target
        self.coords = coords
        self.chunk_shape = array.chunk_shape_of(coords)
        self.dtype = array.dtype.little_endian
        self.full_size = math.prod(self.chunk_shape) * self.dtype.itemsize
        super().__init__(
            lambda: np.ascontiguousarray(pending.read_chunks([coords])[0], dtype=self.dtype).tobytes(),
            array.path,
            hooks,
        )

    def check_write(self, offset: int, length: int) -> None:
        if offset + length > self.full_size:
            raise FsError(errno.EFBIG, f"write past the end of the chunk ({self.full_size} bytes)")

    def store(self, content: bytes) -> None:
        pending = self._target()
        array = pending.array
        if not array.chunk_grid.contains(self.coords):
            raise FsError(errno.ENOENT, "the chunk is outside the array since its metadata changed: not stored")
        shape, dtype = array.chunk_shape_of(self.coords), array.dtype.little_endian
        full_size = math.prod(shape) * dtype.itemsize
        if len(content) != full_size:
            raise FsError(errno.EINVAL, f"chunk is {len(content)} bytes, must be exactly {full_size}: not stored")
        import numpy as np

        chunk = np.frombuffer(content, dtype=dtype).reshape(shape)
        pending.replace_chunk(self.coords, chunk.astype(array.dtype.numpy))


class DocumentFile(BufferFile):
    """A metadata document (`zarr.json`, `.zattrs`, …): validated before it is stored.
    Buffered writes to the array's `data` are stored first, under the metadata they were
    made for. Stored under its node's lock of `documents`, the core's locks of every
    document's read-modify-write (an attribute change never stores back what this one
    replaces)."""

    def __init__(
        self,
        hierarchy: AnyHierarchy,
        pending_of: Callable[[Array], PendingWrites],
        node_path: str,
        name: str,
        current: bytes,
        hooks: WriteHooks,
        documents: DocumentLocks,
    ) -> None:
        self.hierarchy = hierarchy
        self.pending_of = pending_of
        self.documents = documents
        self.name = name
        super().__init__(lambda: current, node_path, hooks)

    def check_write(self, offset: int, length: int) -> None:
        if offset + length > MAX_DOCUMENT_BYTES:  # (it would never be read back)
            raise FsError(errno.EFBIG, f"a metadata document of more than {MAX_DOCUMENT_BYTES} bytes")

    def store(self, content: bytes) -> None:
        self._hooks.changing(self.node_path)
        with self.documents.held((self.node_path,)):
            node = self.hierarchy.open_node(self.node_path)
            if isinstance(node, Group):
                self._replace(content)
                return
            pending = self.pending_of(node)
            with pending.lock:  # no write to `data` lands between the two, under the old metadata
                pending.flush()
                self._replace(content)

    def fsync(self) -> None:
        self.flush()
        self._hooks.synced()

    def _replace(self, content: bytes) -> None:
        try:
            self.hierarchy.replace_document(self.node_path, self.name, content)
        except (MetadataError, UnsupportedError) as exc:  # a bad document is a bad write
            raise FsError(errno.EINVAL, f"invalid {self.name}, not stored: {exc}") from None


class DataFile(OpenFile):
    """`data` opened for writing: writes at any offset apply to the array's pending chunks
    at once (every open of the array shares them); `flush` stores them. Its size is fixed
    by the shape: truncating to it (or to 0, as O_TRUNC does) changes nothing.

    Each write goes to the array as it is now (`target()`: the registry's pending chunks
    for the node's current metadata, and its view), not as it was when the file was
    opened: after a resize or another change of the metadata the file's bytes are those of
    the changed array, and writes never land in a set of pending chunks that nothing
    stores any more."""

    writes = True
    keep_cache = False

    def __init__(
        self,
        target: Callable[[], tuple[PendingWrites, DataView]],
        target_cached: Callable[[], tuple[PendingWrites, DataView] | None],
        wrote: Callable[[PendingWrites, bool], bool],
        hooks: WriteHooks,
    ) -> None:
        self._target = target  # (pending, view) now
        self._target_cached = target_cached  # the same, or None where that needs a store call
        pending, self.view = target()
        self.node_path = pending.array.path
        self._wrote = wrote  # the core's dirty limit and write-behind (see DecodedCore._wrote)
        self._hooks = hooks
        self._sets: list[PendingWrites] = [pending]  # the sets of pending chunks written through this file
        self._told = {pending: pending.stores}  # each set's stores the kernel was told of

    @property
    def pending(self) -> PendingWrites:
        return self._sets[-1]

    def _lock(self, pending: PendingWrites, view: DataView, blocking: bool) -> bool:
        """Take the set's lock where it is still the registry's current set (so that a
        write never lands in one replaced meanwhile), and make it this file's target."""
        if not pending.lock.acquire(blocking=blocking):
            return False
        if not pending.current:
            pending.lock.release()
            return False
        if pending is not self._sets[-1]:  # the metadata changed: a new set
            self._sets = [p for p in self._sets if p] + [pending]
            self._told.setdefault(pending, pending.stores)
        self.view = view
        return True

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes:
        if not wait:
            raise NotAtHand
        return self._target()[1].read(offset, size)  # the array now, as a write would see it

    def write(self, offset: int, data: bytes, *, wait: bool = True) -> int:
        if not wait:
            return self._write_at_hand(offset, data)
        while True:
            pending, view = self._target()
            version = pending.version
            # edge elements are read through the view before the lock is taken: a read may
            # wait on another's fetch of that chunk, which may itself wait on the lock
            merged, first, written = merge_edges(pending.array, view, offset, data)
            if self._lock(pending, view, blocking=True):
                if len(merged) == written or pending.version == version:
                    break
                pending.lock.release()  # written meanwhile: the edge elements read may be old
        try:
            write_elements(pending, merged, first)
        finally:
            pending.lock.release()
        self._wrote(pending, True)
        return written

    def _write_at_hand(self, offset: int, data: bytes) -> int:
        """Whole elements, below the dirty limit, while no store holds the pending chunks:
        applied in memory at once. Anything else may read edge elements or store: NotAtHand."""
        itemsize = self.view.itemsize
        if offset % itemsize or len(data) % itemsize or not self._wrote(self.pending, False):
            raise NotAtHand
        target = self._target_cached()
        if target is None:
            raise NotAtHand
        pending, view = target
        if view.itemsize != itemsize or not self._lock(pending, view, blocking=False):
            raise NotAtHand
        try:
            merged, first, written = merge_edges(pending.array, view, offset, data)  # whole elements: no read
            write_elements(pending, merged, first)
        finally:
            pending.lock.release()
        self._wrote(pending, False)  # the write-behind of chunks this write completed
        return written

    def truncate(self, size: int) -> None:
        current = self._target()[1].size()
        if size not in (current, 0):
            raise FsError(
                errno.EFBIG if size > current else errno.EINVAL, f"the size of data is fixed by the shape ({current})"
            )

    def flush(self) -> None:
        """Store what is pending; where anything was stored since the last close (here, or
        before it by write-behind or at the dirty limit), the kernel drops the node's pages."""
        stored = False
        for pending in self._sets:
            if pending:
                pending.flush()
            stored = stored or pending.stores != self._told.get(pending)
        self._sets = self._sets[-1:]
        self._told = {p: p.stores for p in self._sets}
        if stored:
            self._hooks.stored(self.node_path, node_changed=False)

    def release(self) -> None:
        self._hooks.closed(self)


def merge_edges(array: Array, view: DataView, offset: int, data: bytes) -> tuple[bytes, int, int]:
    """A write to `data` (C order, little-endian bytes) as whole elements: (its bytes with
    the current bytes of partly written edge elements merged in, the first element, the
    bytes written). EFBIG past the end."""
    itemsize = array.dtype.little_endian.itemsize
    total = math.prod(array.shape) * itemsize
    if offset + len(data) > total:
        raise FsError(errno.EFBIG, f"write past the end of data ({total} bytes; its size is fixed by the shape)")
    if not data:
        return b"", 0, 0
    first, last = offset // itemsize, -(-(offset + len(data)) // itemsize)
    head, tail = offset - first * itemsize, last * itemsize - offset - len(data)
    if head or tail:  # partial elements: merge with the current bytes of the edge elements
        data = (
            (view.read(first * itemsize, head) if head else b"")
            + data
            + (view.read(offset + len(data), tail) if tail else b"")
        )
    return data, first, len(data) - head - tail
