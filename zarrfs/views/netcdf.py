"""`dataset.nc` of a group: a netCDF-3 file (64-bit offset; CDF-5 where a type or size
needs it) with every array the format can hold as a variable over the shared dimension
names. The header follows from the metadata alone, but for the small 64-bit integer
arrays (a CF time coordinate, most often), whose values are read to see whether int32
or double holds them exactly: GDAL before 3.7 and other readers of netCDF-3 read no
CDF-5. Each variable's bytes are its `data`, big-endian, read on the fly."""

from __future__ import annotations

import bisect
import math
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..format import Array, FormatError
from .base import FileView
from .data import DataView
from .fill import cf_fill_value
from .georef import dimension_names
from .netcdf_format import (
    CDF2_DIM_LIMIT,
    CDF2_VSIZE_LIMIT,
    CDF5_ONLY,
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


@dataclass
class Variable:
    name: str
    array: Array
    dims: tuple[str, ...]
    nc_type: int
    attributes: list[tuple[str, int, bytes, int]]  # (name, nc type, big-endian values, count)
    begin: int = 0

    @property
    def itemsize(self) -> int:
        """In the file (a narrowed variable's is less than its array's)."""
        return np.dtype(NC_DTYPE[self.nc_type]).itemsize

    @property
    def nbytes(self) -> int:
        return int(math.prod(self.array.shape) * self.itemsize)

    @property
    def vsize(self) -> int:
        return self.nbytes + (-self.nbytes % 4)


@dataclass
class NetcdfPlan:
    """What `dataset.nc` holds: dimensions, variables, global attributes, the format
    version, and the arrays left out with why. (The rest is what `without` needs to take
    one array out without planning again.)"""

    dims: dict[str, int] = field(default_factory=dict)
    variables: list[Variable] = field(default_factory=list)
    attributes: list[Any] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)
    version: int = 2
    why: str = ""  # what makes it CDF-5, or which variables were narrowed to stay 64-bit offset
    by_name: dict[str, Variable] = field(default_factory=dict)
    dim_uses: dict[str, int] = field(default_factory=dict)  # variables over each dimension
    cdf5_variables: set[str] = field(default_factory=set)  # those that need CDF-5
    cdf5_attributes: bool = False  # the group's attributes need it
    contested: bool = False  # an array is left out for another's sake: one out may let it in

    @property
    def shown(self) -> bool:
        """Whether the group shows `dataset.nc`: some variable has a named dimension (a
        group of scalars, or of arrays without dimension names, is no dataset)."""
        return any(v.dims for v in self.variables)

    def without(self, name: str) -> NetcdfPlan | None:
        """The plan once the array `name` is gone (erased), made from this one in a pass
        of dictionary copies; None where planning again may differ (it held a variable an
        array is left out for). This plan is left as it is: a view may hold it."""
        variable = self.by_name.get(name)
        if variable is None:
            left_out = dict(self.left_out)  # (copies, not passes in Python: N may be 20,000)
            left_out.pop(name, None)
            return replace(self, left_out=left_out)
        if self.contested:
            return None
        uses = dict(self.dim_uses)
        for d in variable.dims:
            uses[d] -= 1
        variables, by_name = list(self.variables), dict(self.by_name)
        del by_name[name]
        # in the order of the group's names, as listed (sorted): found by bisection
        at = bisect.bisect_left(variables, name, key=lambda v: v.name)
        if at < len(variables) and variables[at] is variable:
            del variables[at]
        else:
            variables = [v for v in variables if v is not variable]
        dims = {d: n for d, n in self.dims.items() if uses[d] > 0}
        if any(uses[d] > 0 for d in variable.dims):  # in the order they come first, as planned
            dims = {}
            for v in variables:
                for d in v.dims:
                    dims.setdefault(d, self.dims[d])
                if len(dims) == len(self.dims) - sum(1 for n in uses.values() if n <= 0):
                    break  # (all found: a pass over the first few variables, as a rule)
        plan = replace(
            self,
            dims=dims,
            variables=variables,
            by_name=by_name,
            dim_uses={d: n for d, n in uses.items() if n > 0},
            cdf5_variables=self.cdf5_variables - {name},
        )
        plan.why = _needs_cdf5(plan)
        plan.version = 5 if plan.why else 2
        return plan


@dataclass(frozen=True)
class _Member:
    """What one array alone decides of its place in a group's dataset.nc (kept by the
    caller per array: planning a group of N arrays again is then a pass over N of these)."""

    dims: tuple[Any, ...] | None  # None: no dimension names
    why: str | None  # left out, whatever the other arrays are (first of the checks below)
    twice: bool  # a dimension name used twice
    zero: bool  # a zero-length dimension
    dims_utf8: tuple[bytes, ...]
    name_utf8: bytes
    nc_type: int = 0
    attributes: list[Any] = field(default_factory=list)
    cdf5: bool = False


def _member(name: str, array: Array) -> _Member:
    why = _unrepresentable(array)
    dims = dimension_names(array) if array.shape else ()
    if dims is None:
        return _Member(None, why, False, False, (), b"")
    if why is None and not all(isinstance(d, str) and d for d in dims):
        why = "a dimension without a name"
    dims = tuple(dims)
    dims_utf8 = tuple(utf8(d) for d in dims) if why is None else ()
    twice = len(set(dims_utf8)) != len(dims)
    zero = 0 in array.shape
    if why is not None or twice or zero:
        return _Member(dims, why, twice, zero, dims_utf8, utf8(name))
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
    return _Member(dims, None, False, False, dims_utf8, utf8(name), nc_type, attributes, cdf5)


def netcdf_plan(
    group_attributes: dict[str, Any],
    members: list[tuple[str, Array]],
    memo: dict[str, tuple[Array, _Member]] | None = None,
) -> NetcdfPlan:
    """The variables of a group's `dataset.nc` from the metadata of its arrays (in order).
    `memo`: what each array alone decided when planned before (name -> (array, what)),
    brought up to date here, so that planning again costs a pass over the arrays."""
    plan = NetcdfPlan()
    # the UTF-8 of the names taken (each lone surrogate is U+FFFD: two names can be one)
    dims_spelled: dict[bytes, str] = {}
    names_spelled: set[bytes] = set()
    kept: dict[str, tuple[Array, _Member]] = {}
    for name, array in members:
        known = memo.get(name) if memo is not None else None
        member = known[1] if known is not None and known[0] is array else _member(name, array)
        kept[name] = (array, member)
        dims = member.dims
        if dims is None:
            plan.left_out[name] = member.why or "no dimension names (dimension_names, or _ARRAY_DIMENSIONS in v2)"
            continue
        why = member.why
        if why is None:
            for d, n in zip(dims, array.shape):
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
            plan.left_out[name] = why
            continue
        for d, u, n in zip(dims, member.dims_utf8, array.shape):
            plan.dims.setdefault(d, n)
            plan.dim_uses[d] = plan.dim_uses.get(d, 0) + 1
            dims_spelled[u] = d
        names_spelled.add(member.name_utf8)
        variable = Variable(name, array, dims, member.nc_type, member.attributes)
        if member.cdf5:
            plan.cdf5_variables.add(name)
        plan.variables.append(variable)
        plan.by_name[name] = variable
    if memo is not None:
        memo.clear()
        memo.update(kept)
    plan.attributes = encode_attributes(group_attributes, False)
    plan.cdf5_attributes = any(t in (NC_INT64, NC_UINT64) for _, t, _, _ in plan.attributes)
    plan.why = _needs_cdf5(plan)
    plan.version = 5 if plan.why else 2
    return plan


def _long_dims(dims: dict[str, int]) -> bool:
    return any(n > CDF2_DIM_LIMIT for n in dims.values())


# 64-bit integer arrays up to this many elements have their values read to see whether a
# classic type holds them (larger ones stay CDF-5 without a read)
NARROWED_MAX = 1 << 20


def _needs_cdf5(plan: NetcdfPlan) -> str:
    """What makes the file CDF-5 ("" where a 64-bit offset file holds it): from what the
    plan keeps, so that a plan taking one array out (`without`) asks no pass over all."""
    if plan.cdf5_variables:
        v = plan.by_name[min(plan.cdf5_variables)]
        if v.nc_type in CDF5_ONLY:
            return f"variable {v.name!r} is {TYPE_NAMES[v.nc_type]}"
        if v.vsize > CDF2_VSIZE_LIMIT:
            return f"variable {v.name!r} is past 4 GiB"
        return f"an attribute of variable {v.name!r} is a 64-bit or unsigned integer"
    if plan.cdf5_attributes:
        return "a global attribute is a 64-bit integer"
    if _long_dims(plan.dims):
        return "a dimension is past 2**31 - 1"
    return ""


def narrowed(plan: NetcdfPlan, values_of: Callable[[Array], np.ndarray]) -> NetcdfPlan:
    """The plan with each 64-bit integer variable of up to NARROWED_MAX elements whose values
    (and fill value) int32 holds stored as int32, or, for a CF time (units `... since ...`),
    double where it holds them exactly: a 64-bit offset file where nothing else needs CDF-5
    (`units` and `calendar` kept, so the times decode the same). `values_of` reads an array."""
    if plan.version != 5:
        return plan
    variables, changed = [], []
    by_name, cdf5_variables = dict(plan.by_name), set(plan.cdf5_variables)
    for v in plan.variables:
        nc_type = _narrow_type(v, values_of) if v.nc_type in (NC_INT64, NC_UINT64) else None
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
        by_name[v.name] = narrow
        if not _cdf5_variable(narrow):
            cdf5_variables.discard(v.name)
        changed.append(f"{v.name!r} {TYPE_NAMES[v.nc_type]} as {'int32' if nc_type == NC_INT else 'double'}")
    if not changed:
        return plan
    out = replace(plan, variables=variables, by_name=by_name, cdf5_variables=cdf5_variables)
    out.why = _needs_cdf5(out)
    out.version = 5 if out.why else 2
    if out.version == 2:
        out.why = "values that fit: " + ", ".join(changed)
    return out


def _cdf5_variable(v: Variable) -> bool:
    return v.nc_type in CDF5_ONLY or v.vsize > CDF2_VSIZE_LIMIT or any(t in CDF5_ONLY for _, t, _, _ in v.attributes)


def _narrow_type(v: Variable, values_of: Callable[[Array], np.ndarray]) -> int | None:
    if math.prod(v.array.shape) > NARROWED_MAX:
        return None
    values = values_of(v.array).reshape(-1)
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


def _header(plan: NetcdfPlan) -> bytes:
    h = Header(plan.version)
    h.parts.append(b"CDF" + bytes([plan.version]))
    h.count(0)  # number of records: no record dimension
    ids = {d: i for i, d in enumerate(plan.dims)}
    h.list_tag(NC_DIMENSION, len(plan.dims))
    for d, n in plan.dims.items():
        h.name(d)
        h.count(n)
    h.attributes(plan.attributes)
    h.list_tag(NC_VARIABLE, len(plan.variables))
    for v in plan.variables:
        h.name(v.name)
        h.count(len(v.dims))
        for d in v.dims:
            h.count(ids[d])
        h.attributes(v.attributes)
        h.parts.append(struct.pack(">i", v.nc_type))
        h.count(v.vsize)  # (one past a 64-bit offset file's limit made the file CDF-5)
        h.parts.append(struct.pack(h.offset, v.begin))
    return h.bytes()


KEPT_DATA_VIEWS = 8  # variables' `data` a dataset.nc view keeps made (the last read)


class NetcdfView(FileView):
    """`dataset.nc`: the header, then each variable's bytes at its `begin`, in order."""

    def __init__(self, plan: NetcdfPlan, chunks_of: Callable[[Array], Any] = lambda array: None) -> None:
        self.plan = plan  # as planned from the group's arrays (the tree asks whether it is current)
        plan = self._written = narrowed(plan, lambda array: read_values(array, chunks_of(array)))
        size = len(_header(plan))  # the header's length does not depend on the offsets in it
        for v in plan.variables:
            v.begin = size
            size += v.vsize
        self._size = size
        self._header = _header(plan)
        self._begins = [v.begin for v in plan.variables]
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
        v = self._written.variables[i]
        data = DataView(v.array, self._chunks_of(v.array))
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
        for i, (v, begin) in enumerate(zip(self._written.variables, self._begins)):
            if begin <= offset < begin + v.nbytes:
                scale = v.array.dtype.itemsize / v.itemsize  # (a narrowed variable's: 2)
                stop = int(min(offset + size - begin, v.nbytes) * scale)
                return self._data_of(i), int((offset - begin) * scale), stop
        return None

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self._size)
        parts, pos = [], offset
        if pos < min(end, len(self._header)):
            parts.append(self._header[pos:end])
            pos = min(end, len(self._header))
        for i, (v, begin) in enumerate(zip(self._written.variables, self._begins)):
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
    itemsize, read_size = v.itemsize, v.array.dtype.itemsize  # in the file; in `data`
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
