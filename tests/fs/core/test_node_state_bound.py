"""The node states of a group of many arrays without a kernel (fs/decoded/nodes.py): what
one metadata write costs does not grow with the group, and the states kept stay within
the metadata share of --memory-target, whatever else holds a node. Counted (store keys
read, passes over the states, bytes counted), never timed."""

from __future__ import annotations

import json
import os
import warnings
from collections import OrderedDict

from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore, nodes
from zarrfs.fs.hooks import CoreHooks
from zarrfs.store import open_store

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

from tests.fs.core.groups import pool, xarray_group  # noqa: E402, F401 (pool: a fixture)

TTL = 600.0  # nothing expires during a test


def _core(root, pool, **kwargs) -> DecodedCore:
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    return DecodedCore(open_hierarchy(open_store(str(root)), context, metadata_ttl=0), metadata_ttl=TTL, **kwargs)


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


class _CountingDict(OrderedDict):
    """The node states, counting the passes over them (those a change visits)."""

    passes = 0

    def __iter__(self):
        _CountingDict.passes += 1
        return super().__iter__()


def test_a_metadata_write_in_a_group_reads_and_visits_no_more_in_a_larger_group(tmp_path, pool):
    """Writing one array's zarr.json dropped its group's listing (listed again with a
    document read per child) and made a pass over every node state known: one write in a
    group of N cost N. Now the listing stays, and only the node's own state goes."""
    calls = {}
    for n in (10, 60):
        xarray_group(tmp_path / str(n), n)
        core = _core(tmp_path / str(n), pool)
        _find(core)
        core.tree._nodes = _CountingDict(core.tree._nodes)
        _CountingDict.passes = 0
        read = _counting_keys_read(core)
        file = core.open("a001/zarr.json", os.O_RDONLY)
        document = json.loads(file.read(0, 1 << 20))
        file.release()
        document["attributes"] = {"units": "m"}
        file = core.open("a001/zarr.json", os.O_WRONLY | os.O_TRUNC)
        file.write(0, json.dumps(document).encode())
        file.flush()
        file.release()
        assert f"a{n - 1:03d}" in dict(core.list_dir("")) and core.lookup("a001/info") is not None
        calls[n] = (read["keys"], _CountingDict.passes)
        core.close()
        assert zarr.open_array(str(tmp_path / str(n) / "a001"), mode="r").attrs["units"] == "m"
    assert calls[60] <= calls[10] and calls[60][1] == 0, calls


def _bounded_core(root, pool, states: int) -> DecodedCore:
    """A core whose node states may hold about `states` small arrays' (their views made)."""
    document = len((root / "a000" / "zarr.json").read_bytes())
    one = 5 * nodes.VIEW_BYTES + nodes.STATE_BYTES + nodes.DOCUMENT_FACTOR * document
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    hierarchy = open_hierarchy(open_store(str(root)), context, metadata_ttl=TTL)
    return DecodedCore(hierarchy, metadata_ttl=TTL, metadata_limit=int(states * one / nodes.STATES_SHARE))


def test_node_states_kept_stay_within_the_metadata_share(tmp_path, pool):
    """A find of N arrays kept every node state it made (some 10 KB an array with its
    views): 20,000 arrays held far more than --memory-target's metadata share. Past the
    states' part of it the least recently consulted go, made again from the documents
    read (no store call within the ttl); what is listed stays the same, and an array with
    writes pending keeps its state until they are stored."""
    xarray_group(tmp_path, 60)
    core, unbounded = _bounded_core(tmp_path, pool, 20), _bounded_core(tmp_path, pool, 1 << 20)
    writer = core.open("a000/data", os.O_WRONLY)
    writer.write(0, bytes(4) * 3)  # three elements of 0.0 where the fill value is 0: pending, not stored
    read, read_unbounded = _counting_keys_read(core), _counting_keys_read(unbounded)
    assert _find(core) == _find(unbounded) > 10 * 60
    assert read["keys"] <= read_unbounded["keys"] + 3, (read["keys"], read_unbounded["keys"])
    assert core.tree.shed > 0 and core.tree.states_bytes <= core.tree.states_limit
    assert 2 * len(core.tree._nodes) < len(unbounded.tree._nodes)
    assert core.tree.known_state("a000") is not None  # its writes pending
    unbounded.close()
    writer.release()
    core.close()


def test_a_node_loaded_by_two_threads_at_once_is_no_change_found_in_the_store(tmp_path, pool):
    """Two threads that both find no state for a path (its first look, or one after its
    state was dropped past the share: during a find of 20,000 arrays, many) both read its
    node. The second to finish found the first's state in place and took it for a change
    made in the store by another writer: the array's decoded chunks and views dropped,
    its files' times moved, the kernel told to forget its files (all of the mount's, for
    the root). Now the state found, the same node, is kept."""
    xarray_group(tmp_path, 3)
    told: list[str] = []
    core = _core(tmp_path, pool, hooks=CoreHooks(changed=lambda path, names=False: told.append(path)))
    tree = core.tree
    core.lookup("")
    open_node = tree.hierarchy.open_node
    raced: list[str] = []

    def read_while_another_thread_reads(path):
        node = open_node(path)
        if path in ("", "a001") and path not in raced:
            raced.append(path)
            tree.node_state(path)  # the other thread, done first
        return node

    tree.forget("")  # the root's state too: as dropped past the share
    generation = tree.generation
    tree.hierarchy.open_node = read_while_another_thread_reads
    core.lookup("a001")
    first = tree.known_state("a001")
    assert raced == ["", "a001"]
    assert told == [] and tree.generation == generation, (told, tree.generation - generation)
    assert first is not None and first.node.current()
    assert core.lookup("a001/zarr.json") is not None and tree.known_state("a001") is first
    core.close()
