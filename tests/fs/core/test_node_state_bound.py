"""The node states of a group of many arrays without a kernel (fs/decoded/nodes.py): what
one metadata write costs does not grow with the group, and the states kept stay within
the metadata share of --memory-target, whatever else holds a node. Counted (store keys
read, passes over the states, bytes counted), never timed."""

from __future__ import annotations

import json
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.store import open_store

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

TTL = 600.0  # nothing expires during a test


def _group(root, n: int) -> None:
    """n small 2-D arrays over y and x, beside their coordinate arrays (xarray's layout)."""
    group = zarr.open_group(str(root), mode="w", zarr_format=3)
    for name, size in (("y", 4), ("x", 5)):
        coordinate = group.create_array(name, shape=(size,), chunks=(size,), dtype="float64", dimension_names=[name])
        coordinate[...] = range(size)
    for i in range(n):
        group.create_array(f"a{i:03d}", shape=(4, 5), chunks=(4, 5), dtype="float32", dimension_names=["y", "x"])


@pytest.fixture
def pool():
    with ThreadPoolExecutor(2) as executor:
        yield executor


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


class _CountingDict(dict):
    """A dict that counts the passes over it (the node states a change visits)."""

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
        _group(tmp_path / str(n), n)
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
