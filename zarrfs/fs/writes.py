"""What an open-for-writing file holds until it is stored (SPEC §3): a chunk file's bytes,
a metadata document's bytes, a `.npy` file copied into a group. Each knows its size,
takes writes and truncation, and on `commit` validates and stores — or raises and stores
nothing. Methods block; the operations call them from worker threads."""

from __future__ import annotations

import errno
import math
import os
import tempfile
import threading

import numpy as np

from ..format import Array, Hierarchy, InvalidWriteError, MetadataError, UnsupportedError
from ..format.dtypes import fill_value_to_json, parse_v3_data_type, v3_name_of
from ..format.metadata import array_document_v3, default_chunk_shape
from ..views.data import DataView, flat_range_boxes
from .errors import FsError

_ZSTD_CODECS = [{"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "zstd", "configuration": {"level": 3, "checksum": False}}]


class BufferWriter:
    """One open-for-writing of a file (SPEC §3 "Descriptors are shared"): its own copy of
    the content, so that another writer's `O_TRUNC` or writes never reach it. It is
    judged at every close of a descriptor that shares it (`commit`): a complete content
    is stored, an incomplete or invalid one is refused and kept, so that a later close
    can find it complete; what is still refused at the last close is dropped."""

    def __init__(self, load) -> None:
        self._load = load
        self._buffer: bytearray | None = None
        self.dirty = False  # written since it was last stored
        self.refusal: Exception | None = None  # why the last commit refused the content
        self.lock = threading.RLock()

    def buffer(self) -> bytearray:
        """The content (loaded on first use); callers hold `lock`."""
        if self._buffer is None:
            self._buffer = bytearray(self._load())
        return self._buffer

    def size(self) -> int:
        with self.lock:
            return len(self.buffer())

    def read(self, offset: int, size: int) -> bytes:
        with self.lock:
            return bytes(self.buffer()[offset:offset + size])

    def write(self, offset: int, data: bytes) -> int:
        with self.lock:
            self.check_write(offset, len(data))
            buf = self.buffer()
            if offset > len(buf):
                buf.extend(bytes(offset - len(buf)))
            buf[offset:offset + len(data)] = data
            self._changed()
            return len(data)

    def truncate(self, size: int) -> None:
        with self.lock:
            self.check_write(size, 0)
            if self._buffer is None and size == 0:
                self._buffer = bytearray()  # O_TRUNC: what is stored is never needed
            buf = self.buffer()
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
        """Store the content if it changed; True when something was stored. A refused
        content (FsError, InvalidWriteError) stays, with the reason in `refusal`; a store
        failure keeps it too, for a later commit."""
        with self.lock:
            if not self.dirty:
                return False
            try:
                self.store(bytes(self.buffer()))
            except (FsError, InvalidWriteError) as exc:
                self.refusal = exc
                raise
            self.dirty = False
            return True

    def store(self, content: bytes) -> None:
        raise NotImplementedError


class ChunkWriter(BufferWriter):
    """`chunks/…`: any offset inside the chunk; stored only when exactly full size."""

    def __init__(self, array: Array, coords: tuple[int, ...]) -> None:
        self.array = array
        self.coords = coords
        self.dtype = array.dtype.little_endian
        self.full_size = math.prod(array.chunk_shape) * self.dtype.itemsize
        super().__init__(lambda: np.ascontiguousarray(array.read_chunks([coords])[0], dtype=self.dtype).tobytes())

    def check_write(self, offset: int, length: int) -> None:
        if offset + length > self.full_size:
            raise FsError(errno.EFBIG, f"write past the end of the chunk ({self.full_size} bytes)")

    def store(self, content: bytes) -> None:
        if len(content) != self.full_size:
            raise FsError(errno.EINVAL, f"chunk is {len(content)} bytes, must be exactly {self.full_size}: not stored")
        chunk = np.frombuffer(content, dtype=self.dtype).reshape(self.array.chunk_shape)
        self.array.pending.replace_chunk(self.coords, chunk.astype(self.array.dtype.numpy))


class DocumentWriter(BufferWriter):
    """A metadata document (`zarr.json`, `.zattrs`, …): validated before it is stored."""

    def __init__(self, hierarchy: Hierarchy, node_path: str, name: str, current: bytes) -> None:
        self.hierarchy = hierarchy
        self.node_path = node_path
        self.name = name
        super().__init__(lambda: current)

    def store(self, content: bytes) -> None:
        node = self.hierarchy.open_node(self.node_path)
        if isinstance(node, Array):  # buffered writes go under the metadata they were made for
            node.pending.flush()
        try:
            self.hierarchy.replace_document(self.node_path, self.name, content)
        except (MetadataError, UnsupportedError) as exc:  # a bad document is a bad write
            raise FsError(errno.EINVAL, f"invalid {self.name}, not stored: {exc}") from None


class NpySpool:
    """A `.npy` file copied into a group: spooled to a local temporary file, and on commit
    turned into a new array named after it (default chunking and codecs)."""

    def __init__(self, hierarchy: Hierarchy, array_path: str) -> None:
        self.hierarchy = hierarchy
        self.array_path = array_path
        self.file = tempfile.TemporaryFile(prefix="zarrfs-npy-")
        self.dirty = True
        self.lock = threading.Lock()

    def size(self) -> int:
        return os.fstat(self.file.fileno()).st_size

    def read(self, offset: int, size: int) -> bytes:
        return os.pread(self.file.fileno(), size, offset)

    def write(self, offset: int, data: bytes) -> int:
        with self.lock:
            return os.pwrite(self.file.fileno(), data, offset)

    def truncate(self, size: int) -> None:
        with self.lock:
            self.file.truncate(size)

    def commit(self) -> bool:
        with self.lock:
            if not self.dirty:
                return False
            self.dirty = False
            values = self._load()
            dtype = values.dtype.newbyteorder("<") if values.dtype.byteorder == ">" else values.dtype
            data_type = parse_v3_data_type(v3_name_of(dtype))
            document = array_document_v3(
                values.shape, default_chunk_shape(values.shape, dtype.itemsize), data_type.name,
                fill_value_to_json(np.zeros((), dtype)[()], data_type), _ZSTD_CODECS,
            )
            array = self.hierarchy.create_array(self.array_path, document)
            try:
                _copy_in(array, values)
            except BaseException:
                self.hierarchy.erase_node(self.array_path)
                raise
            return True

    def _load(self) -> np.ndarray:
        self.file.seek(0)
        try:
            fmt = np.lib.format
            version = fmt.read_magic(self.file)
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran, dtype = read_header(self.file)
        except Exception as exc:  # numpy raises ValueError and others for bad headers
            raise FsError(errno.EINVAL, f"not a valid .npy file: {exc}") from None
        if dtype.hasobject or dtype.fields is not None:
            raise FsError(errno.EINVAL, f"unsupported .npy data type {dtype}")
        expected = self.file.tell() + math.prod(shape) * dtype.itemsize
        if self.size() != expected:
            raise FsError(errno.EINVAL, f".npy file is {self.size()} bytes, its header says {expected}")
        return np.memmap(self.file, dtype=dtype, mode="r", offset=self.file.tell(), shape=shape,
                         order="F" if fortran else "C")

    def close(self) -> None:
        self.file.close()


def _copy_in(array: Array, values: np.ndarray) -> None:
    """Write an array's values a slab of chunks at a time (bounded memory)."""
    if not values.shape:
        array.write((), values)
        return
    step = array.chunk_shape[0] * max(1, (64 << 20) // max(1, values[0:1].nbytes * array.chunk_shape[0]))
    for start in range(0, values.shape[0], step):
        array.write((slice(start, start + step),), np.asarray(values[start:start + step]))


def write_data(array: Array, offset: int, data: bytes) -> int:
    """Apply a write to `data` (C order, little-endian bytes) to the array's pending chunks."""
    dtype = array.dtype.little_endian
    itemsize = dtype.itemsize
    total = math.prod(array.shape) * itemsize
    if offset + len(data) > total:
        raise FsError(errno.EFBIG, f"write past the end of data ({total} bytes; its size is fixed by the shape)")
    if not data:
        return 0
    first, last = offset // itemsize, -(-(offset + len(data)) // itemsize)
    head, tail = offset - first * itemsize, last * itemsize - offset - len(data)
    if head or tail:  # partial elements: merge with the current bytes of the edge elements
        current = DataView(array)
        data = (current.read(first * itemsize, head) if head else b"") + data + (
            current.read(offset + len(data), tail) if tail else b"")
    values = np.frombuffer(data, dtype=dtype)
    if not array.shape:
        array.pending.write((), values.reshape(()))
        return len(data) - head - tail
    position = 0
    for box in flat_range_boxes(array.shape, first, last):
        shape = tuple(s.stop - s.start for s in box)
        n = math.prod(shape)
        array.pending.write(box, values[position:position + n].reshape(shape))
        position += n
    return len(data) - head - tail
