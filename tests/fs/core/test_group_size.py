"""A group of many arrays without a kernel (fs/decoded/tree.py, members.py): what a `find`
or a `rm -r` of one array costs does not grow with the number of its siblings. Counted in
calls (node states consulted, store calls), never timed; and what is kept per group (the
plan of its dataset.nc, taken one array out at a time) is what a fresh mount shows."""

from __future__ import annotations

import os
import random
import time
import warnings

import pytest

from zarrfs.format import ChunkCache, IOContext, fetched, hierarchy, open_hierarchy
from zarrfs.fs.decoded import (
    DecodedCore,
    erased,
    listing,
    members,
    nodes,
    refresh,
    siblings,
    store_keys,
    surroundings,
    tree,
    tree_views,
)
from zarrfs.fs.decoded.surroundings import Neighbours, TreeSurroundings
from zarrfs.fs.decoded.tree import Tree
from zarrfs.store import open_store
from zarrfs.views import info
from zarrfs.views import netcdf as netcdf_view
from zarrfs.views import netcdf_plan as plan_module

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

from tests.fs.core.groups import pool, xarray_group  # noqa: E402, F401 (pool: a fixture)
from tests.views.plan_work import count_plan_work  # noqa: E402

TTL = 600.0  # nothing expires during a test


def _core(root, pool) -> DecodedCore:
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    return DecodedCore(open_hierarchy(open_store(str(root)), context, metadata_ttl=0), metadata_ttl=TTL)


def _find(core: DecodedCore, path: str = "") -> int:
    """As `find` asks: each directory listed with its entries' attributes, each entry looked up."""
    count = 0
    for name, attributes in list(core.list_dir(path)):
        child = f"{path}/{name}" if path else name
        core.lookup(child)
        count += 1
        if attributes.is_dir and name != "chunks":
            count += _find(core, child)
    return count


def _rm_r(core: DecodedCore, path: str) -> None:
    """As `rm -r` asks: the directory listed, its files unlinked, its directories removed."""
    for name, attributes in list(core.list_dir(path)):
        child = f"{path}/{name}"
        core.lookup(child)
        if attributes.is_dir:
            _rm_r(core, child)
        else:
            core.unlink(child)
    core.rmdir(path)


def _counting_keys_read(core: DecodedCore) -> dict:
    """Counts the keys the store is asked for (a batch of N reads is N)."""
    store, read = core.hierarchy.store, {"keys": 0, "names": []}
    get_partial_values = store.get_partial_values

    def counted(requests, *args, **kwargs):
        read["keys"] += len(requests)
        read["names"] += [key for key, _ in requests]
        return get_partial_values(requests, *args, **kwargs)

    store.get_partial_values = counted
    return read


def _counting_node_states(monkeypatch, owner) -> dict:
    """Counts the calls of `owner.node_state` (in "n") from now on."""
    consulted = {"n": 0}
    node_state = owner.node_state

    def counted(self, path):
        consulted["n"] += 1
        return node_state(self, path)

    monkeypatch.setattr(owner, "node_state", counted)
    return consulted


def test_a_find_consults_each_node_a_bounded_number_of_times(tmp_path, pool, monkeypatch):
    """Each array's `info` says whether it is in the group's dataset.nc, and its data.tif
    finds its coordinates beside it: asked of every array, that was a pass over all of
    them each time (N squared). Twice the arrays now cost twice the node states."""
    consulted = _counting_node_states(monkeypatch, Tree)
    costs = {}
    for n in (40, 80):
        xarray_group(tmp_path / str(n), n)
        core = _core(tmp_path / str(n), pool)
        consulted["n"] = 0
        assert _find(core) > 10 * n
        costs[n] = consulted["n"]
        core.close()
    assert costs[80] < 2.5 * costs[40], costs


def test_rm_of_one_array_reads_no_more_from_the_store_in_a_larger_group(tmp_path, pool):
    """The group's listing loses the erased name; it was dropped and read again from the
    store (a document read per sibling), for every array a `rm -r` removed."""
    calls = {}
    for n in (10, 60):
        xarray_group(tmp_path / str(n), n)
        core = _core(tmp_path / str(n), pool)
        list(core.list_dir(""))  # as `ls` first: the arrays' own directories are not yet listed
        read = _counting_keys_read(core)
        for i in range(3):
            _rm_r(core, f"a{i:03d}")
        calls[n] = read["keys"]
        assert f"a{0:03d}" not in dict(core.list_dir(""))
        core.close()
        assert sorted(zarr.open_group(str(tmp_path / str(n)), mode="r").array_keys()) == sorted(
            ["x", "y"] + [f"a{i:03d}" for i in range(3, n)]
        )
    assert calls[60] <= calls[10], calls


def test_rm_of_one_array_copies_no_more_in_a_larger_group(tmp_path, pool, monkeypatch):
    """Each array removed took it out of the group's dataset.nc plan with a copy of the
    plan's N variables (0.8 ms a removal in a group of 20,000; every next array's `info`
    asks the plan), and out of the group's listing with a copy of its N names. Both share
    them now: what a removal copies and the names gone it looks at are the same in a
    group of 20 and of 200."""
    work = {"copied": 0, "looked": 0, "removed": 0, "names copied": 0, "names gone": 0}
    without = plan_module.NetcdfPlan.without
    count_plan_work(monkeypatch, work)

    def counted_without(self, name):
        work["removed"] += 1
        return without(self, name)

    def counted_copy(self):
        work["names copied"] += len(self)
        return copied(self)

    def counted_name_gone(self, name):
        work["names gone"] += 1
        return name_gone(self, name)

    copied, name_gone = listing.Listing._copied, listing.Listing.gone
    monkeypatch.setattr(listing.Listing, "_copied", counted_copy)
    monkeypatch.setattr(listing.Listing, "gone", counted_name_gone)
    monkeypatch.setattr(plan_module.NetcdfPlan, "without", counted_without)
    costs = {}
    for n in (20, 200):
        xarray_group(tmp_path / str(n), n)
        core = _core(tmp_path / str(n), pool)
        list(core.list_dir(""))  # as `ls` first: the plan made
        work.update({k: 0 for k in work})
        for i in range(3):
            _rm_r(core, f"a{i:03d}")
            assert _netcdf_line(core, f"a{i + 1:03d}") == f"variable 'a{i + 1:03d}' (netCDF-3 64-bit offset)"
        costs[n] = dict(work)
        assert [name for name, _ in core.list_dir("") if name[0] == "a"] == [f"a{i:03d}" for i in range(3, n)]
        core.close()
    assert costs[200] == costs[20] and costs[20]["removed"] == 3, costs
    assert costs[20]["copied"] == costs[20]["names copied"] == 0 < costs[20]["names gone"], costs


def test_a_listing_without_names_is_the_names_left_and_listings_before_stay():
    """A group's listing taken one erased name out at a time (listing.py): the names left,
    in order, by position, in reverse; a listing made before stays as it was, and one
    made from a listing that is not its line's last is its own."""
    names = [f"a{i:04d}" for i in range(600)]
    order = list(names)
    random.Random(3).shuffle(order)
    listings, left = [listing.Listing(names)], list(names)
    for name in [*order[:500], "absent"]:
        listings.append(listings[-1].without(name))
        left = [n for n in left if n != name]
        now = listings[-1]
        assert list(now) == left and len(now) == len(left) and list(reversed(now)) == left[::-1], name
        assert now[len(left) // 2] == left[len(left) // 2] and now[1:4] == left[1:4] and now == left
        assert name not in now and (not left or left[-1] in now)
    assert [list(one) for one in listings[:3]] == [
        names,
        [n for n in names if n != order[0]],
        [n for n in names if n not in order[:2]],
    ]
    other = listings[1].without(order[5])
    assert list(other) == [n for n in names if n not in (order[0], order[5])]
    assert list(listings[2]) == [n for n in names if n not in order[:2]]


def test_a_node_removed_through_the_mount_is_missing_without_a_store_call(tmp_path, pool):
    """After each removal the adapter asks whether the name is gone, and `rm -r` of a
    group comes back to the paths below: each was a read of the node's documents and a
    listing of its prefix. Made again through the mount, the node is there at once."""
    xarray_group(tmp_path, 3)
    core = _core(tmp_path, pool)
    list(core.list_dir(""))
    _rm_r(core, "a001")
    asked = {k: v for k, v in core.stats().items() if k in ("store_get", "store_list")}
    assert core.lookup("a001") is None and core.lookup("a001/info") is None
    assert {k: v for k, v in core.stats().items() if k in asked} == asked
    assert core.mkdir("a001").is_dir and core.lookup("a001").is_dir
    core.close()
    assert "a001" in zarr.open_group(str(tmp_path), mode="r").group_keys()


class _Clock:
    """time.monotonic moved ahead at will, for the modules that keep metadata for the
    ttl (the store's own deadlines keep the real one)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead


def test_a_walk_past_the_ttl_reads_the_group_again_in_batches(tmp_path, pool, monkeypatch):
    """Once the ttl has passed, each node a walk comes to is read again: one store call
    and one worker per member, asked one after the other. Each refresh now reads the next
    members listed with its own, in one batch: the store calls of a walk, and the nodes a
    single `stat` parses, do not grow with the group (siblings.py)."""
    clock = _Clock()
    for module in (tree, nodes, members, hierarchy):
        monkeypatch.setattr(module, "time", clock)
    parsed = {"n": 0}
    parse_node = hierarchy.parse_node

    def counted_parse(*args, **kwargs):
        parsed["n"] += 1
        return parse_node(*args, **kwargs)

    monkeypatch.setattr(hierarchy, "parse_node", counted_parse)
    n = 3 * siblings.AHEAD
    xarray_group(tmp_path, n)
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    core = DecodedCore(open_hierarchy(open_store(str(tmp_path)), context, metadata_ttl=TTL), metadata_ttl=TTL)
    _find(core)
    batches = {"n": 0}
    read = _counting_keys_read(core)
    get_partial_values = core.hierarchy.store.get_partial_values

    def counted_batch(requests, *args, **kwargs):
        batches["n"] += 1
        return get_partial_values(requests, *args, **kwargs)

    core.hierarchy.store.get_partial_values = counted_batch
    clock.ahead += TTL + 1
    parsed["n"] = 0
    assert core.lookup("a010").is_dir
    # its group, the node asked for and the members listed after it: not the whole group
    assert parsed["n"] <= siblings.AHEAD + 2 and read["keys"] <= siblings.AHEAD + 2, (parsed, read["keys"])
    _find(core)
    # every node parsed again once, read in batches (a call per member before)
    assert batches["n"] <= 2 * n / siblings.AHEAD + 5, batches
    assert parsed["n"] <= n + 10, parsed
    core.close()


def _read(core: DecodedCore, path: str) -> bytes:
    file = core.open(path, os.O_RDONLY)
    try:
        return bytes(file.read(0, core.lookup(path).size))
    finally:
        file.release()


LAYOUTS = {
    # a3 is left out for a0's and a2's sake (t is 3 long there): each removal plans anew
    "contested": (
        [
            ("a0", (3, 5), "int16", ["t", "x"]),
            ("a1", (4, 5), "int16", ["y", "x"]),
            ("a2", (3,), "uint32", ["t"]),
            ("a3", (6, 5), "int16", ["t", "x"]),
            ("a4", (2,), "int8", None),
        ],
        ("a4", "a2", "a0", "a1"),
    ),
    # none is: each removal takes one out of the plan kept (t comes last once b0 is gone;
    # the file is 64-bit offset once the uint32 b2 is)
    "plain": (
        [
            ("b0", (3, 5), "int16", ["t", "x"]),
            ("b1", (4, 5), "int16", ["y", "x"]),
            ("b2", (3,), "uint32", ["t"]),
            ("b3", (2,), "int8", None),
            ("b4", (3, 4), "float32", ["t", "y"]),
        ],
        ("b3", "b0", "b2", "b1"),
    ),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_what_a_group_keeps_of_its_members_after_removals_is_what_a_fresh_mount_shows(tmp_path, pool, layout):
    """dataset.nc and each array's line about it in `info`, after arrays are removed one
    at a time, against a core that reads the group anew: an array left out for another's
    sake comes in once that one is gone, and the dimensions keep the order in which the
    remaining variables name them."""
    root = tmp_path / "s"
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    arrays, removals = LAYOUTS[layout]
    for name, shape, dtype, dims in arrays:
        group.create_array(name, shape=shape, chunks=shape, dtype=dtype, dimension_names=dims)
    core = _core(root, pool)
    _find(core)
    if layout == "contested":
        assert _netcdf_line(core, "a3").startswith("left out")
    for gone in removals:
        _rm_r(core, gone)
        fresh = _core(root, pool)
        assert core.lookup("dataset.nc").size == fresh.lookup("dataset.nc").size, gone
        assert _read(core, "dataset.nc") == _read(fresh, "dataset.nc"), gone
        for name, _ in fresh.list_dir(""):  # each array's line in `info` (rendered again after the ttl)
            if name[1:].isdigit():
                assert _netcdf_line(core, name) == _netcdf_line(fresh, name), (gone, name)
        fresh.close()
    if layout == "contested":
        assert _netcdf_line(core, "a3").startswith("variable")  # a0 and a2 held t at 3: gone, a3 is in
    core.close()


def _netcdf_line(core: DecodedCore, path: str) -> str | None:
    return info._netcdf_line(core.tree.array(path), Neighbours(core.tree.around, path))


def test_rm_r_of_a_group_removes_its_dataset_nc_gone_with_its_last_array(tmp_path, pool):
    """`rm -r` lists a group's dataset.nc after its arrays and unlinks it last: by then it
    went with the last array. That unlink failed ENOENT, and rm left the group in place."""
    root = tmp_path / "s"
    group = zarr.open_group(str(root), mode="w", zarr_format=3).create_group("g")
    for i in range(3):
        group.create_array(f"a{i}", shape=(4,), chunks=(4,), dtype="float32", dimension_names=["x"])
    core = _core(root, pool)
    list(core.list_dir(""))
    assert "dataset.nc" in dict(core.list_dir("g"))
    _rm_r(core, "g")
    assert "g" not in dict(core.list_dir(""))
    core.close()
    assert list(zarr.open_group(str(root), mode="r").members()) == []


def test_a_group_listed_again_reads_no_document_of_the_children_it_knew(tmp_path, pool):
    """Past the ttl a group is listed again: the children found nodes before stay nodes
    while the store lists them, their documents not read again (each is, when its node is
    asked for); a find of 20,000 arrays listed the group again every ttl, 20,000 reads."""
    xarray_group(tmp_path / "s", 30)
    core = _core(tmp_path / "s", pool)
    first = core.hierarchy.children("")
    zarr.open_group(str(tmp_path / "s"), mode="a").create_array("new", shape=(2,), dtype="int8")
    read = _counting_keys_read(core)
    assert core.hierarchy.children("", known=first) == sorted([*first, "new"])
    assert [k for k in read["names"] if "/" in k] == ["new/zarr.json"]  # (and the root's own)
    core.close()


def _counting_names_listed(core: DecodedCore) -> dict:
    """Counts the names the store's listings return (a listing of a group of N is N)."""
    store, listed = core.hierarchy.store, {"names": 0, "prefixes": []}
    list_dir = store.list_dir

    def counted(prefix, *args, **kwargs):
        keys, prefixes = list_dir(prefix, *args, **kwargs)
        listed["names"] += len(keys) + len(prefixes)
        listed["prefixes"].append(prefix)
        return keys, prefixes

    store.list_dir = counted
    return listed


def test_one_arrays_files_past_the_ttl_cost_the_same_in_a_larger_group(tmp_path, pool, monkeypatch):
    """Past the ttl, `ls -l` of one array's directory (its `info` says where it stands in
    the group's dataset.nc, its `data.tif` looks for coordinates beside it) read the
    group's listing again, N names, for each ttl a walk lasts: a walk of N arrays listed
    the group N / (arrays walked per ttl) times, N squared. The group is listed again
    when it is listed itself; one array's files consult it as last listed."""
    clock = _Clock()
    for module in (tree, nodes, members, hierarchy, fetched, refresh, erased, tree_views, store_keys):
        monkeypatch.setattr(module, "time", clock)
    plans = {"n": 0}
    netcdf_plan = netcdf_view.netcdf_plan

    def counted_plan(*args, **kwargs):
        plans["n"] += 1
        return netcdf_plan(*args, **kwargs)

    monkeypatch.setattr(netcdf_view, "netcdf_plan", counted_plan)
    costs = {}
    for n in (20, 100):
        xarray_group(tmp_path / str(n), n)
        context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
        hierarchy_ = open_hierarchy(open_store(str(tmp_path / str(n))), context, metadata_ttl=TTL)
        core = DecodedCore(hierarchy_, metadata_ttl=TTL)
        _find(core)
        listed = _counting_names_listed(core)
        plans["n"] = 0
        work = []
        for name in ("a003", "a007", "a011"):
            clock.ahead += TTL + 1
            for file, _ in list(core.list_dir(name)):
                core.lookup(f"{name}/{file}")
                if file == "info":
                    assert b"variable " + name.encode() in _read(core, f"{name}/info").replace(b"'", b"")
            work.append((listed["names"], plans["n"]))
        costs[n] = work
        core.close()
    assert costs[100] == costs[20], costs


def test_dataset_nc_past_the_ttl_plans_again_only_what_changed(tmp_path, pool, monkeypatch):
    """dataset.nc is laid out again past the ttl, from its members as stored: every
    member was opened and gathered again and the plan made anew, whatever changed, for
    each `stat` past the ttl. Now their states are brought up to date in batches, the
    plan is kept where none changed, and an array another writer changed is gathered
    again alone; the file is what a fresh mount shows."""
    clock = _Clock()
    for module in (tree, nodes, members, hierarchy, fetched, refresh, erased, tree_views, store_keys, surroundings):
        monkeypatch.setattr(module, "time", clock)
    work = {"gathered": 0, "plans": 0}
    gather, netcdf_plan = TreeSurroundings._gather_arrays, netcdf_view.netcdf_plan

    def counted_gather(self, path, names):
        work["gathered"] += len(names)
        return gather(self, path, names)

    def counted_plan(*args, **kwargs):
        work["plans"] += 1
        return netcdf_plan(*args, **kwargs)

    monkeypatch.setattr(TreeSurroundings, "_gather_arrays", counted_gather)
    monkeypatch.setattr(netcdf_view, "netcdf_plan", counted_plan)
    costs = {}
    for n in (20, 100):
        root = tmp_path / str(n)
        xarray_group(root, n)
        context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
        core = DecodedCore(open_hierarchy(open_store(str(root)), context, metadata_ttl=TTL), metadata_ttl=TTL)
        _find(core)
        before = _read(core, "dataset.nc")
        steps = []
        for change in (None, "units", "long_name"):
            if change is not None:  # another writer
                zarr.open_array(str(root / "a005"), mode="r+").attrs[change] = "m"
            clock.ahead += TTL + 1
            work.update(gathered=0, plans=0)
            core.lookup("dataset.nc")
            steps.append(dict(work))
            fresh = _core(root, pool)
            assert _read(core, "dataset.nc") == _read(fresh, "dataset.nc") != before or change is None
            fresh.close()
        costs[n] = steps
        core.close()
    assert costs[100] == costs[20], costs
    assert costs[20] == [{"gathered": 0, "plans": 0}] + [{"gathered": 1, "plans": 1}] * 2, costs


def test_a_member_another_writer_made_a_group_or_an_array_leaves_or_joins_dataset_nc(tmp_path, pool, monkeypatch):
    """A member found changed is gathered again alone: one that became a group leaves
    the group's arrays, one that became an array joins them in the listing's order; the
    file and each array's line in `info` are what a fresh mount shows."""
    clock = _Clock()
    for module in (tree, nodes, members, hierarchy, fetched, refresh, erased, tree_views, store_keys, surroundings):
        monkeypatch.setattr(module, "time", clock)
    root = tmp_path / "s"
    xarray_group(root, 6)
    zarr.open_group(str(root), mode="a").create_group("a006")
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    core = DecodedCore(open_hierarchy(open_store(str(root)), context, metadata_ttl=TTL), metadata_ttl=TTL)
    _find(core)
    _read(core, "dataset.nc")
    group = zarr.open_group(str(root), mode="a")
    group.create_group("a002", overwrite=True)
    group.create_array("a006", shape=(4,), chunks=(4,), dtype="int16", dimension_names=["y"], overwrite=True)
    clock.ahead += TTL + 1
    fresh = _core(root, pool)
    assert core.lookup("dataset.nc").size == fresh.lookup("dataset.nc").size
    assert _read(core, "dataset.nc") == _read(fresh, "dataset.nc")
    for name in ("a001", "a003", "a006"):
        assert _netcdf_line(core, name) == _netcdf_line(fresh, name) is not None, name
    fresh.close()
    core.close()
