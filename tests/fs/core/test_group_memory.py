"""What a walk of a large group costs in store reads and in memory, without a kernel:
documents read ahead with a group's listing are kept until their nodes are opened, and
read again in batches (not one by one) where the walk outlasts `--metadata-ttl`
(format/fetched.py); a member's metadata changed by another writer is still seen
within the ttl."""

from __future__ import annotations

import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

from zarrfs.format import ChunkCache, IOContext, fetched, hierarchy, open_hierarchy
from zarrfs.fs.decoded import DecodedCore, erased, members, nodes, refresh, store_keys, surroundings, tree, tree_views
from zarrfs.store import open_store

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

TTL = 10.0
AHEAD = 64  # (fetched.AHEAD)


class _Clock:
    """time.monotonic moved ahead at will (the store's own deadlines keep the real one)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead


@pytest.fixture
def pool():
    with ThreadPoolExecutor(2) as executor:
        yield executor


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
