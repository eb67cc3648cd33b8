"""A `.npy` file copied into a group (docs/semantics.md): spooled to a local file while it is
written, and at close turned into a new array named after it, with default chunking and
codecs. Opens of the same name while it is written share the spool."""

from __future__ import annotations

import errno
import math
import secrets
import threading
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ...format import AnyHierarchy, Array
from ...format.documents import array_document_v2, array_document_v3, default_chunk_shape
from ...format.dtypes import DataType, parse_v3_data_type, v3_data_type_of
from ...format.errors import MetadataError, UnsupportedError
from ...format.fill_values import fill_value_to_json
from ...store.keys import join_path
from ...store.uploads import read_file
from ..core import NotAtHand, OpenFile
from ..errors import FsError
from ..spool import Spool
from .npy_dimensions import dimension_names_for

_ZSTD_V2 = {"id": "zstd", "level": 3}
SLAB = 32 << 20  # bytes of values read from the spool at once
_ZSTD_CODECS = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "zstd", "configuration": {"level": 3, "checksum": False}},
]


class NpySpool:
    def __init__(
        self,
        hierarchy: AnyHierarchy,
        array_path: str,
        spool_dir: str | None,
        changing: Callable[[str], None] = lambda path: None,
        zarr_format: int = 3,
        replace: Callable[[str, str], None] | None = None,
    ) -> None:
        self.hierarchy = hierarchy
        # copied over an existing array: the new one is made under a name of its own, then
        # `replace(made, array_path)` gives it the array's name
        self.replace = replace
        self.zarr_format = zarr_format  # of the group it is copied into
        self.array_path = array_path
        self.changing = changing  # before the array is made: raises where it is not to be
        self.spool = Spool(spool_dir)
        self.dirty = True  # until an array is created from what was written: a failed close leaves it
        self.refusal: FsError | None = None  # why the last close could not create it
        self.opens = 0
        self.lock = threading.Lock()

    def written(self) -> None:
        with self.lock:
            self.dirty = True

    def commit(self) -> bool:
        """Create the array from what was written; True when it was created. A content
        that is not (yet) a valid .npy of a type Zarr can hold is refused and judged again
        at the next close: a shell's redirection closes its descriptor before the program
        writes. Any close that fails leaves the next one to try again."""
        with self.lock:
            if not self.dirty:
                return False
            try:
                values, data_type = self._load()
            except FsError as exc:
                self.refusal = exc
                raise FsError(exc.errno, f"{exc} (judged again at the next close)", quiet=True) from None
            self.refusal = None
            dtype = values.dtype.newbyteorder("<")
            chunks = default_chunk_shape(values.shape, dtype.itemsize)
            fill = fill_value_to_json(_default_fill(dtype), data_type)
            v2_dtype = _v2_dtype_of(dtype) if self.zarr_format == 2 else None
            names = dimension_names_for(self.hierarchy, self.array_path, values.shape)
            if v2_dtype is not None and names is not None and dtype.kind == "f":
                # xarray reads a v2 fill value as _FillValue (NaN where it is found): zeros
                # would read as NaN; NaN, what xarray gives floats itself, masks nothing
                fill = fill_value_to_json(np.array(np.nan, dtype)[()], data_type)
            if v2_dtype is not None:
                # in a v2 group, a v2 array: zarr-python lists no v3 node below a v2 group,
                # and what reads the group's .zmetadata sees it
                document = array_document_v2(values.shape, chunks, v2_dtype, fill, compressor=_ZSTD_V2)
            else:
                document = array_document_v3(
                    values.shape, chunks, data_type.json, fill, _ZSTD_CODECS, dimension_names=names
                )
            made = self.array_path if self.replace is None else replacement_path(self.array_path)
            self.changing(made)
            # (v2 keeps its dimension names as xarray does, in .zattrs) its chunks and its
            # .zattrs are stored before its document: a kill leaves no array, or the whole
            # array (docs/reliability.md)
            attributes = {"_ARRAY_DIMENSIONS": names} if v2_dtype is not None and names is not None else None
            self.hierarchy.create_array(
                made, document, fill=lambda array: _copy_in(array, values), attributes=attributes
            )
            if self.replace is not None:  # (it erases `made` where it refuses the swap)
                self.replace(made, self.array_path)
            self.dirty = False
            return True

    def _load(self) -> tuple[_NpyValues, DataType]:
        """The values written and the Zarr data type of their dtype; EINVAL for content that
        is not a valid .npy, or whose dtype Zarr cannot hold."""
        file = self.spool.file
        file.seek(0)
        try:
            fmt = np.lib.format
            version = fmt.read_magic(file)
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran, dtype = read_header(file)
        except Exception as exc:  # numpy raises ValueError and others for bad headers
            raise FsError(errno.EINVAL, f"not a valid .npy file: {exc}") from None
        if dtype.hasobject:
            raise FsError(errno.EINVAL, f"unsupported .npy data type {dtype}")
        if dtype.kind in "mM" and np.datetime_data(dtype)[0] == "generic":
            # Zarr can name the type, but zarr-python cannot open an array of it
            raise FsError(errno.EINVAL, f"unsupported .npy data type {dtype}: a time without a unit")
        try:
            data_type = parse_v3_data_type(v3_data_type_of(dtype.newbyteorder("<")))
        except (UnsupportedError, MetadataError) as exc:
            raise FsError(errno.EINVAL, f"unsupported .npy data type {dtype}: {exc}") from None
        expected = file.tell() + math.prod(shape) * dtype.itemsize
        if self.spool.size() != expected:
            raise FsError(errno.EINVAL, f".npy file is {self.spool.size()} bytes, its header says {expected}")
        return _NpyValues(self.spool.fileno(), file.tell(), shape, dtype, fortran), data_type


def replacement_path(array_path: str) -> str:
    """Where the array of a `.npy` copied over array `array_path` is made before it takes
    that name: a hidden sibling of a name of its own (left there, whole, if the mount
    ends before the swap)."""
    parent, _, name = array_path.rpartition("/")
    return join_path(parent, f".{name}.npy-{secrets.token_hex(4)}")


def _v2_dtype_of(dtype: np.dtype) -> str | list[Any] | None:
    """The v2 `dtype` of a little-endian numpy dtype (a list of fields for a structured
    one), where its v2 fill value is written as the v3 one is; None for types v2 lacks
    (records of records or of times stay v3 arrays)."""
    if dtype.fields is not None:  # fields of plain types: zarr-python reads no v2 record nested
        assert dtype.names is not None  # a dtype with fields names them
        fields: list[tuple[str, np.dtype]] = [(name, dtype.fields[name][0]) for name in dtype.names]
        plain = all(f.fields is None and f.subdtype is None and f.kind in "biufcSU" for _, f in fields)
        return [[name, f.str] for name, f in fields] if plain else None
    if dtype.subdtype is None and dtype.kind in "biufcSUMmV":
        return dtype.str
    return None


def _default_fill(dtype: np.dtype) -> Any:
    """The fill value zarr-python gives a new array of `dtype`: NaT for times, else zero."""
    if dtype.kind in "mM":
        return np.array("NaT", dtype)[()]
    return np.zeros((), dtype)[()]


class NpyFile(OpenFile):
    """One open of a spooled `.npy`."""

    writes = True
    keep_cache = False

    def __init__(self, spool: NpySpool, created: Callable[[], None], closed: Callable[[NpySpool], None]) -> None:
        self.npy = spool
        self._created = created
        self._closed = closed
        spool.opens += 1

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes:
        if not wait:
            raise NotAtHand
        return self.npy.spool.read(offset, size)

    def write(self, offset: int, data: bytes, *, wait: bool = True) -> int:
        if not wait:
            raise NotAtHand
        written = self.npy.spool.write(offset, data)
        self.npy.written()
        return written

    def truncate(self, size: int) -> None:
        self.npy.spool.truncate(size)
        self.npy.written()

    def flush(self) -> None:
        if self.npy.commit():
            self._created()

    def release(self) -> None:
        self._closed(self.npy)


class _NpyValues:
    """The values of a spooled `.npy`, read a slab at a time (a memory map would count
    every page read in the daemon's resident memory until it is unmapped)."""

    def __init__(self, fd: int, offset: int, shape: tuple[int, ...], dtype: np.dtype, fortran: bool) -> None:
        self.fd, self.offset, self.shape, self.dtype, self.fortran = fd, offset, shape, dtype, fortran
        # slabs run along the axis whose slices are contiguous in the file
        self.axis = len(shape) - 1 if fortran else 0

    def slab(self, start: int, stop: int) -> np.ndarray:
        """The values at `start:stop` along `axis`."""
        if not self.shape:
            return cast(
                "np.ndarray",
                np.frombuffer(read_file(self.fd, self.offset, self.offset + self.dtype.itemsize), self.dtype)[0],
            )
        shape = list(self.shape)
        shape[self.axis] = stop - start
        step = math.prod(self.shape) // max(1, self.shape[self.axis]) * self.dtype.itemsize
        begin = self.offset + start * step
        data = read_file(self.fd, begin, begin + (stop - start) * step)
        return np.frombuffer(data, self.dtype).reshape(shape, order="F" if self.fortran else "C")


def _copy_in(array: Array, values: _NpyValues) -> None:
    """Write an array's values a slab of whole chunks at a time, about SLAB bytes (bounded
    memory: a slab read from the spool, then its chunks encoded and stored)."""
    if not values.shape:
        array.write((), values.slab(0, 1))
        return
    axis, length = values.axis, values.shape[values.axis]
    chunk = array.chunk_shape[axis]
    across = math.prod(values.shape) // max(1, length) * values.dtype.itemsize * chunk
    step = chunk * max(1, SLAB // max(1, across))
    for start in range(0, length, step):
        stop = min(start + step, length)
        selection = tuple(slice(start, stop) if i == axis else slice(None) for i in range(len(values.shape)))
        array.write(selection, values.slab(start, stop))
