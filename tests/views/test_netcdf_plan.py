"""The plan of a group's dataset.nc once arrays are gone (views/netcdf_plan.py): taken one
array out at a time, without a copy of the group's variables, it is the plan of the arrays
left, and a plan made before stays as it was (a view holds it). Counted, never timed."""

from __future__ import annotations

import random
import warnings

import pytest

from tests.views.plan_work import count_plan_work
from zarrfs.format import open_hierarchy
from zarrfs.store import open_store
from zarrfs.views.netcdf import NetcdfView, netcdf_plan

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

# (shape, dtype, dimension names): over y and x, a CDF-5 type over t, no dimension names,
# over t and y (t comes first in the file once the arrays before it are gone)
KINDS = [
    ((4, 5), "float32", ["y", "x"]),
    ((3,), "uint32", ["t"]),
    ((2,), "int8", None),
    ((3, 4), "float64", ["t", "y"]),
]


@pytest.fixture
def arrays(tmp_path):
    """One array of each kind, as zarrfs opens them (written by zarr-python)."""
    group = zarr.open_group(str(tmp_path), mode="w", zarr_format=3)
    for i, (shape, dtype, dims) in enumerate(KINDS):
        group.create_array(f"k{i}", shape=shape, chunks=shape, dtype=dtype, dimension_names=dims)
    hierarchy = open_hierarchy(open_store(str(tmp_path)))
    return [hierarchy.open_node(f"k{i}") for i in range(len(KINDS))]


def _members(arrays, n: int, kinds: int) -> list:
    """n arrays of the first `kinds` kinds in turn, by name (sorted, as a group lists them)."""
    return [(f"a{i:05d}", arrays[i % kinds]) for i in range(n)]


def _shown(plan) -> tuple:
    """What the file and `info` show of a plan: its size, header, version and why, and
    each array's place in it."""
    view = NetcdfView(plan)
    header = view.read(0, min(view.begins, default=view.size()))
    return view.size(), header, plan.version, plan.why, dict(plan.left_out.items()), sorted(plan.by_name)


def test_a_plan_without_arrays_is_the_plan_of_those_left_and_plans_before_stay(arrays):
    members = _members(arrays, 40, len(KINDS))
    order = [name for name, _ in members]
    random.Random(7).shuffle(order)
    plans = [netcdf_plan({}, members)]
    seen = [_shown(plans[0])]
    left = list(members)
    for name in order[:-1]:
        plans.append(plans[-1].without(name))
        left = [(n, a) for n, a in left if n != name]
        seen.append(_shown(plans[-1]))
        assert seen[-1] == _shown(netcdf_plan({}, left)), name
    assert [_shown(p) for p in plans] == seen  # the plans made before, as they were


def test_two_plans_made_from_one_are_each_the_plan_of_its_arrays(arrays):
    members = _members(arrays, 12, len(KINDS))
    plan = netcdf_plan({}, members).without("a00003")
    first, second = plan.without("a00005"), plan.without("a00000")  # (the second: not its line's last plan)
    again = first.without("a00001")
    for made, gone in (
        (first, {"a00003", "a00005"}),
        (second, {"a00003", "a00000"}),
        (again, {"a00003", "a00005", "a00001"}),
    ):
        assert _shown(made) == _shown(netcdf_plan({}, [(n, a) for n, a in members if n not in gone])), gone
    assert _shown(plan) == _shown(netcdf_plan({}, [(n, a) for n, a in members if n != "a00003"]))


def test_a_removal_costs_the_same_in_a_larger_group(arrays, monkeypatch):
    """Each removal copied the plan's variables (a list and a dictionary of N: 20,000 in a
    large group), for every array a `rm -r` removed. Now the plans share them: a copy of
    those left once a quarter of them are gone (amortized: a few entries a removal), and
    the names gone looked at per removal do not grow with the group."""
    work = {"copied": 0, "looked": 0}
    count_plan_work(monkeypatch, work)
    costs = {}
    for n in (20, 2000):
        plan = netcdf_plan({}, _members(arrays, n, 2))  # (over y and x, and t: uint32)
        work.update(copied=0, looked=0)
        for i in range(10):  # the first ones, as `rm -r` of the group takes them
            plan = plan.without(f"a{i:05d}")
        costs[n] = dict(work)
        work.update(copied=0)
        for i in range(10, n):
            plan = plan.without(f"a{i:05d}")
        assert plan.variable_count == 0 and not plan.shown
        assert work["copied"] <= 3 * n, (n, work)  # every array gone: a few copies of the rest
    assert costs[2000] == costs[20] and costs[20]["copied"] == 0, costs
