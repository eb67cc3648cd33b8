"""What a group's `dataset.nc` holds (netcdf.py plans it): its dimensions, variables and
the arrays left out with why, and the plan once one array is gone (`without`), made
without a copy of the group's N variables: the plans made one from another share what
was planned and the names taken out since, each plan seeing those gone by its own step."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .netcdf_format import CDF2_DIM_LIMIT, CDF2_VSIZE_LIMIT, CDF5_ONLY, NC_DTYPE, TYPE_NAMES

if TYPE_CHECKING:
    from ..format import Array


@dataclass(slots=True)
class Variable:
    """A variable of the file: what its array's metadata decided (the array itself is
    looked up where its values are read: `NetcdfPlan.array_of`, not held per variable)."""

    name: str
    path: str  # its array's
    shape: tuple[int, ...]
    read_itemsize: int  # of its array's data type, as `data` shows it
    dims: tuple[str, ...]
    nc_type: int
    attributes: Sequence[tuple[str, int, bytes, int]]  # (name, nc type, big-endian values, count)

    @property
    def itemsize(self) -> int:
        """In the file (a narrowed variable's is less than its array's)."""
        return np.dtype(NC_DTYPE[self.nc_type]).itemsize

    @property
    def nbytes(self) -> int:
        return int(math.prod(self.shape) * self.itemsize)

    @property
    def vsize(self) -> int:
        return self.nbytes + (-self.nbytes % 4)


class _Planned:
    """What a line of plans share: the variables (in order), the arrays left out and the
    names of the variables that need CDF-5 (sorted) as planned, and each name taken out
    since with the step of the line it went at (`gone`). Only the line's last plan adds
    to it (`last`); a plan made from another is a new line (`NetcdfPlan.without`)."""

    __slots__ = ("by_name", "cdf5", "gone", "last", "left_out", "variables")

    def __init__(self, variables: list[Variable], left_out: dict[str, str], cdf5: list[str]) -> None:
        self.variables = variables
        self.by_name = {v.name: v for v in variables}
        self.left_out = left_out
        self.cdf5 = cdf5
        self.gone: dict[str, int] = {}
        self.last = 0

    def size(self) -> int:
        return len(self.variables) + len(self.left_out)


class _Live(Mapping[str, Any]):
    """Name -> what `planned` holds of it, as a plan at `step` sees it (without those gone)."""

    __slots__ = ("_count", "_held", "_plan")

    def __init__(self, plan: NetcdfPlan, held: dict[str, Any], count: int) -> None:
        self._plan, self._held, self._count = plan, held, count

    def __getitem__(self, name: str) -> Any:
        if self._plan.gone(name):
            raise KeyError(name)
        return self._held[name]

    def __contains__(self, name: object) -> bool:
        return name in self._held and not self._plan.gone(str(name))

    def __iter__(self) -> Iterator[str]:
        return (n for n in self._held if not self._plan.gone(n))

    def __len__(self) -> int:
        return self._count


@dataclass
class NetcdfPlan:
    """What `dataset.nc` holds: dimensions, variables, global attributes, the format
    version, and the arrays left out with why. (The rest is what `without` needs to take
    one array out without planning again.)"""

    dims: dict[str, int] = field(default_factory=dict)
    attributes: list[Any] = field(default_factory=list)
    version: int = 2
    why: str = ""  # what makes it CDF-5, or which variables were narrowed to stay 64-bit offset
    dim_uses: dict[str, int] = field(default_factory=dict)  # variables over each dimension
    cdf5_attributes: bool = False  # the group's attributes need it
    contested: bool = False  # an array is left out for another's sake: one out may let it in
    planned: _Planned = field(default_factory=lambda: _Planned([], {}, []))
    step: int = 0  # of the line of plans `planned` holds: the names gone by then are gone
    counts: tuple[int, int] = (0, 0)  # variables and arrays left out, as this plan sees them
    first: int = 0  # where its first variable is in planned.variables (those before: gone)
    first_cdf5: int = 0  # and its first variable that needs CDF-5 in planned.cdf5
    # the array a variable shows, as its values are read (the caller's: `array_of`)
    arrays: Callable[[Variable], Array] | None = None

    @classmethod
    def of(cls, variables: list[Variable], left_out: dict[str, str], cdf5: list[str], **fields: Any) -> NetcdfPlan:
        """A plan of these variables (in order), arrays left out, and variables that need CDF-5."""
        planned = _Planned(variables, left_out, sorted(cdf5))
        plan = cls(planned=planned, counts=(len(variables), len(left_out)), **fields)
        plan.why = needs_cdf5(plan)
        plan.version = 5 if plan.why else 2
        return plan

    def array_of(self, variable: Variable) -> Array:
        """The array `variable` shows, as planned (looked up by who planned it: the plan
        holds what the metadata decided, not each member's parsed array)."""
        if self.arrays is None:
            raise LookupError(f"no array for variable {variable.name!r}: planned without a way to find one")
        return self.arrays(variable)

    def gone(self, name: str) -> bool:
        at = self.planned.gone.get(name)
        return at is not None and at <= self.step

    @property
    def variables(self) -> Iterator[Variable]:
        """Its variables, in order (a pass over them: `by_name` finds one)."""
        held = self.planned.variables
        return (held[i] for i in range(self.first, len(held)) if not self.gone(held[i].name))

    @property
    def variable_count(self) -> int:
        return self.counts[0]

    @property
    def by_name(self) -> Mapping[str, Variable]:
        if self.step == 0:  # (the first of its line: none gone)
            return self.planned.by_name
        return _Live(self, self.planned.by_name, self.counts[0])

    @property
    def left_out(self) -> Mapping[str, str]:
        if self.step == 0:
            return self.planned.left_out
        return _Live(self, self.planned.left_out, self.counts[1])

    def first_needing_cdf5(self) -> Variable | None:
        """The variable first by name of those that need CDF-5 (None: none does)."""
        names = self.planned.cdf5
        at = self.first_cdf5
        while at < len(names) and self.gone(names[at]):
            at += 1
        return self.planned.by_name[names[at]] if at < len(names) else None

    @property
    def shown(self) -> bool:
        """Whether the group shows `dataset.nc`: some variable has a named dimension (a
        group of scalars, or of arrays without dimension names, is no dataset)."""
        return any(v.dims for v in self.variables)

    def without(self, name: str) -> NetcdfPlan | None:
        """The plan once the array `name` is gone (erased), made from this one without a
        copy of its variables (the name is marked gone at the next step of the line of
        plans this one is the last of; one not the last, or a line whose names gone come
        to a quarter of those planned, starts a new line: a copy, a removal in N / 4);
        None where planning again may differ (it held a variable an array is left out
        for). This plan is left as it is: a view may hold it."""
        variable = self.by_name.get(name)
        if variable is not None and self.contested:
            return None
        left = name in self.left_out
        plan = self if self.planned.last == self.step else self._copied()
        planned, step = plan.planned, plan.step + 1
        if variable is not None or left:
            planned.gone[name] = step
        planned.last = step
        counts = (plan.counts[0] - (variable is not None), plan.counts[1] - left)
        out = replace(plan, step=step, counts=counts)
        if variable is not None:
            out._take_out(variable)
        if 4 * len(planned.gone) > planned.size() + 256:
            out = out._copied()
        return out

    def _take_out(self, variable: Variable) -> None:
        """Its dimensions and what makes it CDF-5, once `variable` is gone from it."""
        held = self.planned.variables
        while self.first < len(held) and self.gone(held[self.first].name):
            self.first += 1  # (each passed once in a line: the line's plans start there)
        uses = dict(self.dim_uses)
        for d in variable.dims:
            uses[d] -= 1
        dims = {d: n for d, n in self.dims.items() if uses[d] > 0}
        if any(uses[d] > 0 for d in variable.dims):  # in the order they come first, as planned
            dims = {}
            for v in self.variables:
                for d in v.dims:
                    dims.setdefault(d, self.dims[d])
                if len(dims) == len(self.dims) - sum(1 for n in uses.values() if n <= 0):
                    break  # (all found: a pass over the first few variables, as a rule)
        self.dims = dims
        self.dim_uses = {d: n for d, n in uses.items() if n > 0}
        cdf5 = self.planned.cdf5
        while self.first_cdf5 < len(cdf5) and self.gone(cdf5[self.first_cdf5]):
            self.first_cdf5 += 1
        self.why = needs_cdf5(self)
        self.version = 5 if self.why else 2

    def _copied(self) -> NetcdfPlan:
        """This plan, the first of a line of its own (its variables copied)."""
        variables = list(self.variables)
        left_out = dict(self.left_out.items())
        cdf5 = [n for n in self.planned.cdf5[self.first_cdf5 :] if not self.gone(n)]
        planned = _Planned(variables, left_out, cdf5)
        return replace(self, planned=planned, step=0, counts=(len(variables), len(left_out)), first=0, first_cdf5=0)


def _long_dims(dims: dict[str, int]) -> bool:
    return any(n > CDF2_DIM_LIMIT for n in dims.values())


def needs_cdf5(plan: NetcdfPlan) -> str:
    """What makes the file CDF-5 ("" where a 64-bit offset file holds it): from what the
    plan keeps, so that a plan taking one array out (`without`) asks no pass over all."""
    v = plan.first_needing_cdf5()
    if v is not None:
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


def cdf5_variable(v: Variable) -> bool:
    return v.nc_type in CDF5_ONLY or v.vsize > CDF2_VSIZE_LIMIT or any(t in CDF5_ONLY for _, t, _, _ in v.attributes)
