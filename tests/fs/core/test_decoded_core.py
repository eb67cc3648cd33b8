"""The decoded core without a kernel (fs/decoded/core.py): the calls the FUSE adapter
makes, driven directly. A hypothesis state machine runs random sequences of writes,
refused writes, removals, moves and attribute changes against a model of the arrays,
and after every step checks what the core shows and what zarr-python reads in the store."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tests.conftest import tree_snapshot
from tests.fs.core.at_hand import NOT_AT_HAND, at_hand
from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.fs.decoded.entries import CHUNK, FILE, Entry
from zarrfs.fs.errors import FsError, errno_for
from zarrfs.store import StoreUnavailableError, open_store

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

SHAPE, CHUNKS = (6, 5), (4, 3)  # edge chunks in both dimensions
GRID = (2, 2)
CHUNK_BYTES = 4 * 3 * 2  # int16


def _make_store(root) -> None:
    group = zarr.open_group(str(root), mode="w")
    group.create_group("g")
    for name in ("a", "g/b"):
        array = group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype="<i2", fill_value=0)
        array[...] = np.arange(30, dtype="<i2").reshape(SHAPE) + (100 if name == "a" else 200)


def _core(root, executor, ttl: float = 0) -> DecodedCore:
    hierarchy = open_hierarchy(
        open_store(str(root)), IOContext(executor=executor, cache=ChunkCache(1 << 20)), metadata_ttl=0
    )
    return DecodedCore(hierarchy, metadata_ttl=ttl)


def _refused(fn, *args) -> int:
    with pytest.raises(Exception) as info:
        fn(*args)
    return errno_for(info.value)


@pytest.fixture
def core(tmp_path):
    _make_store(tmp_path / "s")
    with ThreadPoolExecutor(2) as pool:
        yield _core(tmp_path / "s", pool), tmp_path / "s"


def test_a_chunk_file_is_stored_whole_at_a_complete_close_and_only_then(core):
    fs, root = core
    writer = fs.open("a/chunks/0/1", os.O_WRONLY | os.O_TRUNC)
    assert _refused(writer.flush) == errno.EINVAL  # nothing written yet: refused, kept
    writer.write(0, b"\x01" * 10)
    reader = fs.open("a/chunks/0/1", os.O_RDONLY)
    old = reader.read(0, CHUNK_BYTES)
    assert len(old) == CHUNK_BYTES and old == fs.open("a/chunks/0/1", os.O_RDONLY).read(0, CHUNK_BYTES)
    writer.write(10, b"\x01" * (CHUNK_BYTES - 10))
    writer.flush()
    assert fs.open("a/chunks/0/1", os.O_RDONLY).read(0, CHUNK_BYTES) == b"\x01" * CHUNK_BYTES
    assert reader.read(0, CHUNK_BYTES) == old  # an open reader keeps the version it saw
    writer.release()
    np.testing.assert_array_equal(zarr.open_array(str(root / "a"))[0:4, 3:5], 0x0101)


def test_an_incomplete_chunk_is_dropped_at_the_last_close(core):
    fs, root = core
    before = zarr.open_array(str(root / "a"))[...]
    writer = fs.open("a/chunks/1/0", os.O_WRONLY | os.O_TRUNC)
    writer.write(0, b"\x02" * 4)
    assert _refused(writer.flush) == errno.EINVAL
    assert _refused(writer.release) == errno.EINVAL  # dropped, with the reason
    np.testing.assert_array_equal(zarr.open_array(str(root / "a"))[...], before)


def test_opens_are_transactions_of_their_own(core):
    fs, root = core
    first = fs.open("a/chunks/1/1", os.O_WRONLY | os.O_TRUNC)
    second = fs.open("a/chunks/1/1", os.O_WRONLY | os.O_TRUNC)
    second.write(0, b"\x03" * CHUNK_BYTES)
    first.write(0, b"\x04" * 2)
    second.flush()
    second.release()
    assert _refused(first.flush) == errno.EINVAL
    assert _refused(first.release) == errno.EINVAL
    np.testing.assert_array_equal(zarr.open_array(str(root / "a"))[4:6, 3:5], 0x0303)


def test_a_node_open_for_writing_cannot_be_moved_or_removed(core):
    fs, _ = core
    writer = fs.open("g/b/data", os.O_WRONLY)
    assert _refused(fs.rename, "g/b", "moved") == errno.EBUSY
    assert _refused(fs.rmdir, "g/b") == errno.EBUSY
    writer.release()
    fs.rename("g/b", "moved")
    assert fs.lookup("moved").is_dir and fs.lookup("g/b") is None


def test_a_chunk_grid_of_any_size_lists_lazily(tmp_path):
    root = tmp_path / "huge"
    zarr.create_array(str(root), shape=(2**40, 4), chunks=(1, 4), dtype="u1", fill_value=0)
    with ThreadPoolExecutor(2) as pool:
        fs = _core(root, pool)
        entries = fs.list_dir("chunks")
        first = [next(entries) for _ in range(3)]
    assert [name for name, _ in first] == ["0", "1", "2"] and all(attr.is_dir for _, attr in first)


def test_known_directories_list_whole_without_a_store_call(tmp_path):
    _make_store(tmp_path / "s")
    root = tmp_path / "s"
    zarr.create_array(str(root / "many"), shape=(2000,), chunks=(1,), dtype="u1", fill_value=0)
    with ThreadPoolExecutor(2) as pool:
        hierarchy = open_hierarchy(
            open_store(str(root)), IOContext(executor=pool, cache=ChunkCache(1 << 20)), metadata_ttl=60
        )
        fs = DecodedCore(hierarchy, metadata_ttl=60)
        assert at_hand(fs.list_dir, "g") is NOT_AT_HAND  # nothing known yet: a worker lists it
        paths = ["", "g", "g/b", "g/b/chunks", "g/b/chunks/1", "a/chunks/0", ".zarrfs"]
        for path in paths:  # (a group's links count its children once it was listed)
            list(fs.list_dir(path))
        expected = {path: list(fs.list_dir(path)) for path in paths}
        list(fs.list_dir("many/chunks"))

        def no_store_call(*args, **kwargs):
            raise AssertionError("a store call")

        store = fs.hierarchy.store
        store.get_partial_values = store.get = store.list_dir = no_store_call
        for path in paths:
            assert list(fs.list_dir(path, wait=False)) == expected[path], path
        assert "data.npy" in dict(fs.list_dir("a", wait=False))
        assert at_hand(fs.list_dir, "many/chunks") is NOT_AT_HAND  # 2,000 entries: listed lazily, by a worker
        assert at_hand(fs.list_dir, "a/zarr.json") is at_hand(fs.list_dir, "nothing") is NOT_AT_HAND


def test_a_child_whose_store_read_fails_leaves_its_parent_listable(core):
    fs, _root = core
    store = fs.hierarchy.store
    reads = store.get_partial_values

    def failing(requests, *args, **kwargs):
        if any(key.startswith("g/b/") for key, _ in requests):
            raise StoreUnavailableError("the endpoint is away", "g/b/zarr.json")
        return reads(requests, *args, **kwargs)

    store.get_partial_values = failing
    listed = dict(fs.list_dir("g"))
    assert listed["b"].is_dir and "zarr.json" in listed
    with pytest.raises(Exception) as info:
        list(fs.list_dir("g/b"))
    assert errno_for(info.value) == errno.EIO


class DecodedModel(RuleBasedStateMachine):
    """Arrays `a` and `g/b` as numpy values, their attributes, and where they live."""

    core_ttl = 0.0  # nothing cached: each call reads the metadata anew

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "s")
        _make_store(self.root)
        self.pool = ThreadPoolExecutor(2)
        self.fs = _core(self.root, self.pool, self.core_ttl)
        self.values = {
            name: np.arange(30, dtype="<i2").reshape(SHAPE) + (100 if name == "a" else 200) for name in ("a", "g/b")
        }
        self.attrs: dict[str, dict] = {"a": {}, "g/b": {}}
        self.groups = {"g"}

    def teardown(self) -> None:
        self.fs.shutdown()
        self.fs.close()
        self.pool.shutdown()
        self.tmp.cleanup()

    arrays = st.sampled_from(["a", "g/b"])
    coords = st.tuples(st.integers(0, GRID[0] - 1), st.integers(0, GRID[1] - 1))

    def _present(self, name: str) -> bool:
        return name in self.values

    @rule(name=arrays, coords=coords, value=st.integers(-300, 300))
    def write_a_whole_chunk(self, name, coords, value):
        if not self._present(name):
            return
        file = self.fs.open(f"{name}/chunks/{coords[0]}/{coords[1]}", os.O_WRONLY | os.O_TRUNC)
        file.write(0, np.full(CHUNKS, value, "<i2").tobytes())
        file.flush()
        file.release()
        r, c = coords[0] * CHUNKS[0], coords[1] * CHUNKS[1]
        self.values[name][r : r + CHUNKS[0], c : c + CHUNKS[1]] = value

    @rule(name=arrays, coords=coords, size=st.integers(0, CHUNK_BYTES - 1))
    def write_a_short_chunk_which_is_dropped(self, name, coords, size):
        if not self._present(name):
            return
        file = self.fs.open(f"{name}/chunks/{coords[0]}/{coords[1]}", os.O_WRONLY | os.O_TRUNC)
        file.write(0, b"\x7f" * size)
        assert _refused(file.flush) == errno.EINVAL
        assert _refused(file.release) == errno.EINVAL

    @rule(name=arrays, offset=st.integers(0, 59), data=st.binary(min_size=1, max_size=20), close=st.booleans())
    def write_into_data(self, name, offset, data, close):
        if not self._present(name):
            return
        data = data[: 60 - offset]
        file = self.fs.open(f"{name}/data", os.O_WRONLY)
        file.write(offset, data)
        if close:
            file.flush()
        file.release()
        flat = bytearray(self.values[name].tobytes())
        flat[offset : offset + len(data)] = data
        self.values[name] = np.frombuffer(bytes(flat), "<i2").reshape(SHAPE).copy()

    @rule(name=arrays, coords=coords)
    def remove_a_chunk(self, name, coords):
        if not self._present(name):
            return
        path = f"{name}/chunks/{coords[0]}/{coords[1]}"
        self.fs.unlink(path)
        if self.fs.lookup(path) is None:  # removed twice, nothing written since: made again, as tar does
            file = self.fs.create(path)[0]
            file.write(0, bytes(file.full_size))
            file.release()
        r, c = coords[0] * CHUNKS[0], coords[1] * CHUNKS[1]
        self.values[name][r : r + CHUNKS[0], c : c + CHUNKS[1]] = 0

    @rule(name=arrays, key=st.sampled_from(["units", "n"]), value=st.sampled_from([b"K", b"3", b'"x"', b"[1, 2]"]))
    def set_an_attribute(self, name, key, value):
        if not self._present(name):
            return
        self.fs.set_xattr(name, f"user.zarr.{key}", value)
        try:
            self.attrs[name][key] = json.loads(value)
        except ValueError:
            self.attrs[name][key] = value.decode()

    @precondition(lambda self: "a" in self.values)
    @rule()
    def move_a_into_the_group(self):
        self.fs.rename("a", "g/a2")
        self.values["g/a2"] = self.values.pop("a")
        self.attrs["g/a2"] = self.attrs.pop("a")

    @precondition(lambda self: "g/a2" in self.values)
    @rule()
    def move_it_back(self):
        self.fs.rename("g/a2", "a")
        self.values["a"] = self.values.pop("g/a2")
        self.attrs["a"] = self.attrs.pop("g/a2")

    @rule()
    def make_and_remove_a_group(self):
        self.fs.mkdir("fresh")
        assert self.fs.lookup("fresh").is_dir
        self.fs.create("fresh/x.raw")[0].release()  # a scratch file: the group is not empty
        assert _refused(self.fs.rmdir, "fresh") == errno.ENOTEMPTY
        self.fs.unlink("fresh/x.raw")
        self.fs.rmdir("fresh")
        assert self.fs.lookup("fresh") is None

    @invariant()
    def the_core_shows_the_model(self):
        for name, values in self.values.items():
            file = self.fs.open(f"{name}/data", os.O_RDONLY)
            assert file.read(0, 60) == values.tobytes(), name
            shown = {k[len("user.zarr.") :]: json.loads(v) for k, v in self.fs.xattrs(name).items()}
            assert shown == self.attrs[name]
        names = {n for n, _ in self.fs.list_dir("")}
        assert ("a" in names) == ("a" in self.values)

    @invariant()
    def the_store_holds_the_model_once_flushed(self):
        self.fs.shutdown()  # stores what `data` still buffers, as unmount does
        for name, values in self.values.items():
            array = zarr.open_array(os.path.join(self.root, name), mode="r")
            np.testing.assert_array_equal(array[...], values)
            assert dict(array.attrs) == self.attrs[name]


TestDecodedModel = DecodedModel.TestCase
TestDecodedModel.settings = settings(
    max_examples=20, stateful_step_count=12, deadline=None, suppress_health_check=list(HealthCheck)
)


class CachingDecodedModel(DecodedModel):
    """The same with the core's caches on (nodes, the entries paths resolve to, files'
    attributes, all kept for a minute): a change made through the core is seen at once
    all the same, and a path moved or removed no longer resolves."""

    core_ttl = 60.0

    @invariant()
    def paths_resolve_where_the_nodes_are(self):
        for name in ("a", "g/a2"):
            for path in (name, f"{name}/data", f"{name}/chunks/1/0"):
                assert (self.fs.lookup(path) is not None) == (name in self.values), path
        assert self.fs.lookup("fresh") is None


TestCachingDecodedModel = CachingDecodedModel.TestCase
TestCachingDecodedModel.settings = TestDecodedModel.settings


def test_refusals_are_fs_errors_with_errno(core):
    fs, _ = core
    with pytest.raises(FsError) as info:
        fs.open("a/info", os.O_WRONLY)
    assert info.value.errno == errno.EACCES


def test_files_show_write_permission_where_a_write_can_go_and_only_there(core):
    """`ls -l` tells the writable files (chunk files, documents, `data`) from the read-only
    views, whose opens for writing fail EACCES."""
    fs, root = core
    before = tree_snapshot(root)
    for directory in ("a", "g"):
        for name, attr in fs.list_dir(directory):
            if attr.is_dir:
                continue
            path = f"{directory}/{name}"
            try:
                fs.open(path, os.O_WRONLY).release()
                opened = True
            except FsError as exc:
                assert exc.errno == errno.EACCES, path  # noqa: PT017 (either outcome may be; a refusal is this one)
                opened = False
            assert fs.lookup(path).writable == opened, path
    assert fs.lookup("a/chunks/0/0").writable and not fs.lookup("a/info").writable
    fs.shutdown()
    assert tree_snapshot(root) == before


def test_writes_at_hand_take_whole_elements_and_leave_the_rest_to_a_thread(tmp_path):
    """The adapter applies a write to `data` on its event loop only when that cannot block:
    whole elements, below the dirty limit, the pending chunks free; else NotAtHand, and the
    write goes to a worker thread (`write`). What is applied reaches the store. (The
    array's metadata must be known: within the ttl.)"""
    _make_store(tmp_path)
    with ThreadPoolExecutor(2) as pool:
        fs = _core(tmp_path, pool, ttl=60)
        file = fs.open("a/data", os.O_WRONLY)
        assert file.write(4, np.array([-7, -8], "<i2").tobytes(), wait=False) == 4
        assert at_hand(file.write, 9, b"\x01") is NOT_AT_HAND  # half an element: its other byte is stored
        assert at_hand(file.write, 10, b"\x01\x02\x03") is NOT_AT_HAND
        held = threading.Event()
        done = threading.Event()

        def store_holding_the_chunks() -> None:
            with file.pending.lock:
                held.set()
                done.wait(10)

        holder = threading.Thread(target=store_holding_the_chunks)
        holder.start()
        held.wait(10)
        try:
            assert at_hand(file.write, 0, np.array([-1], "<i2").tobytes()) is NOT_AT_HAND
        finally:
            done.set()
            holder.join()
        fs._behind.dirty_limit = 0  # what is buffered is now past the limit: only a thread may store it
        assert at_hand(file.write, 0, np.array([-1], "<i2").tobytes()) is NOT_AT_HAND
        assert file.write(0, np.array([-1], "<i2").tobytes()) == 2  # stores everything at once
        file.flush()
        file.release()
    expected = np.arange(30, dtype="<i2").reshape(SHAPE) + 100
    expected.reshape(-1)[[0, 2, 3]] = [-1, -7, -8]
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"))[...], expected)


def test_warming_up_never_fails_the_mount(core, monkeypatch):
    """A library that cannot be imported is the business of the first request that needs
    it, which reports it; the warm-up after ready says nothing and raises nothing."""
    fs, _ = core
    monkeypatch.setitem(sys.modules, "numcodecs", None)  # `import numcodecs` raises ImportError
    fs.warm_up()


def test_an_array_redefined_in_the_store_by_others_reads_its_new_values_once_its_metadata_is_read_again(tmp_path):
    """zarr-python replaces `a` with another dtype, chunk shape and values while it is
    mounted: once the metadata is read again (the ttl is 0 here) `data` and the chunk
    files are zarr-python's new bytes, not the old chunks' decoded under the new metadata,
    and the kernel is told to drop what it holds of the node's files."""
    zarr.create_array(str(tmp_path / "a"), shape=(8,), chunks=(4,), dtype="<i4")[...] = np.arange(8, dtype="<i4")
    with ThreadPoolExecutor(2) as executor:
        core = _core(tmp_path, executor)
        told = []
        core.changed = lambda path, names=False: told.append(path)
        assert _read(core, "a/data") == np.arange(8, dtype="<i4").tobytes()  # now in the decoded-chunk cache
        again = zarr.create_array(str(tmp_path / "a"), shape=(6,), chunks=(3,), dtype="<i2", overwrite=True)
        again[...] = np.arange(100, 106, dtype="<i2")
        assert _read(core, "a/data") == again[...].tobytes()
        assert _read(core, "a/chunks/1") == again[3:].tobytes()
        assert "a" in told


def test_an_array_entry_found_before_the_array_became_a_group_in_the_store_is_gone(core):
    """Another program replaces array `a` with a group after its entry was found: what
    goes through that entry (its listing, its files, its chunk directory, a write to its
    `data`) finds no such array (ENOENT), and its directory has no sub-directories."""
    fs, root = core
    tree = fs.tree
    array, chunks = tree.resolve("a"), tree.resolve("a/chunks")
    zarr.open_group(str(root / "a"), mode="w")
    for entry in (array, chunks):
        assert _refused(lambda e: list(tree.list_dir(e)), entry) == errno.ENOENT
        assert _refused(tree.lookup, entry, "0") == errno.ENOENT
        assert tree.attributes(entry).nlink == 2
    for entry in (Entry(FILE, "a", "data"), Entry(CHUNK, "a", coords=(0, 0))):
        assert _refused(fs._writer, entry) == errno.ENOENT


def test_a_0d_arrays_data_reads_and_patches_the_writes_not_yet_stored(tmp_path):
    """One open writes the element, then one byte of it, and reads it back before its
    close: the second write and the read see the first, as for any other array."""
    zarr.create_array(str(tmp_path / "a"), shape=(), dtype="<i4", fill_value=0)
    with ThreadPoolExecutor(2) as pool:
        fs = _core(tmp_path, pool)
        file = fs.open("a/data", os.O_RDWR)
        file.write(0, bytes([1, 2, 3, 4]))
        file.write(3, bytes([9]))
        assert file.read(0, 4) == bytes([1, 2, 3, 9])
        file.flush()
        file.release()
    assert zarr.open_array(str(tmp_path / "a"))[...] == np.frombuffer(bytes([1, 2, 3, 9]), "<i4")[0]


def _read(core: DecodedCore, path: str) -> bytes:
    file = core.open(path, os.O_RDONLY)
    try:
        return file.read(0, 1 << 20)
    finally:
        file.release()


@pytest.mark.parametrize("how", ["write-behind", "dirty limit"])
def test_data_stored_before_its_close_still_has_the_kernel_drop_the_nodes_pages(tmp_path, monkeypatch, how):
    """Chunks of `data` stored while it is written (write-behind, or past the dirty limit)
    leave nothing pending for the close to store: the close still tells the kernel, or
    `data.npy` and the legacy views would keep serving their old pages."""
    from zarrfs.fs.decoded import write_behind

    _make_store(tmp_path / "s")
    with ThreadPoolExecutor(2) as pool:
        fs = _core(tmp_path / "s", pool)
        told = []
        fs.changed = lambda path, names=False: told.append(path)
        if how == "write-behind":
            monkeypatch.setattr(write_behind, "WRITE_BEHIND", 1)
        else:
            fs._behind.dirty_limit = 0
        new = (np.arange(30, dtype="<i2") - 50).reshape(SHAPE)
        file = fs.open("a/data", os.O_WRONLY)
        assert file.write(0, new.tobytes()) == new.nbytes
        fs._behind.settled()  # the write-behind has run
        assert not file.pending  # all of it stored before the close
        told.clear()
        file.flush()
        file.release()
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "s" / "a"))[...], new)
    assert told == ["a"]


def _npy_bytes(values: np.ndarray) -> bytes:
    import io

    out = io.BytesIO()
    np.save(out, values)
    return out.getvalue()


def test_a_npy_whose_first_close_came_before_its_content_is_created_at_a_later_close(core):
    """`cat x.npy > g/x.npy`: the shell closes its descriptor before cat writes a byte;
    that close is refused (EINVAL, quietly), and cat's close creates the array."""
    fs, root = core
    values = np.arange(12, dtype="<i4").reshape(3, 4)
    file, _ = fs.create("g/x.npy")
    assert _refused(file.flush) == errno.EINVAL  # empty so far
    file.write(0, _npy_bytes(values))
    file.flush()
    file.release()
    np.testing.assert_array_equal(zarr.open_array(str(root / "g" / "x"))[...], values)


def test_a_npy_never_valid_is_dropped_at_its_last_close_with_one_log_line(core, caplog):
    fs, root = core
    file, _ = fs.create("g/y.npy")
    file.write(0, b"not a npy file")
    assert _refused(file.flush) == errno.EINVAL
    with caplog.at_level("WARNING", logger="zarrfs"):
        file.release()
    assert [r.getMessage() for r in caplog.records if "y.npy" in r.getMessage() and "dropped" in r.getMessage()]
    assert not (root / "g" / "y").exists()


NPY_TYPES_ZARR_LACKS = {
    "a field with a shape": [("a", "<i2"), ("b", "<f4", (2,))],
    "no bytes": "V0",
    "a datetime without a unit": "M8",
    "a timedelta without a unit": "m8",
}


@pytest.mark.parametrize("dtype", list(NPY_TYPES_ZARR_LACKS.values()), ids=list(NPY_TYPES_ZARR_LACKS))
def test_a_valid_npy_of_a_type_zarr_cannot_hold_is_refused_at_every_close(core, caplog, dtype):
    """A bad write (EINVAL), not a failing store: each close of the shared descriptor
    says so, and the last one drops it with one log line."""
    fs, root = core
    file, _ = fs.create("g/x.npy")
    file.write(0, _npy_bytes(np.zeros(3, dtype)))
    assert _refused(file.flush) == errno.EINVAL
    assert _refused(file.flush) == errno.EINVAL
    with caplog.at_level("WARNING", logger="zarrfs"):
        file.release()
    assert [r.getMessage() for r in caplog.records if "x.npy" in r.getMessage() and "dropped" in r.getMessage()]
    assert not (root / "g" / "x").exists()


@pytest.mark.parametrize("dtype", ["<M8[s]", "<m8[ns]", "<f8", "|b1", "<c8"])
def test_a_npy_copied_in_gets_the_fill_value_zarr_python_gives_a_new_array(core, dtype, tmp_path):
    fs, root = core
    values = np.zeros(3, dtype)
    file, _ = fs.create("g/x.npy")
    file.write(0, _npy_bytes(values))
    file.flush()
    file.release()
    ours = zarr.open_array(str(root / "g" / "x"))
    theirs = zarr.create_array(str(tmp_path / "ref"), shape=values.shape, dtype=dtype)
    np.testing.assert_array_equal(ours[...], values)
    np.testing.assert_array_equal(np.asarray(ours.fill_value), np.asarray(theirs.fill_value))


def test_a_npy_whose_name_was_taken_after_its_create_fails_at_every_close(core):
    fs, root = core
    file, _ = fs.create("g/x.npy")
    file.write(0, _npy_bytes(np.arange(3)))
    fs.mkdir("g/x")
    assert _refused(file.flush) == errno.EEXIST
    assert _refused(file.flush) == errno.EEXIST
    file.release()
    assert isinstance(zarr.open(str(root / "g" / "x"), mode="r"), zarr.Group)


def _change_document(fs: DecodedCore, path: str, **changes) -> None:
    doc = json.loads(_read(fs, f"{path}/zarr.json"))
    doc.update(changes)
    _write_document(fs, path, doc)


def _write_document(fs: DecodedCore, path: str, doc: dict) -> None:
    file = fs.open(f"{path}/zarr.json", os.O_WRONLY | os.O_TRUNC)
    file.write(0, json.dumps(doc).encode())
    file.flush()
    file.release()


def test_writes_to_data_open_across_a_resize_are_stored_at_unmount(core):
    """`data` stays open while another program grows the array and something reads it;
    rows written after that are acknowledged, so unmount (SIGTERM) stores them."""
    fs, root = core
    writer = fs.open("a/data", os.O_WRONLY)
    writer.write(0, np.full(5, 7, "<i2").tobytes())
    writer.flush()  # fsync: stored, nothing pending
    _change_document(fs, "a", shape=[8, 5])
    _read(fs, "a/data")  # anyone reads it under the new shape
    writer.write(10, np.full(5, 9, "<i2").tobytes())  # row 1
    fs.shutdown()  # the writer still open
    stored = zarr.open_array(str(root / "a"))
    assert stored.shape == (8, 5)
    np.testing.assert_array_equal(stored[0], 7)
    np.testing.assert_array_equal(stored[1], 9)


def test_a_data_writer_open_across_a_data_type_change_writes_the_bytes_of_the_changed_array(tmp_path):
    """int16 becomes int32 while `data` is open (allowed: nothing stored yet): what is
    written after is the new array's bytes, stored under its metadata, not int16 chunks
    that nothing could read."""
    _make_store(tmp_path)
    zarr.create_array(str(tmp_path / "e"), shape=(4, 3), chunks=(4, 3), dtype="<i2", fill_value=0)
    with ThreadPoolExecutor(2) as pool:
        fs = _core(tmp_path, pool)
        writer = fs.open("e/data", os.O_WRONLY)
        _change_document(fs, "e", data_type="int32")
        values = np.arange(12, dtype="<i4").reshape(4, 3)
        assert writer.write(0, values.tobytes()) == 48
        writer.flush()
        writer.release()
    stored = zarr.open_array(str(tmp_path / "e"))
    assert stored.dtype == np.int32
    np.testing.assert_array_equal(stored[...], values)


def test_one_array_has_one_set_of_pending_writes_for_every_writer_across_a_metadata_change(core):
    """Two sets for one path would store read-modify-writes of one shard side by side."""
    fs, root = core
    first = fs.open("a/data", os.O_WRONLY)
    _change_document(fs, "a", shape=[8, 5])
    _read(fs, "a/data")
    second = fs.open("a/data", os.O_WRONLY)
    first.write(0, np.full(5, 1, "<i2").tobytes())
    second.write(10, np.full(5, 2, "<i2").tobytes())
    assert first.pending is second.pending is fs.pending.of(fs.tree.node("a"))
    for file in (first, second):
        file.flush()
        file.release()
    stored = zarr.open_array(str(root / "a"))[...]
    assert (stored[0] == 1).all() and (stored[1] == 2).all()


@contextlib.contextmanager
def _store_away(fs: DecodedCore):
    """Every store or erasure of a value fails (EIO) until the block ends."""
    store = fs.hierarchy.store

    def away(values, *args, **kwargs):
        raise StoreUnavailableError("the endpoint is away", next(iter(values)))

    real = store.set_values, store.erase_values
    store.set_values = store.erase_values = away
    try:
        yield
    finally:
        store.set_values, store.erase_values = real


def _failing_close(fs: DecodedCore, path: str, content: bytes):
    """A chunk file whose store fails at its close (EIO: its writer is told): kept for unmount."""
    with _store_away(fs):
        file = fs.open(path, os.O_WRONLY | os.O_TRUNC)
        file.write(0, content)
        assert _refused(file.flush) == errno.EIO
        _refused(file.release)


def test_a_chunk_that_failed_to_store_at_its_close_is_stored_at_unmount(core):
    fs, root = core
    _failing_close(fs, "a/chunks/0/0", np.full(12, 1, "<i2").tobytes())
    fs.shutdown()
    np.testing.assert_array_equal(zarr.open_array(str(root / "a"))[0:4, 0:3], 1)


@pytest.mark.parametrize("fsync", [True, False], ids=["fsynced", "buffered"])
def test_a_chunk_that_failed_to_store_never_overwrites_a_later_acknowledged_write_at_unmount(core, fsync):
    """A's close failed (EIO); the store came back and B wrote the same chunk through
    `data`, acknowledged (stored by fsync, or still buffered, B still open): unmount
    keeps B's."""
    fs, root = core
    _failing_close(fs, "a/chunks/0/0", np.full(12, 1, "<i2").tobytes())
    b = fs.open("a/data", os.O_WRONLY)
    b.write(0, np.full(3, 42, "<i2").tobytes())  # row 0, columns 0..2: chunk (0, 0)
    if fsync:
        b.flush()
        b.release()
    fs.shutdown()
    np.testing.assert_array_equal(zarr.open_array(str(root / "a"))[0, 0:3], 42)


@pytest.mark.parametrize("replacement", ["chunk file", "rm"])
def test_a_buffered_write_to_data_survives_a_failed_store_of_its_chunks_replacement(core, replacement):
    """A write to `data` is acknowledged and still buffered; then its chunk is replaced
    through the chunk file, or erased with `rm`, and that store fails (EIO, the store is
    away). The write to `data` is still stored by its fsync, and unmount never brings the
    failed replacement back over it."""
    fs, root = core
    expected = zarr.open_array(str(root / "a"))[...]
    writer = fs.open("a/data", os.O_WRONLY)
    writer.write(0, np.full(3, 42, "<i2").tobytes())  # row 0, columns 0..2: chunk (0, 0)
    expected[0, 0:3] = 42
    if replacement == "chunk file":
        _failing_close(fs, "a/chunks/0/0", np.full(12, 1, "<i2").tobytes())
    else:
        with _store_away(fs):
            assert _refused(fs.unlink, "a/chunks/0/0") == errno.EIO
    writer.flush()
    np.testing.assert_array_equal(zarr.open_array(str(root / "a"))[...], expected)
    writer.release()
    fs.shutdown()
    np.testing.assert_array_equal(zarr.open_array(str(root / "a"))[...], expected)


def test_a_chunk_that_failed_to_store_does_not_come_back_after_its_array_was_removed(core):
    fs, root = core
    _failing_close(fs, "a/chunks/0/0", np.full(12, 1, "<i2").tobytes())
    fs.unlink("a/zarr.json")  # rm -r a
    fs.rmdir("a")
    assert not (root / "a").exists()
    fs.shutdown()
    assert not (root / "a").exists()


def test_a_write_at_hand_after_a_metadata_change_never_waits_for_a_store_holding_the_old_writes(tmp_path):
    """The event loop's write path: the array was resized, and a store holds the old set
    of pending writes; the write is left to a thread (NotAtHand) instead of waiting for it."""
    _make_store(tmp_path)
    with ThreadPoolExecutor(2) as pool:
        fs = _core(tmp_path, pool, ttl=60)
        writer = fs.open("a/data", os.O_WRONLY)
        old = writer.pending
        _change_document(fs, "a", shape=[8, 5])
        fs.tree.node("a")  # the new metadata known (as a lookup on a worker leaves it); no set made for it yet
        held, done = threading.Event(), threading.Event()

        def store_holding_the_old_writes() -> None:
            with old.lock:
                held.set()
                done.wait(10)

        holder = threading.Thread(target=store_holding_the_old_writes)
        holder.start()
        assert held.wait(10)
        answers = []
        on_loop = threading.Thread(target=lambda: answers.append(at_hand(writer.write, 0, np.int16(3).tobytes())))
        on_loop.start()
        on_loop.join(5)
        waited = on_loop.is_alive()
        done.set()
        holder.join()
        on_loop.join()
        assert not waited and answers == [NOT_AT_HAND]
        assert writer.write(0, np.int16(3).tobytes()) == 2  # a worker thread's write waits, and lands
        writer.flush()
        writer.release()
    stored = zarr.open_array(str(tmp_path / "a"))
    assert stored.shape == (8, 5) and stored[0, 0] == 3


def test_concurrent_writes_to_different_bytes_of_one_element_of_data_keep_both(core, monkeypatch):
    """Two writers each write one byte of the same int16 element of `data`. Each merges
    the element's other byte in from what `data` reads, before it takes the array's
    pending writes: the first is held just after that read while the second writes and is
    acknowledged. Both bytes are stored."""
    from zarrfs.fs.decoded import files

    fs, root = core
    expected = zarr.open_array(str(root / "a"))[...].astype("<i2")
    expected.reshape(-1).view("u1")[0:2] = [0x11, 0x22]  # element (0, 0): its low byte, then its high byte
    first, second = fs.open("a/data", os.O_WRONLY), fs.open("a/data", os.O_WRONLY)
    merge_edges, merged, go = files.merge_edges, threading.Event(), threading.Event()

    def merge_then_wait(*args):
        out = merge_edges(*args)
        if threading.current_thread() is first_writer:
            merged.set()
            go.wait(10)
        return out

    monkeypatch.setattr(files, "merge_edges", merge_then_wait)
    first_writer = threading.Thread(target=first.write, args=(0, b"\x11"))
    first_writer.start()
    assert merged.wait(10)
    assert second.write(1, b"\x22") == 1
    go.set()
    first_writer.join()
    for file in (first, second):
        file.flush()
        file.release()
    np.testing.assert_array_equal(zarr.open_array(str(root / "a"))[...], expected)


class _ObservedCondition(threading.Condition):
    """A condition that sets `waiting` when a thread waits on it."""

    def __init__(self, waiting: threading.Event) -> None:
        super().__init__()
        self._waiting = waiting

    def wait(self, timeout: float | None = None) -> bool:
        self._waiting.set()
        return super().wait(timeout)


@pytest.mark.parametrize(
    ("change", "shape", "attributes"),
    [
        ("setfattr", (6, 5), {"units": "K", "scale": 2}),
        ("resize", (10, 5), {"note": "resized"}),  # a zarr.json written whole: its own attributes
    ],
    ids=["setfattr", "resize"],
)
def test_a_document_change_during_a_setfattr_waits_for_it_and_is_never_undone(core, change, shape, attributes):
    """setfattr reads the node's document, changes its attributes and stores it; it is held
    just before that store while another attribute change, or a resize through zarr.json,
    comes. That change waits for the setfattr to store, then is stored itself: neither is
    undone (an undone resize would erase the chunks outside the old shape)."""
    fs, root = core
    settled = threading.Event()  # the other change was stored, or waits for the setfattr
    fs._documents._released = _ObservedCondition(settled)  # a thread waits for documents held
    replace_document, storing, go = fs.hierarchy.replace_document, threading.Event(), threading.Event()

    def replace_then_wait(*args):
        if threading.current_thread() is setter:
            storing.set()
            go.wait(10)
        return replace_document(*args)

    fs.hierarchy.replace_document = replace_then_wait
    setter = threading.Thread(target=fs.set_xattr, args=("a", "user.zarr.units", b"K"))
    setter.start()
    assert storing.wait(10)
    if change == "setfattr":
        other = threading.Thread(target=lambda: (fs.set_xattr("a", "user.zarr.scale", b"2"), settled.set()))
    else:
        other = threading.Thread(
            target=lambda: (_change_document(fs, "a", shape=[10, 5], attributes={"note": "resized"}), settled.set())
        )
    other.start()
    assert settled.wait(10)
    go.set()
    setter.join()
    other.join()
    stored = zarr.open_array(str(root / "a"))
    assert stored.shape == shape and dict(stored.attrs) == attributes


@pytest.mark.parametrize(
    ("name", "flags"),
    [("data", os.O_RDONLY), ("data.npy", os.O_RDONLY), ("data", os.O_RDWR)],
    ids=["data", "data.npy", "data read-write"],
)
def test_a_file_open_across_a_resize_reads_the_array_as_resized(tmp_path, name, flags):
    """`data` and `data.npy` keep the kernel's pages between opens: one opened before a
    resize through zarr.json must read the resized array, at hand or not, or the old
    layout it read would be what every later open reads from those pages."""
    _make_store(tmp_path)
    with ThreadPoolExecutor(2) as pool:
        fs = _core(tmp_path, pool, ttl=60)
        file = fs.open(f"a/{name}", flags)
        _change_document(fs, "a", shape=[6, 4])  # rows of 4 elements instead of 5
        values = zarr.open_array(str(tmp_path / "a"))[...].astype("<i2")
        expected = _npy_bytes(values) if name == "data.npy" else values.tobytes()
        assert _read(fs, f"a/{name}") == expected  # a new open: its chunks are decoded now
        if flags == os.O_RDONLY:
            assert bytes(file.read(0, 1 << 20, wait=False)) == expected
        assert file.read(0, 1 << 20) == expected
        file.release()


@contextlib.contextmanager
def _stores_held(fs: DecodedCore, holds):
    """Stores of values whose keys `holds(key)` are held until the block ends; yields an
    Event set once one is held."""
    store = fs.hierarchy.store
    set_values, set_if, reached, go = store.set_values, store.set_if, threading.Event(), threading.Event()

    def held(items, *args, **kwargs):
        if any(holds(key) for key in items):
            reached.set()
            go.wait(10)
        return set_values(items, *args, **kwargs)

    def held_if(key, value, version):  # (a document changed in place is stored conditionally)
        if holds(key):
            reached.set()
            go.wait(10)
        return set_if(key, value, version)

    store.set_values, store.set_if = held, held_if
    try:
        yield reached
    finally:
        go.set()
        store.set_values, store.set_if = set_values, set_if


@pytest.mark.parametrize("change", ["setfattr on a group", "zarr.json of another array"])
def test_a_document_change_never_waits_for_another_arrays_data_being_stored(core, change):
    """A resize of `a` stores the writes its `data` buffers first, and that store stalls
    (a slow or unreachable store: up to a deadline; or gigabytes). A change of another
    node's document is stored meanwhile: it never waits for `a`'s data."""
    fs, root = core
    writer = fs.open("a/data", os.O_WRONLY)
    writer.write(0, np.full(30, 5, "<i2").tobytes())
    writer.release()
    with _stores_held(fs, lambda key: key.startswith("a/c/")) as flushing:
        resize = threading.Thread(target=_change_document, args=(fs, "a"), kwargs={"shape": [8, 5]})
        resize.start()
        assert flushing.wait(10)
        if change == "setfattr on a group":
            other = threading.Thread(target=fs.set_xattr, args=("g", "user.zarr.units", b"K"))
        else:
            other = threading.Thread(target=_change_document, args=(fs, "g/b"), kwargs={"attributes": {"n": 1}})
        other.start()
        other.join(5)
        waited = other.is_alive()
    resize.join()
    other.join()
    assert not waited
    assert zarr.open_array(str(root / "a")).shape == (8, 5)
    assert (zarr.open_array(str(root / "a"))[:6] == 5).all()
    changed = zarr.open(str(root / ("g" if change == "setfattr on a group" else "g/b")), mode="r")
    assert dict(changed.attrs) == ({"units": "K"} if change == "setfattr on a group" else {"n": 1})


@pytest.mark.parametrize("removal", ["rm -r", "mv"])
def test_a_node_removed_or_moved_during_a_setfattr_is_never_brought_back(core, removal):
    """setfattr on `a` has read its document and is about to store it back when `rm -r a`
    (or `mv a g/a2`) comes. The removal waits for it: the attribute is stored, then the
    node goes (or moves with it). Never a zarr.json stored back at `a` after the rm or mv
    was acknowledged: a node brought back with no chunks, the attribute lost."""
    fs, root = core
    if removal == "rm -r":
        fs.unlink("a/zarr.json")  # (its files first, then the rmdir below)
    with _stores_held(fs, lambda key: key == "a/zarr.json") as storing:
        setter = threading.Thread(target=fs.set_xattr, args=("a", "user.zarr.units", b"K"))
        setter.start()
        assert storing.wait(10)
        remover = threading.Thread(
            target=fs.rmdir if removal == "rm -r" else fs.rename, args=("a",) if removal == "rm -r" else ("a", "g/a2")
        )
        remover.start()
        remover.join(1)  # on the store's side nothing holds it: it is done within this
    setter.join()
    remover.join()
    assert not (root / "a").exists() and fs.lookup("a") is None
    if removal == "mv":
        moved = zarr.open_array(str(root / "g/a2"))
        assert dict(moved.attrs) == {"units": "K"}
        np.testing.assert_array_equal(moved[...], np.arange(30, dtype="<i2").reshape(SHAPE) + 100)


def test_a_group_made_an_array_never_gets_a_child_made_meanwhile(core):
    """A group's zarr.json is replaced by an array document (allowed: it has no children)
    and held just before it is stored when `mkdir` of a child comes. The mkdir waits and
    is refused: an array never holds a node."""
    fs, root = core
    fs.mkdir("h")
    array_document = json.loads(_read(fs, "a/zarr.json"))
    with _stores_held(fs, lambda key: key == "h/zarr.json") as storing:
        becoming = threading.Thread(target=_write_document, args=(fs, "h", array_document))
        becoming.start()
        assert storing.wait(10)
        refusals = []
        child = threading.Thread(target=lambda: refusals.append(_refused(fs.mkdir, "h/x")))
        child.start()
        child.join(1)  # on the store's side nothing holds it: it is done within this
    becoming.join()
    child.join()
    assert refusals and not (root / "h" / "x").exists()
    assert isinstance(zarr.open(str(root / "h"), mode="r"), zarr.Array)


@pytest.mark.parametrize("first", ["a", "b"])
def test_two_reads_following_two_resizes_leave_data_reading_the_last(tmp_path, first):
    """`data` follows its array's metadata at each read. Read A finds the first resize and
    is held (a thread switch) while it makes that view its file's; the array is resized
    again and read B finds the second, and is held in turn before it records what it
    found. Whichever finishes first, the file's later reads read the array as last
    resized, never the view read A found (whose pages the kernel would keep)."""
    _make_store(tmp_path)
    with ThreadPoolExecutor(2) as pool:
        fs = _core(tmp_path, pool, ttl=60)
        file = fs.open("a/data", os.O_RDONLY)
        file.read(0, 1 << 20)
        a_held, a_go, b_held, b_go = (threading.Event() for _ in range(4))
        reading = file._reading

        def held_reading(view):
            if threading.current_thread() is read_a:
                a_held.set()
                a_go.wait(30)
            elif threading.current_thread() is read_b:
                b_held.set()
                b_go.wait(30)
            return reading(view)

        file._reading = held_reading
        read_a = threading.Thread(target=file.read, args=(0, 1 << 20))
        read_b = threading.Thread(target=file.read, args=(0, 1 << 20))
        _change_document(fs, "a", shape=[6, 4])
        read_a.start()
        assert a_held.wait(30)
        _change_document(fs, "a", shape=[6, 3])
        read_b.start()
        assert b_held.wait(30)
        for go, read in [(a_go, read_a), (b_go, read_b)][:: 1 if first == "a" else -1]:
            go.set()
            read.join()
        expected = zarr.open_array(str(tmp_path / "a"))[...].astype("<i2").tobytes()
        assert file.read(0, 1 << 20) == expected
        file.release()


def test_a_group_moved_into_an_empty_group_below_it_is_refused_and_nothing_is_erased(core):
    """As the kernel refuses it (EINVAL) before asking: the empty group stays."""
    fs, root = core
    fs.mkdir("g/empty")
    before = tree_snapshot(root)
    assert _refused(fs.rename, "g", "g/empty") == errno.EINVAL
    assert tree_snapshot(root) == before


def test_two_mounts_setting_attributes_of_one_node_at_once_keep_both(core):
    """Two mounts of one store (nodes of a cluster) set different attributes of `a` at
    the same moment: the second's document lands between the first's read and store. The
    first's store is refused (not the version it read) and made again on the second's:
    both attributes are kept."""
    fs, root = core
    with ThreadPoolExecutor(2) as pool:
        other = _core(root, pool)
        store = fs.hierarchy.store
        read = store.get_versioned

        def another_mount_between(key, **options):
            got = read(key, **options)
            if key == "a/zarr.json" and not hasattr(another_mount_between, "done"):
                another_mount_between.done = True
                other.set_xattr("a", "user.zarr.theirs", b"2")
            return got

        store.get_versioned = another_mount_between
        fs.set_xattr("a", "user.zarr.mine", b"1")
        other.shutdown()
        other.close()
    assert dict(zarr.open_array(str(root / "a")).attrs) == {"mine": 1, "theirs": 2}
