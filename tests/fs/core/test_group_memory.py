"""What a walk of a large group costs in store reads and in memory, without a kernel:
documents read ahead with a group's listing are kept until their nodes are opened, and
read again in batches (not one by one) where the walk outlasts `--metadata-ttl`
(format/fetched.py); a member's metadata changed by another writer is still seen
within the ttl."""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
import warnings

import numpy as np
import pytest

from zarrfs.format import ChunkCache, IOContext, fetched, hierarchy, open_hierarchy
from zarrfs.fs.decoded import DecodedCore, erased, members, nodes, refresh, store_keys, surroundings, tree, tree_views
from zarrfs.fs.decoded import resolved as resolved_module
from zarrfs.fs.inodes import BYTES_PER_NAME, InodeTable
from zarrfs.store import open_store

netCDF4 = pytest.importorskip("netCDF4")
warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

from tests.fs.core.groups import pool, xarray_group  # noqa: E402, F401 (pool: a fixture)

TTL = 10.0
AHEAD = 64  # (fetched.AHEAD)


class _Clock:
    """time.monotonic moved ahead at will (the store's own deadlines keep the real one)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead


@pytest.fixture
def clock(monkeypatch):
    clock = _Clock()
    for module in (tree, nodes, members, hierarchy, fetched, refresh, erased, tree_views, store_keys, surroundings):
        monkeypatch.setattr(module, "time", clock)
    return clock


def _group(root, n: int) -> None:
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for i in range(n):
        group.create_array(f"a{i:03d}", shape=(4, 5), chunks=(4, 5), dtype="float32", dimension_names=["y", "x"])


def _counting_reads(core: DecodedCore) -> dict[str, int]:
    """The store's batches of reads (calls) and the metadata documents read in them."""
    counts = {"calls": 0, "documents": 0}
    store = core.hierarchy.store
    get_partial_values = store.get_partial_values

    def counted(requests, *args, **kwargs):
        counts["calls"] += 1
        counts["documents"] += sum(1 for key, _ in requests if key.rsplit("/", 1)[-1] == "zarr.json")
        return get_partial_values(requests, *args, **kwargs)

    store.get_partial_values = counted
    return counts


def test_documents_read_ahead_outlast_the_ttl_and_are_read_again_in_batches(tmp_path, pool, clock):
    """A walk of a group listed once, that comes to its members only after the ttl has
    passed (a loaded machine's walk of 20,000), their node states dropped meanwhile (the
    metadata share: the walk's next are the least recently consulted) and their documents
    kept: they are read again in batches of AHEAD, not one store call per member."""
    n = 3 * AHEAD
    _group(tmp_path, n)
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    hierarchy_ = open_hierarchy(open_store(str(tmp_path)), context, metadata_ttl=TTL)
    core = DecodedCore(hierarchy_, metadata_ttl=TTL, metadata_limit=int(16 * 4096 / nodes.STATES_SHARE))
    counts = _counting_reads(core)
    names = [name for name, _ in core.list_dir("") if name.startswith("a")]
    assert len(names) == n
    assert core.tree.shed > n / 2  # (kept as documents, at the time they were read)
    listed = dict(counts)
    assert listed["documents"] >= n  # read ahead with the listing
    # another writer changes a member meanwhile: seen, the ttl having passed
    zarr.open_array(str(tmp_path / "a100"), mode="r+").attrs["changed"] = 1
    clock.ahead += TTL + 1
    for name in names:
        core.lookup(name)
    calls, documents = counts["calls"] - listed["calls"], counts["documents"] - listed["documents"]
    assert calls <= n // AHEAD + 8, counts  # one by one: n calls
    assert documents <= n + 8, counts  # each read again once
    assert core.tree.node("a100").metadata.attributes.get("changed") == 1
    core.close()


def test_documents_read_ahead_within_the_ttl_are_not_read_again(tmp_path, pool, clock):
    n = 2 * AHEAD
    _group(tmp_path, n)
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    core = DecodedCore(open_hierarchy(open_store(str(tmp_path)), context, metadata_ttl=TTL), metadata_ttl=TTL)
    counts = _counting_reads(core)
    names = [name for name, _ in core.list_dir("") if name.startswith("a")]
    listed = dict(counts)
    clock.ahead += TTL / 3
    for name in names:
        core.lookup(name)
    assert counts == listed
    core.close()


def _read(core: DecodedCore, path: str) -> bytes:
    file = core.open(path, os.O_RDONLY)
    try:
        return bytes(file.read(0, core.lookup(path).size))
    finally:
        file.release()


def _walk(core: DecodedCore, path: str = "") -> None:
    """As `find` asks: each directory listed with its entries' attributes, each entry looked up."""
    for name, attributes in list(core.list_dir(path)):
        child = f"{path}/{name}" if path else name
        core.lookup(child)
        if attributes.is_dir and name != "chunks":
            _walk(core, child)


def _walked_group(tmp_path, pool, n: int) -> tuple[DecodedCore, IOContext]:
    """A group of `n` arrays with values, walked whole by a core whose metadata share
    keeps the node states of a few (and its context)."""
    xarray_group(tmp_path, n, values=True)
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    hierarchy_ = open_hierarchy(open_store(str(tmp_path)), context, metadata_ttl=TTL)
    core = DecodedCore(hierarchy_, metadata_ttl=TTL, metadata_limit=int(16 * 4096 / nodes.STATES_SHARE))
    _walk(core)
    return core, context


def test_a_walk_and_a_read_of_dataset_nc_keep_no_pending_write_set_per_array(tmp_path, pool):
    """Each array whose data views were made had a pending-write set (with its parsed
    array) for as long as the mount ran, and dataset.nc held a data view of every member:
    N sets. Now the sets of arrays with nothing pending go with the views that use them,
    and dataset.nc makes a variable's data view when it is read (the last few kept)."""
    n = 120
    core, _context = _walked_group(tmp_path, pool, n)
    raw = _read(core, "dataset.nc")
    gc.collect()
    live = sum(1 for obj in gc.get_objects() if type(obj).__name__ == "PendingWrites")
    assert live <= n // 3, live
    # what dataset.nc shows: as netCDF4 reads it, the arrays as zarr-python reads them
    path = tmp_path.parent / f"{tmp_path.name}.nc"
    path.write_bytes(raw)
    stored = zarr.open_group(str(tmp_path), mode="r")
    with netCDF4.Dataset(path) as nc:
        assert set(nc.variables) == {"x", "y", *(f"a{i:03d}" for i in range(n))}
        for name in nc.variables:
            np.testing.assert_array_equal(nc.variables[name][...].data, stored[name][...])
    core.close()


def test_writes_pending_outlast_the_views_that_made_them(tmp_path, pool):
    """A set with writes pending is held by the registry, whatever holds its views: what
    was written is stored at the end (zarr-python reads it), and dataset.nc shows it."""
    xarray_group(tmp_path, 4, values=True)
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    core = DecodedCore(open_hierarchy(open_store(str(tmp_path)), context, metadata_ttl=TTL), metadata_ttl=TTL)
    file = core.open("a001/data", os.O_WRONLY)
    file.write(0, np.full(3, -7, "<f4").tobytes())
    file.release()
    del file
    core.tree.forget("a001")  # its state and views dropped, as the metadata share may
    gc.collect()
    assert core.pending.writing("a001")
    expected = np.arange(20, dtype="float32").reshape(4, 5) + 1
    expected.reshape(-1)[:3] = -7
    path = tmp_path.parent / f"{tmp_path.name}.nc"
    path.write_bytes(_read(core, "dataset.nc"))
    with netCDF4.Dataset(path) as nc:
        np.testing.assert_array_equal(nc.variables["a001"][...].data, expected)
    core.shutdown()  # (the unmount's: what is buffered is stored)
    core.close()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a001"), mode="r")[...], expected)


def _traced(fn) -> int:
    """The bytes `fn()` leaves traced (its result kept meanwhile)."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    kept = fn()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    del kept
    return after - before


def test_the_kernels_names_of_a_walk_cost_what_the_inode_table_counts():
    """The names `find` hands the kernel for each array of a group (13: the array, its
    files, `chunks`, `chunks/0`, `chunks/0/0`), kept as slots: at most BYTES_PER_NAME each
    (a table of paths held 216 bytes a name)."""
    files = ["zarr.json", "info", "data", "data.npy", "data.tif", "data.nhdr", "data.hdr", "data.csv", "preview.png"]
    names = [f"a{i:05d}/{name}" for i in range(3000) for name in [*files, "chunks", "chunks/0", "chunks/0/0"]]
    names += [f"a{i:05d}" for i in range(3000)]

    def filled() -> InodeTable:
        table = InodeTable()
        for name in names:
            table.lookup(name)
        return table

    tracemalloc.start()
    try:
        traced = _traced(filled)
    finally:
        tracemalloc.stop()
    table = filled()
    assert len(table) == len(names) + 1
    assert traced <= table.bytes <= (BYTES_PER_NAME + 4) * len(table), (traced / len(names), table.bytes)
    for ino in table.under(""):
        table.forget(ino, 1)
    assert len(table) == 1 and table.bytes <= 2 * BYTES_PER_NAME  # (the root's)


def test_a_walk_of_a_group_keeps_its_paths_documents_and_states_within_the_metadata_share(tmp_path, pool):
    """A kernel-free `find` of a group of N small arrays under a small metadata share: the
    node states, the documents read ahead and the paths resolved each stay within their
    part of it, counted and as traced; at its peak the walk holds no more than the share
    besides what the group's views derive from their members."""
    n, limit = 400, 8 << 20
    _group(tmp_path, n)
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    hierarchy_ = open_hierarchy(open_store(str(tmp_path)), context, metadata_ttl=TTL)
    core = DecodedCore(hierarchy_, metadata_ttl=TTL, metadata_limit=limit)
    list(core.list_dir(""))  # (the imports of the views and codecs: not the walk's)
    core.tree.forget("")
    resolved = core.tree._resolved
    assert resolved.most * resolved_module.ENTRY_BYTES <= limit * resolved_module.RESOLVED_SHARE
    assert hierarchy_.fetched.most_bytes <= max(nodes.FETCHED_LEAST, limit * nodes.FETCHED_SHARE)
    most_paths = most_documents = 0

    def walk(path: str = "") -> None:
        nonlocal most_paths, most_documents
        for name, attributes in list(core.list_dir(path)):
            child = f"{path}/{name}" if path else name
            core.lookup(child)
            most_paths = max(most_paths, len(resolved._known))
            most_documents = max(most_documents, hierarchy_.fetched.bytes)
            if attributes.is_dir and name != "chunks":
                walk(child)

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        walk()
        peak = tracemalloc.get_traced_memory()[1] - base
        paths_held = len(resolved._known)
        paths_bytes = _traced(lambda: resolved.drop(""))
        members_bytes = _traced(lambda: setattr(core.tree, "members", type(core.tree.members)(TTL)))
    finally:
        tracemalloc.stop()
    assert 12 * n <= 2 * resolved.most  # (the walk resolved more paths than are kept)
    assert most_paths <= resolved.most and most_documents <= hierarchy_.fetched.most_bytes
    assert -paths_bytes <= paths_held * resolved_module.ENTRY_BYTES, -paths_bytes / max(paths_held, 1)
    assert core.tree.states_bytes <= core.tree.states_limit and core.tree.shed > 0
    assert peak - (-members_bytes) <= limit, (peak, -members_bytes)
    core.close()


def test_a_groups_views_hold_no_parsed_array_per_member(tmp_path, pool):
    """What a group's views keep of its members (what they gathered, the dataset.nc plan
    and the file's view, every `info` and `data.tif` made) held each member's parsed
    array: under a metadata share that keeps the node states of a few, a walk left all N
    alive (some 5 KB each, past the share at 20,000). Now they keep what the plan needs
    of each (name, shape, data type, dimension names); an array is looked up in the node
    cache as its values are read. Only the arrays of the node states kept, and the few
    `data` views dataset.nc keeps made, stay alive; the files are what a fresh mount
    shows."""
    from zarrfs.format import Array
    from zarrfs.views.netcdf import KEPT_DATA_VIEWS

    n = 240
    core, context = _walked_group(tmp_path, pool, n)
    raw = _read(core, "dataset.nc")
    infos = {name: _read(core, f"{name}/info") for name in ("x", "a000", "a119", f"a{n - 1:03d}")}
    tif = _read(core, "a007/data.tif")
    gc.collect()
    live = sum(1 for obj in gc.get_objects() if isinstance(obj, Array))
    states = sum(1 for path in [*(f"a{i:03d}" for i in range(n)), "x", "y"] if core.tree.known_state(path))
    assert core.tree.shed > 0 and states < n // 4, states  # (the share keeps a few)
    assert live <= states + KEPT_DATA_VIEWS + 4, (live, states)
    fresh = DecodedCore(open_hierarchy(open_store(str(tmp_path)), context, metadata_ttl=TTL), metadata_ttl=TTL)
    assert raw == _read(fresh, "dataset.nc")
    assert infos == {name: _read(fresh, f"{name}/info") for name in infos}
    assert tif == _read(fresh, "a007/data.tif")
    fresh.close()
    core.close()


def test_an_array_changed_since_dataset_nc_was_laid_out_is_refused_and_the_store_left_as_it_was(tmp_path, pool):
    """A plan keeps what each member decided, not its array: where a variable's values
    are read, the array is looked up, and one whose shape or data type no longer matches
    the layout is refused (a FormatError, EIO to a reader) rather than read into a layout
    not its own. Nothing is written."""
    from dataclasses import replace

    from zarrfs.format import FormatError

    xarray_group(tmp_path, 3, values=True)
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    core = DecodedCore(open_hierarchy(open_store(str(tmp_path)), context, metadata_ttl=TTL), metadata_ttl=TTL)
    plan = core.tree.around.netcdf_plan("")
    (variable,) = [v for v in plan.variables if v.path == "a001"]
    assert core.tree.around.planned_array(variable).shape == variable.shape  # as laid out: found
    for changed in (
        replace(variable, shape=(*variable.shape[:-1], variable.shape[-1] + 1)),
        replace(variable, read_itemsize=2),
    ):
        with pytest.raises(FormatError, match="changed since the file was laid out"):
            core.tree.around.planned_array(changed)
    assert _read(core, "dataset.nc")  # the file as laid out still reads
    core.close()
    assert {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()} == before
