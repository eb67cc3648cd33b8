"""What the rest of a tree costs in a group of many members, without a kernel: the zarr v2
view of /.zarrfs/v2/ (fs/decoded/tree_views.py), consolidated metadata kept true after
one change (format/consolidation.py, consolidated_erases.py), a group's `info`
(views/info.py) and the snapshots of an Icechunk repository (fs/versions/). Counted in
work (store calls, node states consulted, snapshots read), never timed: the same in a
group of 20 and of 200, or bounded by what the listing itself shows."""

from __future__ import annotations

import json
import os
import time
import warnings

import pytest

from tests.fs.core.groups import pool, xarray_group  # noqa: F401 (pool: a fixture)
from tests.fs.core.test_group_size import (
    TTL,
    _core,
    _counting_keys_read,
    _counting_names_listed,
    _counting_node_states,
    _find,
    _rm_r,
)
from zarrfs.format import ChunkCache, IOContext, consolidated_erases, fetched, hierarchy, open_hierarchy
from zarrfs.fs.decoded import (
    DecodedCore,
    erased,
    members,
    nodes,
    refresh,
    siblings,
    store_keys,
    tree,
    tree_views,
)
from zarrfs.fs.decoded.nodes import Nodes
from zarrfs.store import open_store
from zarrfs.views.info import InfoView
from zarrfs.views.neighbours import HierarchyNeighbours

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def _groups_of(tmp_path, pool, sizes=(20, 200)):
    """For each size n: a root holding a group `g` of n arrays, and a core of it."""
    for n in sizes:
        root = tmp_path / str(n)
        zarr.open_group(str(root), mode="w", zarr_format=3)
        xarray_group(root / "g", n)
        yield n, _core(root, pool)


def test_the_v2_view_costs_the_same_per_node_in_a_larger_group(tmp_path, pool, monkeypatch):
    """/.zarrfs/v2/: the stat of one array's `.zarray` and `.zattrs` consults the same
    nodes in a group of 20 and of 200; a listing of the group and a `find` below it,
    the same per node listed."""
    consulted = _counting_node_states(monkeypatch, Nodes)
    costs = {}
    for n, core in _groups_of(tmp_path, pool):
        _find(core, "g")  # as a reader of the mount first: the group's nodes known
        read, listed = _counting_keys_read(core), _counting_names_listed(core)
        work = {}
        for name, step in (
            (
                "stat",
                lambda: [core.lookup(f".zarrfs/v2/g/a{i:03d}/{d}") for i in (5, 6) for d in (".zarray", ".zattrs")],
            ),
            ("ls", lambda: list(core.list_dir(".zarrfs/v2/g"))),
            ("find", lambda: _find(core, ".zarrfs/v2")),
        ):
            consulted["n"] = 0
            step()
            work[name] = consulted["n"]
        assert json.loads(_read_all(core, ".zarrfs/v2/g/a005/.zarray"))["shape"] == [4, 5]
        work["store"] = (read["keys"], listed["names"])
        costs[n] = work
        core.close()
    assert costs[200]["stat"] == costs[20]["stat"] > 0, costs
    assert costs[200]["store"] == costs[20]["store"] == (0, 0), costs
    for name in ("ls", "find"):  # (2 + 2 + n members listed: per member, no more)
        assert costs[200][name] <= 10 * costs[20][name], (name, costs)


def _read_all(core, path: str) -> bytes:
    file = core.open(path, os.O_RDONLY)
    try:
        return bytes(file.read(0, core.lookup(path).size))
    finally:
        file.release()


class _Clock:
    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead


def _counting_writes(core) -> dict:
    store, counted = core.hierarchy.store, {"versioned": 0, "set_if": 0}
    get_versioned, set_if = store.get_versioned, store.set_if

    def versioned(*args, **kwargs):
        counted["versioned"] += 1
        return get_versioned(*args, **kwargs)

    def conditional(*args, **kwargs):
        counted["set_if"] += 1
        return set_if(*args, **kwargs)

    store.get_versioned, store.set_if = versioned, conditional
    return counted


def test_one_change_rewrites_consolidated_metadata_reading_no_other_node(tmp_path, pool, monkeypatch):
    """An attribute set, a group made, an array removed through the mount: the root's
    consolidated metadata takes the one entry in, out or changed, reading the changed
    node's documents and not its siblings'. An array removed alone stripped the root's
    document and wrote it back with every member read again (twice): 2N store reads."""
    clock = _Clock()
    monkeypatch.setattr(consolidated_erases, "time", clock)
    costs = {}
    for n in (20, 200):
        root = tmp_path / str(n)
        xarray_group(root, n)
        zarr.consolidate_metadata(str(root))
        core = _core(root, pool)
        _find(core)
        core.set_xattr("a001", "user.zarr.first", b"1")  # (the first change probes the root)
        core.synced()
        read, listed, written = _counting_keys_read(core), _counting_names_listed(core), _counting_writes(core)
        steps = []
        for change in (
            lambda: core.set_xattr("a005", "user.zarr.units", b'"m"'),
            lambda: core.mkdir("made"),
            lambda: _rm_r(core, "a007"),
            lambda: _rm_r(core, "a009"),
        ):
            clock.ahead += 2 * consolidated_erases.BURST  # each alone
            read["keys"], listed["names"], listed["prefixes"] = 0, 0, []
            written.update(versioned=0, set_if=0)
            change()
            core.synced()
            steps.append((read["keys"], len(listed["prefixes"]), written["versioned"], written["set_if"]))
        costs[n] = steps
        core.close()
        held = json.loads((root / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]
        assert held["a005"]["attributes"]["units"] == "m" and held["made"]["node_type"] == "group"
        assert "a007" not in held and "a009" not in held and len(held) == n + 2 - 2 + 1
        assert zarr.open_group(str(root), mode="r", use_consolidated=True)["a005"].attrs["units"] == "m"
    assert costs[200] == costs[20], costs
    # (one listing a change: the group's, for the nodes other writers made or removed)
    assert all(keys <= 8 and lists <= 2 for keys, lists, _, _ in costs[20]), costs


def test_a_burst_of_removals_reads_the_group_once(tmp_path, pool, monkeypatch):
    """Erases that follow one another strip the document once and write it back once:
    what is read again then is once per burst, not once per erase."""
    clock = _Clock()
    monkeypatch.setattr(consolidated_erases, "time", clock)
    xarray_group(tmp_path, 40)
    zarr.consolidate_metadata(str(tmp_path))
    core = _core(tmp_path, pool)
    _find(core)
    written = _counting_writes(core)
    for i in range(10):
        _rm_r(core, f"a{i:03d}")
    core.synced()
    assert 2 <= written["set_if"] <= 4, written  # alone, stripped, written back (not 10)
    core.close()
    held = json.loads((tmp_path / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"]
    assert sorted(held) == sorted(["x", "y"] + [f"a{i:03d}" for i in range(10, 40)])


def test_a_groups_info_consults_none_of_its_members(tmp_path, pool):
    """`zarrfs info GROUP` (the group's InfoView, as the command line makes it): its
    attributes and, for an OME-Zarr image, its levels; no member of a plain group."""
    costs = {}
    for n, core in _groups_of(tmp_path, pool):
        read, listed = _counting_keys_read(core), _counting_names_listed(core)
        group = core.hierarchy.open_node("g")
        text = InfoView(group, "/g", HierarchyNeighbours(core.hierarchy, "g")).text()
        assert "node type:" in text and "group" in text
        costs[n] = (read["keys"], listed["names"])
        core.close()
    assert costs[200] == costs[20], costs


icechunk_repos = pytest.importorskip("tests.icechunk_repos")


def _tagged_history(path, commits: int) -> None:
    """A repository whose branch main has `commits` commits, each tagged."""
    import icechunk

    icechunk.set_logs_filter("error")
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    for i in range(commits):
        session = repo.writable_session("main")
        zarr.open_group(session.store, mode="a").attrs["step"] = i
        repo.create_tag(f"t{i:03d}", session.commit(f"step {i}"))


@pytest.mark.parametrize("commits", [6, 24])
def test_the_snapshots_directory_reads_each_snapshot_once(tmp_path, monkeypatch, commits):
    """`ls .zarrfs/versions/snapshots` walked the ancestry of every branch and tag to its
    root: with a tag per commit, N squared snapshots read. Each ref's walk now stops at
    a snapshot another reached."""
    icechunk = pytest.importorskip("icechunk")
    from zarrfs.fs.mount import MountConfig, build_core

    _tagged_history(tmp_path / "repo", commits)
    visited = {"n": 0}
    ancestry = icechunk.Repository.ancestry

    def counted(self, **kwargs):
        for entry in ancestry(self, **kwargs):
            visited["n"] += 1
            yield entry

    monkeypatch.setattr(icechunk.Repository, "ancestry", counted)
    (tmp_path / "mnt").mkdir()
    core, cleanup = build_core(MountConfig(source=str(tmp_path / "repo"), mountpoint=str(tmp_path / "mnt")))
    try:
        visited["n"] = 0
        listed = [name for name, _ in core.list_dir(".zarrfs/versions/snapshots")]
        assert len(listed) == commits + 1  # (and the repository's first)
        # each snapshot once, and one more per ref (where its walk stopped)
        assert visited["n"] <= len(listed) + commits + 1, (visited, len(listed))
        visited["n"] = 0
        assert core.lookup(f".zarrfs/versions/snapshots/{listed[0]}").is_dir
        assert core.lookup(".zarrfs/versions/tags/t003").is_dir and visited["n"] == 0
    finally:
        core.shutdown()
        cleanup()


def _v2_directories_past_the_ttl(root, pool, clock) -> list[tuple[int, int]]:
    """Keys read and names listed by `ls -l` of three arrays' directories in the v2 view,
    the ttl passed before each."""
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    core = DecodedCore(open_hierarchy(open_store(str(root)), context, metadata_ttl=TTL), metadata_ttl=TTL)
    _find(core, ".zarrfs/v2")
    read, listed = _counting_keys_read(core), _counting_names_listed(core)
    work = []
    for name in ("a003", "a007", "a011"):
        clock.ahead += TTL + 1
        for file, _ in list(core.list_dir(f".zarrfs/v2/{name}")):
            core.lookup(f".zarrfs/v2/{name}/{file}")
        assert json.loads(_read_all(core, f".zarrfs/v2/{name}/.zattrs"))["_ARRAY_DIMENSIONS"] == ["y", "x"]
        work.append((read["keys"], listed["names"]))
        read["keys"] = 0
    core.close()
    return work


def test_one_arrays_v2_documents_past_the_ttl_cost_the_same_in_a_larger_group(tmp_path, pool, monkeypatch):
    """Past the ttl, `ls -l` of one array's directory in the v2 view (its `.zarray`,
    `.zattrs` and chunk files): the array's documents read again, not the group's
    listing; of its siblings only those read with it in one batch (siblings.AHEAD at
    most, as anywhere in the tree)."""
    clock = _Clock()
    for module in (tree, nodes, members, hierarchy, fetched, refresh, erased, tree_views, store_keys):
        monkeypatch.setattr(module, "time", clock)
    for n in (20, 200):
        xarray_group(tmp_path / str(n), n)
    work = _v2_directories_past_the_ttl(tmp_path / "200", pool, clock)
    assert all(keys <= siblings.AHEAD + 4 and names == 0 for keys, names in work), work
    monkeypatch.setattr(siblings, "AHEAD", 4)  # (a batch that both groups fill)
    costs = {n: _v2_directories_past_the_ttl(tmp_path / str(n), pool, clock) for n in (20, 200)}
    assert costs[200] == costs[20], costs
