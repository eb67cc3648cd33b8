"""`dataset.nc` of a group: a netCDF-3 file (64-bit offset; CDF-5 where a type or size
needs it) with every array the format can hold as a variable over the shared dimension
names. The header follows from the metadata alone, but for the small 64-bit integer
arrays (a CF time coordinate, most often), whose values are read to see whether int32
or double holds them exactly: GDAL before 3.7 and other readers of netCDF-3 read no
CDF-5. Each variable's bytes are its `data`, big-endian, read on the fly."""

from __future__ import annotations

import math
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..format import Array, FormatError
from .base import FileView
from .data import DataView
from .fill import cf_fill_value
from .georef import dimension_names
from .netcdf_format import (
    CDF2_VSIZE_LIMIT,
    CDF5_TYPES,
    CLASSIC_TYPES,
    NC_DIMENSION,
    NC_DOUBLE,
    NC_DTYPE,
    NC_INT,
    NC_INT64,
    NC_UBYTE,
    NC_UINT,
    NC_UINT64,
    NC_USHORT,
    NC_VARIABLE,
    TYPE_NAMES,
    Header,
    encode_attributes,
    utf8,
)
from .netcdf_plan import NetcdfPlan, Variable, cdf5_variable


@dataclass(frozen=True, slots=True)
class Member:
    """What one array alone decides of its place in a group's dataset.nc, and the facts of
    it a plan needs (a caller keeps these per member, not the parsed arrays: planning a
    group of N arrays again is then a pass over N of these)."""

    path: str  # the array's
    shape: tuple[int, ...]
    read_itemsize: int  # of its data type, as `data` shows it
    dims: tuple[Any, ...] | None  # None: no dimension names
    why: str | None  # left out, whatever the other arrays are (first of the checks below)
    twice: bool  # a dimension name used twice
    zero: bool  # a zero-length dimension
    dims_utf8: tuple[bytes, ...]
    name_utf8: bytes
    nc_type: int = 0
    attributes: tuple[Any, ...] = ()
    cdf5: bool = False


# equal tuples (shapes, dimension names and their UTF-8) made one object: a group's N
# members mostly share them (made again past this many kinds)
_SHARED_MOST = 4096
_shared: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _one(value: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(_shared) >= _SHARED_MOST:
        _shared.clear()
    return _shared.setdefault(value, value)


def member_of(name: str, array: Array) -> Member:
    """What the array `name` of a group decides of its place in the group's dataset.nc."""
    why = _unrepresentable(array)
    dims = dimension_names(array) if array.shape else ()
    facts = (array.path, _one(array.shape), array.dtype.itemsize)
    if dims is None:
        return Member(*facts, None, why, False, False, (), b"")
    if why is None and not all(isinstance(d, str) and d for d in dims):
        why = "a dimension without a name"
    dims = _one(tuple(dims))
    dims_utf8 = _one(tuple(utf8(d) for d in dims)) if why is None else ()
    twice = len(set(dims_utf8)) != len(dims)
    zero = 0 in array.shape
    if why is not None or twice or zero:
        return Member(*facts, dims, why, twice, zero, dims_utf8, utf8(name))
    kind = array.dtype.little_endian.str[1:] if array.dtype.numpy.kind != "b" else "b1"
    nc_type = CLASSIC_TYPES.get(kind) or CDF5_TYPES[kind]
    attributes = encode_attributes(array.metadata.attributes, array.dtype.numpy.kind == "b")
    fill = None if array.dtype.numpy.kind == "b" else cf_fill_value(array)
    if fill is not None:
        typed = np.asarray([fill]).astype(NC_DTYPE[nc_type])
        if typed[0] == fill or (np.isnan(typed[0]) and np.isnan(fill)):  # NaN: v2's a numpy float32
            attributes.append(("_FillValue", nc_type, typed.tobytes(), 1))
    nbytes = math.prod(array.shape) * array.dtype.itemsize
    cdf5 = kind in CDF5_TYPES or nbytes + (-nbytes % 4) > CDF2_VSIZE_LIMIT
    cdf5 |= any(t in (NC_UBYTE, NC_USHORT, NC_UINT, NC_INT64, NC_UINT64) for _, t, _, _ in attributes)
    return Member(*facts, dims, None, False, False, dims_utf8, utf8(name), nc_type, tuple(attributes), cdf5)


def netcdf_plan(
    group_attributes: dict[str, Any],
    members: Sequence[tuple[str, Array | Member]],
    arrays: Callable[[Variable], Array] | None = None,
) -> NetcdfPlan:
    """The variables of a group's `dataset.nc` from the metadata of its arrays (in order):
    each given as parsed, or as what it decided alone (`member_of`, kept by the caller:
    planning again is then a pass over them). `arrays` finds the array a variable shows
    where its values are read; without it, the arrays given are held by the plan."""
    plan = NetcdfPlan()  # (its dimensions and what the variables decide, then the plan `of` them)
    variables: list[Variable] = []
    left_out: dict[str, str] = {}
    cdf5: list[str] = []
    # the UTF-8 of the names taken (each lone surrogate is U+FFFD: two names can be one)
    dims_spelled: dict[bytes, str] = {}
    names_spelled: set[bytes] = set()
    given: dict[str, Array] = {}
    for name, item in members:
        if isinstance(item, Member):
            member = item
        else:
            member, given[name] = member_of(name, item), item
        dims = member.dims
        if dims is None:
            left_out[name] = member.why or "no dimension names (dimension_names, or _ARRAY_DIMENSIONS in v2)"
            continue
        why = member.why
        if why is None:
            for d, n in zip(dims, member.shape):
                if plan.dims.get(d, n) != n:
                    why = f"dimension {d!r} is {n} long here, {plan.dims[d]} in another array"
                    plan.contested = True
        if why is None and member.twice:
            why = "a dimension name used twice"
        if why is None and any(dims_spelled.get(u, d) != d for u, d in zip(member.dims_utf8, dims)):
            why = "a dimension name that is another's in UTF-8 (a lone surrogate is U+FFFD)"
            plan.contested = True
        if why is None and member.name_utf8 in names_spelled:
            why = "a name that is another array's in UTF-8 (a lone surrogate is U+FFFD)"
            plan.contested = True
        if why is None and member.zero:
            why = "a zero-length dimension (netCDF-3 has only the record dimension of length 0)"
        if why is not None:
            left_out[name] = why
            continue
        for d, u, n in zip(dims, member.dims_utf8, member.shape):
            plan.dims.setdefault(d, n)
            plan.dim_uses[d] = plan.dim_uses.get(d, 0) + 1
            dims_spelled[u] = d
        names_spelled.add(member.name_utf8)
        variable = Variable(
            name, member.path, member.shape, member.read_itemsize, dims, member.nc_type, member.attributes
        )
        if member.cdf5:
            cdf5.append(name)
        variables.append(variable)
    if arrays is None:
        arrays = lambda v: given[v.name]  # noqa: E731 (standing alone: the arrays given)
    attributes = encode_attributes(group_attributes, False)
    return NetcdfPlan.of(
        variables,
        left_out,
        cdf5,
        dims=plan.dims,
        attributes=attributes,
        dim_uses=plan.dim_uses,
        cdf5_attributes=any(t in (NC_INT64, NC_UINT64) for _, t, _, _ in attributes),
        contested=plan.contested,
        arrays=arrays,
    )


# 64-bit integer arrays up to this many elements have their values read to see whether a
# classic type holds them (larger ones stay CDF-5 without a read)
NARROWED_MAX = 1 << 20


def narrowed(plan: NetcdfPlan, values_of: Callable[[Array], np.ndarray]) -> NetcdfPlan:
    """The plan with each 64-bit integer variable of up to NARROWED_MAX elements whose values
    (and fill value) int32 holds stored as int32, or, for a CF time (units `... since ...`),
    double where it holds them exactly: a 64-bit offset file where nothing else needs CDF-5
    (`units` and `calendar` kept, so the times decode the same). `values_of` reads an array."""
    if plan.version != 5:
        return plan
    variables: list[Variable] = []
    changed, uncdf5 = [], set()
    for v in plan.variables:
        nc_type = _narrow_type(plan, v, values_of) if v.nc_type in (NC_INT64, NC_UINT64) else None
        if nc_type is None:
            variables.append(v)
            continue
        attributes = [
            (n, nc_type, np.frombuffer(raw, NC_DTYPE[t]).astype(NC_DTYPE[nc_type]).tobytes(), c)
            if n == "_FillValue"
            else (n, t, raw, c)
            for n, t, raw, c in v.attributes
        ]
        variables.append(narrow := replace(v, nc_type=nc_type, attributes=attributes))
        if not cdf5_variable(narrow):
            uncdf5.add(v.name)
        changed.append(f"{v.name!r} {TYPE_NAMES[v.nc_type]} as {'int32' if nc_type == NC_INT else 'double'}")
    if not changed:
        return plan
    cdf5 = [n for n in plan.planned.cdf5[plan.first_cdf5 :] if not plan.gone(n) and n not in uncdf5]
    fields = {"dims": plan.dims, "attributes": plan.attributes, "dim_uses": plan.dim_uses}
    out = NetcdfPlan.of(
        variables, dict(plan.left_out.items()), cdf5, **fields, cdf5_attributes=plan.cdf5_attributes, arrays=plan.arrays
    )
    if out.version == 2:
        out.why = "values that fit: " + ", ".join(changed)
    return out


def _narrow_type(plan: NetcdfPlan, v: Variable, values_of: Callable[[Array], np.ndarray]) -> int | None:
    if math.prod(v.shape) > NARROWED_MAX:
        return None
    values = values_of(plan.array_of(v)).reshape(-1)
    fills = [int(x) for n, t, raw, _ in v.attributes if n == "_FillValue" for x in np.frombuffer(raw, NC_DTYPE[t])]
    ends = [int(values.min()), int(values.max())] if values.size else []
    lowest, highest = min([*ends, *fills], default=0), max([*ends, *fills], default=0)
    if lowest >= -(1 << 31) and highest < (1 << 31):
        return NC_INT
    units = dict((n, raw) for n, _, raw, _ in v.attributes).get("units", b"")
    if b" since " in units and lowest >= -(1 << 53) and highest <= (1 << 53):
        return NC_DOUBLE
    return None


def _unrepresentable(array: Array) -> str | None:
    dtype = array.dtype
    if dtype.variable_length:
        return "a variable-length data type"
    if dtype.kind not in ("numeric", "subbyte_int"):
        return f"data type {dtype.json!r} has no netCDF-3 type"
    kind = dtype.little_endian.str[1:]
    if dtype.numpy.kind != "b" and kind not in CLASSIC_TYPES and kind not in CDF5_TYPES:
        return f"data type {dtype.json!r} has no netCDF-3 type"
    return None


def _header(plan: NetcdfPlan, variables: list[Variable], begins: list[int]) -> bytes:
    h = Header(plan.version)
    h.parts.append(b"CDF" + bytes([plan.version]))
    h.count(0)  # number of records: no record dimension
    ids = {d: i for i, d in enumerate(plan.dims)}
    h.list_tag(NC_DIMENSION, len(plan.dims))
    for d, n in plan.dims.items():
        h.name(d)
        h.count(n)
    h.attributes(plan.attributes)
    h.list_tag(NC_VARIABLE, len(variables))
    for v, begin in zip(variables, begins):
        h.name(v.name)
        h.count(len(v.dims))
        for d in v.dims:
            h.count(ids[d])
        h.attributes(list(v.attributes))
        h.parts.append(struct.pack(">i", v.nc_type))
        h.count(v.vsize)  # (one past a 64-bit offset file's limit made the file CDF-5)
        h.parts.append(struct.pack(h.offset, begin))
    return h.bytes()


KEPT_DATA_VIEWS = 8  # variables' `data` a dataset.nc view keeps made (the last read)


class NetcdfView(FileView):
    """`dataset.nc`: the header, then each variable's bytes at its `begin`, in order."""

    def __init__(self, plan: NetcdfPlan, chunks_of: Callable[[Array], Any] = lambda array: None) -> None:
        self.plan = plan  # as planned from the group's arrays (the tree asks whether it is current)
        plan = narrowed(plan, lambda array: read_values(array, chunks_of(array)))
        self._variables = list(plan.variables)
        # the header's length does not depend on the offsets in it
        size = len(_header(plan, self._variables, [0] * len(self._variables)))
        self.begins = []
        for v in self._variables:
            self.begins.append(size)
            size += v.vsize
        self._size = size
        self._header = _header(plan, self._variables, self.begins)
        # each variable's `data`, made when read, the last few kept (not N held for N arrays)
        self._chunks_of = chunks_of
        self._data: OrderedDict[int, DataView] = OrderedDict()
        self._data_lock = threading.Lock()

    def _data_of(self, i: int) -> DataView:
        with self._data_lock:
            data = self._data.get(i)
            if data is not None:
                self._data.move_to_end(i)
                return data
        array = self.plan.array_of(self._variables[i])  # (looked up as read: not held per variable)
        data = DataView(array, self._chunks_of(array))
        with self._data_lock:
            data = self._data.setdefault(i, data)
            self._data.move_to_end(i)
            while len(self._data) > KEPT_DATA_VIEWS:
                self._data.popitem(last=False)
        return data

    def size(self) -> int:
        return self._size

    def data_span(self, offset: int, size: int) -> tuple[DataView, int, int] | None:
        """The variable's `data` a read at `offset` shows (same positions, other byte order)."""
        for i, (v, begin) in enumerate(zip(self._variables, self.begins)):
            if begin <= offset < begin + v.nbytes:
                scale = v.read_itemsize / v.itemsize  # (a narrowed variable's: 2)
                stop = int(min(offset + size - begin, v.nbytes) * scale)
                return self._data_of(i), int((offset - begin) * scale), stop
        return None

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self._size)
        parts, pos = [], offset
        if pos < min(end, len(self._header)):
            parts.append(self._header[pos:end])
            pos = min(end, len(self._header))
        for i, (v, begin) in enumerate(zip(self._variables, self.begins)):
            if pos >= end:
                break
            if pos >= begin + v.vsize:
                continue
            stop = min(end, begin + v.vsize)
            parts.append(_big_endian(self._data_of(i), v, pos - begin, stop - begin))
            pos = stop
        return b"".join(parts)


def _big_endian(data: DataView, v: Variable, start: int, stop: int) -> bytes:
    """Bytes [start, stop) of a variable: its `data` swapped to big-endian, then padding."""
    itemsize, read_size = v.itemsize, v.read_itemsize  # in the file; in `data`
    first, last = start // itemsize, min(-(-stop // itemsize), v.nbytes // itemsize)
    raw = b""
    if first < last:
        values = np.frombuffer(data.read(first * read_size, (last - first) * read_size), dtype=data.dtype)
        typed = values.astype(NC_DTYPE[v.nc_type])
        narrowed_to = typed.dtype.newbyteorder("=").name
        wide = values.dtype.itemsize == 8 and values.dtype.kind in "iu"
        if wide and narrowed_to in ("int32", "float64") and not np.array_equal(typed.astype(values.dtype), values):
            # narrowed when the file was laid out: a value written since would read as another
            raise FormatError(
                f"dataset.nc: variable {v.name!r} was laid out as {narrowed_to}, and {narrowed_to} does "
                "not hold a value written since (it is laid out again after --metadata-ttl)"
            )
        raw = typed.tobytes()
    raw = raw[start - first * itemsize :]
    return (raw + b"\0" * (stop - start - len(raw)))[: stop - start]


def read_values(array: Array, chunks: Any = None) -> np.ndarray:
    """The whole array, as its `data` shows it (pending writes applied, where `chunks` are
    the array's pending writes)."""
    data = DataView(array, chunks)
    return np.frombuffer(data.read(0, data.size()), dtype=data.dtype)
