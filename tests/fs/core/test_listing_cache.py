"""What the decoded core keeps so that a `find` costs little per request (fs/decoded/tree.py,
views/catalogue.py), without a kernel: the entry each path resolved to is dropped where its node is
forgotten (a rename, an rmdir, a rewritten document) and expires with the oldest node
state it came from; the size a listing or a lookup gives each file is the number of bytes
a read of it returns."""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest

from tests.conftest import wait_for
from tests.fs.core.at_hand import NOT_AT_HAND, at_hand
from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.fs.decoded import nodes as nodes_module
from zarrfs.fs.decoded import tree as tree_module
from zarrfs.store import open_store

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

TTL = 60.0  # long enough that nothing here expires unless the clock is moved


def _make_store(root) -> None:
    """Arrays of every file kind whose size the core computes from the metadata: 2-D and
    3-D images (one strip and many), RGB and RGBA, booleans, a sharded array, v2, an
    array of strings (data.jsonl, whose size is 0) and a 0-d one; two arrays of the
    same documents under paths of different lengths (`info`)."""
    top = zarr.open_group(str(root), mode="w")
    g = top.create_group("g")
    specs = {
        "f32": ((5, 7), (2, 3), "float32"),
        "g/f32 twïn": ((5, 7), (2, 3), "float32"),  # f32's documents: its `info` differs in the path alone
        "g/pages": ((3, 6, 5), (2, 4, 5), "uint16"),
        "g/strips": ((2000, 300), (500, 300), "float64"),  # many strips: their offsets out of line
        "rgb": ((9, 4, 3), (4, 4, 3), "uint8"),
        "rgba": ((3, 5, 4), (3, 5, 4), "uint16"),
        "flags": ((11,), (4,), "bool"),
        "ints": ((4, 3), (4, 3), "int64"),
        "scalar": ((), (), "int32"),
    }
    for name, (shape, chunks, dtype) in specs.items():
        array = top.create_array(name, shape=shape, chunks=chunks or "auto", dtype=dtype)
        array[...] = (np.arange(math.prod(shape)) % 251).reshape(shape).astype(dtype)
    sharded = g.create_array("sharded", shape=(8, 6), chunks=(2, 3), shards=(4, 6), dtype="int16")
    sharded[...] = np.arange(48, dtype="int16").reshape(8, 6)
    old = zarr.open_group(str(root / "old"), mode="w", zarr_format=2)
    old.create_array("x", shape=(6,), chunks=(4,), dtype=">i2")[...] = np.arange(6)
    names = top.create_array("names", shape=(3,), chunks=(2,), dtype=str)
    names[...] = np.array(["a", "bé", 'c"'], dtype=object)


@pytest.fixture
def store(tmp_path):
    _make_store(tmp_path / "s")
    return tmp_path / "s"


@pytest.fixture
def pool():
    with ThreadPoolExecutor(2) as executor:
        yield executor


def _core(root, pool, ttl: float = TTL) -> DecodedCore:
    context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
    return DecodedCore(open_hierarchy(open_store(str(root)), context, metadata_ttl=0), metadata_ttl=ttl)


def _read_all(core: DecodedCore, path: str) -> bytes:
    file = core.open(path, os.O_RDONLY)
    parts, offset = [], 0
    while part := file.read(offset, 1 << 20):
        parts.append(bytes(part))
        offset += len(part)
    file.release()
    return b"".join(parts)


def _walk(core: DecodedCore, path: str = ""):
    """(path, attributes) of every file below `path`, as the listings give them."""
    for name, attributes in core.list_dir(path):
        child = f"{path}/{name}" if path else name
        if attributes.is_dir:
            yield from _walk(core, child)
        else:
            yield child, attributes


def test_every_listed_size_is_what_a_read_returns(store, pool):
    core = _core(store, pool)
    files = dict(_walk(core))
    kinds = {path.rpartition("/")[2] for path in files if "/chunks/" not in path}
    assert {"data", "data.npy", "data.tif", "data.csv", "info", "zarr.json", ".zarray", "data.jsonl"} <= kinds
    assert any("/chunks/" in path for path in files)
    for path, listed in files.items():
        content = _read_all(core, path)
        if path.endswith("/data.jsonl"):  # its length is not told (0), and it is read to its end
            assert listed.size == core.lookup(path).size == 0 and core.open(path, os.O_RDONLY).direct_io
            assert content.count(b"\n") == 3, path
            continue
        assert listed.size == len(content), path
        assert core.lookup(path).size == len(content), path  # the cached attributes say the same


def test_sizes_from_a_fresh_core_match_those_of_views_already_read(store, pool):
    """A lookup before any listing or read, then after the file was read: the same size."""
    first, second = _core(store, pool), _core(store, pool)
    for path in ("g/strips/data.tif", "rgba/data.tif", "f32/data.npy", "flags/data.csv", "g/pages/chunks/1/1/0"):
        size = first.lookup(path).size
        assert len(_read_all(second, path)) == size == second.lookup(path).size, path


def test_a_renamed_node_no_longer_resolves_under_its_old_path(store, pool):
    core = _core(store, pool)
    for path in ("g/sharded", "g/sharded/data", "g/sharded/chunks/3/1"):
        assert core.lookup(path) is not None
    core.rename("g/sharded", "moved")
    for path in ("g/sharded", "g/sharded/data", "g/sharded/chunks/3/1"):
        assert core.lookup(path) is None, path
        assert at_hand(core.lookup, path) in (None, NOT_AT_HAND), path
    assert core.lookup("moved/data").size == 8 * 6 * 2
    core.rename("moved", "g/sharded")
    assert core.lookup("moved") is None
    assert core.lookup("g/sharded/data").size == 8 * 6 * 2


def test_a_removed_node_no_longer_resolves(store, pool):
    core = _core(store, pool)
    assert core.lookup("ints/chunks/0/0").size == 4 * 3 * 8
    assert [name for name, _ in core.list_dir("ints/chunks")] == ["0"]
    core.unlink("ints/zarr.json")  # rm -r
    core.rmdir("ints")
    for path in ("ints", "ints/data", "ints/chunks", "ints/chunks/0/0"):
        assert core.lookup(path) is None, path
        assert at_hand(core.lookup, path) in (None, NOT_AT_HAND), path
    assert "ints" not in {name for name, _ in core.list_dir("")}


def test_a_group_made_and_removed_is_seen_at_once(store, pool):
    core = _core(store, pool)
    assert core.lookup("g/new") is None
    core.mkdir("g/new")
    assert core.lookup("g/new").is_dir
    core.rmdir("g/new")
    assert core.lookup("g/new") is None


def test_a_rewritten_document_gives_the_files_their_new_sizes(store, pool):
    core = _core(store, pool)
    assert core.lookup("flags/data").size == 11
    file = core.open("flags/zarr.json", os.O_RDONLY)
    document = bytes(file.read(0, 1 << 20)).replace(b'"shape": [\n    11\n  ]', b'"shape": [\n    15\n  ]')
    assert b"15" in document
    writer = core.open("flags/zarr.json", os.O_WRONLY | os.O_TRUNC)
    writer.write(0, document)
    writer.flush()
    writer.release()
    assert zarr.open_array(str(store / "flags"), mode="r").shape == (15,)
    assert core.lookup("flags/data").size == 15 == len(_read_all(core, "flags/data"))
    assert core.lookup("flags/zarr.json").size == len(document)


def test_an_entry_expires_with_the_oldest_node_state_it_came_from(store, pool, monkeypatch):
    """`g/sharded` is first resolved at 1010.5, from a node state read at 1009 (by the
    listing of `g`) under a parent resolved anew: it is kept until 1019, when that state
    expires, not until 1020.5."""
    clock = SimpleNamespace(now=1000.0)
    for module in (tree_module, nodes_module):  # (entries kept, node states read)
        monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: clock.now))
    core = _core(store, pool, ttl=10)
    assert core.lookup("g").is_dir
    clock.now = 1009
    assert "sharded" in {name for name, _ in core.list_dir("g")}
    clock.now = 1010.5
    assert core.lookup("g/sharded").is_dir
    shutil.rmtree(store / "g" / "sharded")  # erased behind the mount's back
    clock.now = 1018.5
    assert core.lookup("g/sharded") is not None  # what was known, within the ttl
    clock.now = 1019.5
    assert core.lookup("g/sharded") is None
    assert core.lookup("g").is_dir


def test_a_late_refresh_serves_what_was_known_and_never_undoes_a_change_through_the_mount(store, pool):
    """A refresh past the ttl that the store does not answer promptly leaves the node
    served as known at once; when it comes back after a change through the mount (here
    a setxattr), what it read before that change (another writer's) is not kept."""
    core = _core(store, pool, ttl=1.0)
    assert core.xattrs("f32") == {}
    hierarchy = core.hierarchy
    opened, release = threading.Event(), threading.Event()
    real_open_node = hierarchy.open_node

    def slow_open_node(path):
        node = real_open_node(path)
        if path == "f32" and threading.current_thread().name.startswith("zarrfs-refresh"):
            opened.set()
            release.wait(10)  # the store answers late, with the document as it was
        return node

    hierarchy.open_node = slow_open_node
    zarr.open_array(str(store / "f32"), mode="a").attrs["by"] = "another writer"
    time.sleep(1.1)  # past the ttl: a product time, and what starts the refresh (no effect to wait for)
    started = time.monotonic()
    assert core.lookup("f32/data").size == 5 * 7 * 4
    assert core.lookup("f32/zarr.json") is not None
    took = time.monotonic() - started
    # served as known, the refresh still held: not waited for (it is held for 10 s)
    assert opened.wait(30) and not core.tree._refreshes.idle() and took < 5, took
    assert core.xattrs("f32") == {}
    core.set_xattr("f32", "user.zarr.units", b'"K"')  # through the mount: shows at once
    both = {"user.zarr.by": b'"another writer"', "user.zarr.units": b'"K"'}
    assert core.xattrs("f32") == both
    release.set()
    wait_for(core.tree._refreshes.idle)  # the late refresh has come back
    assert core.xattrs("f32") == both
    assert b"units" in _read_all(core, "f32/zarr.json")
