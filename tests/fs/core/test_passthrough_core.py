"""The passthrough core without a kernel (fs/passthrough/core.py): a hypothesis state
machine creates, rewrites, truncates, links, moves and removes keys and directories
through the core, against a model of the store, and after every step checks what the
core lists and what the local store holds on disk."""

from __future__ import annotations

import errno
import os
import tempfile
import tracemalloc
import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.fs.core.at_hand import NOT_AT_HAND, at_hand
from zarrfs.fs.core import Attributes
from zarrfs.fs.errors import FsError, errno_for
from zarrfs.fs.passthrough import PassthroughCore
from zarrfs.store import LocalStore, Store, base, open_store
from zarrfs.store.keys import TEMP_PREFIX


def _on_disk(root: str) -> dict[str, bytes]:
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            if not name.startswith(TEMP_PREFIX):
                path = os.path.join(directory, name)
                found[os.path.relpath(path, root)] = open(path, "rb").read()
    return found


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def _walk(core: PassthroughCore, path: str = "") -> tuple[dict[str, int], set[str]]:
    """(the size of every file, every directory) below `path`, as the core lists them."""
    sizes, dirs = {}, set()
    for name, attr in core.list_dir(path):
        child = f"{path}/{name}" if path else name
        if attr.is_dir:
            below, below_dirs = _walk(core, child)
            sizes.update(below)
            dirs |= below_dirs | {child}
        else:
            sizes[child] = attr.size
    return sizes, dirs


@pytest.fixture
def core(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s/zarr.json").write_bytes(b"{}")
    fs = PassthroughCore(open_store(str(tmp_path / "s")), metadata_ttl=0, spool_dir=str(tmp_path))
    yield fs, tmp_path / "s"
    fs.close()


def test_a_written_key_is_stored_whole_at_close_and_readable_by_others(core):
    fs, root = core
    file, _ = fs.create("d/k")
    file.write(0, b"hello ")
    file.write(6, b"world")
    assert not (root / "d/k").exists()  # spooled until stored
    file.flush()
    assert (root / "d/k").read_bytes() == b"hello world"
    other = fs.open("d/k", os.O_RDONLY)
    assert other.read(0, 100) == b"hello world"
    other.release()
    file.release()


def test_a_link_of_a_large_value_copies_it_without_holding_it_in_memory(core):
    """`ln` of a 64 MiB key: the local store copies in the kernel (docs/errors.md, Bounded memory)."""
    fs, root = core
    value = os.urandom(1 << 20) * 64
    (root / "big").write_bytes(value)
    tracemalloc.start()
    try:
        attributes = fs.link("big", "d/copy")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (root / "d/copy").read_bytes() == value and attributes.size == len(value)
    assert peak < 1 << 20, f"{peak >> 20} MiB allocated to link 64 MiB"


def test_a_link_a_store_cannot_copy_within_the_memory_bound_is_refused_unread(tmp_path, monkeypatch):
    class CopiesThroughMemory(LocalStore):  # as a store without a copy of its own does
        _copy_value = Store._copy_value

    monkeypatch.setattr(base, "COPY_THROUGH_MEMORY", 1 << 20)
    (tmp_path / "s").mkdir()
    (tmp_path / "s/big").write_bytes(bytes(2 << 20))
    (tmp_path / "s/small").write_bytes(b"small")
    fs = PassthroughCore(CopiesThroughMemory(str(tmp_path / "s")), metadata_ttl=0, spool_dir=str(tmp_path))
    tracemalloc.start()
    try:
        with pytest.raises(FsError) as refused:
            fs.link("big", "copy")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.errno == errno.EPERM and "too large" in str(refused.value)
    assert peak < 1 << 20 and not (tmp_path / "s/copy").exists()
    assert fs.link("small", "copy").size == 5 and (tmp_path / "s/copy").read_bytes() == b"small"
    fs.close()


def test_a_truncate_by_path_is_stored_when_it_returns_even_while_an_open_holds_the_key(core):
    """The kernel sends a writer's release after its close(2) returns: a truncate(2) that
    comes between them must not wait for that release to reach the store."""
    fs, root = core
    file, _ = fs.create("k")
    file.write(0, b"0123456789")
    file.flush()  # close(2) returned; the release is still on its way
    fs.truncate("k", 4)
    assert (root / "k").read_bytes() == b"0123"
    file.release()
    assert (root / "k").read_bytes() == b"0123"


def test_a_truncate_by_path_the_store_refuses_fails_and_the_held_content_is_stored_at_release(core, monkeypatch):
    fs, root = core
    file, _ = fs.create("k")
    file.write(0, b"0123456789")
    file.flush()
    store_set = fs.store.set_file

    def refuse(key, fd, consume=False, meta=None):
        raise OSError(errno.EIO, "the store is down")

    monkeypatch.setattr(fs.store, "set_file", refuse)
    with pytest.raises(OSError):
        fs.truncate("k", 4)
    assert (root / "k").read_bytes() == b"0123456789"  # unchanged
    monkeypatch.setattr(fs.store, "set_file", store_set)
    file.release()  # the store is back: the last close stores what the file holds
    assert (root / "k").read_bytes() == b"0123"


def test_renaming_onto_an_existing_key_without_replace_is_refused(core):
    fs, root = core
    for name in ("a", "b"):
        f, _ = fs.create(name)
        f.write(0, name.encode())
        f.release()
    with pytest.raises(Exception) as info:
        fs.rename("a", "b", replace=False)
    assert errno_for(info.value) == errno.EEXIST
    assert (root / "b").read_bytes() == b"b"


class PassthroughModel(RuleBasedStateMachine):
    """Over a local directory with nothing cached (`metadata_ttl` 0); the subclasses below
    keep listings for an hour, so every change must keep the cache true."""

    ttl = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.store = self.open_store()
        self.fs = PassthroughCore(self.store, metadata_ttl=self.ttl, spool_dir=self.tmp.name)
        self.keys: dict[str, bytes] = {}
        self.kept: set[str] = set()

    def open_store(self):
        self.root = os.path.join(self.tmp.name, "s")
        os.mkdir(self.root)
        return open_store(self.root)

    def stored(self) -> dict[str, bytes]:
        return _on_disk(self.root)

    def teardown(self) -> None:
        self.fs.shutdown()
        self.fs.close()
        self.tmp.cleanup()

    names = st.sampled_from(["a", "b", "d/c", "d/e/f", "x/y"])
    dir_names = st.sampled_from(["d", "d/e", "x", "n"])

    def _free(self, key: str) -> bool:
        """No key is a prefix of another (an object store allows it; a local one not),
        nor a directory."""
        return key not in self._dirs() and not any(
            k.startswith(key + "/") or key.startswith(k + "/") for k in self.keys
        )

    def _dirs(self) -> set[str]:
        """Every directory the mount shows: above a key, or kept though nothing is stored
        below it (made with mkdir, or emptied through the mount: docs/semantics.md, passthrough)."""
        dirs = set(self.kept)
        for path in [*self.keys, *self.kept]:
            parts = path.split("/")
            dirs.update("/".join(parts[:depth]) for depth in range(1, len(parts)))
        return dirs

    def _keep_parent(self, path: str) -> None:
        if "/" in path:
            self.kept.add(path.rpartition("/")[0])

    @rule(key=names, data=st.binary(max_size=64), truncate=st.booleans())
    def write(self, key, data, truncate):
        if not self._free(key):
            return
        if key in self.keys:
            file = self.fs.open(key, os.O_RDWR | (os.O_TRUNC if truncate else 0))
            current = b"" if truncate else self.keys[key]
        else:
            file, _ = self.fs.create(key)
            current = b""
        file.write(0, data)
        file.release()
        self.keys[key] = data + current[len(data) :]

    @rule(key=names, size=st.integers(0, 80))
    def truncate(self, key, size):
        if key not in self.keys:
            return
        self.fs.truncate(key, size)
        self.keys[key] = self.keys[key][:size].ljust(size, b"\0")

    @rule(key=names)
    def remove(self, key):
        if key not in self.keys:
            return
        self.fs.unlink(key)
        del self.keys[key]
        self._keep_parent(key)

    @rule(src=names, dst=names)
    def move(self, src, dst):
        if src not in self.keys or src == dst:
            return
        value = self.keys.pop(src)
        if not self._free(dst):
            self.keys[src] = value
            return
        self.fs.rename(src, dst)
        self.keys[dst] = value
        self._keep_parent(src)

    @rule(src=names, dst=names)
    def link(self, src, dst):
        if src not in self.keys or dst in self.keys or not self._free(dst):
            return
        self.fs.link(src, dst)
        self.keys[dst] = self.keys[src]

    @rule(directory=dir_names)
    def make_dir(self, directory):
        if not self._free(directory):
            if directory in self._dirs():
                with pytest.raises(FsError) as info:
                    self.fs.mkdir(directory)
                assert info.value.errno == errno.EEXIST
            return
        assert self.fs.mkdir(directory).is_dir
        self.kept.add(directory)

    @rule(src=dir_names, dst=dir_names)
    def move_dir(self, src, dst):
        dirs = self._dirs()
        if src not in dirs or _within(dst, src) or _within(src, dst):
            return
        if dst in self.keys or any(dst.startswith(k + "/") for k in self.keys):
            return
        if any(path.startswith(dst + "/") for path in [*self.keys, *dirs]):
            with pytest.raises(FsError) as info:
                self.fs.rename(src, dst)
            assert info.value.errno == errno.ENOTEMPTY
            return
        self.fs.rename(src, dst)
        self.keys = {dst + k[len(src) :] if _within(k, src) else k: v for k, v in self.keys.items()}
        self.kept = {dst + d[len(src) :] if _within(d, src) else d for d in self.kept if not _within(d, dst)}
        self._keep_parent(src)

    @rule(directory=dir_names)
    def remove_tree(self, directory):
        """`rm -r`: every file unlinked, then every directory removed, deepest first."""
        if directory not in self._dirs():
            return
        self._remove_tree(directory)
        self.keys = {k: v for k, v in self.keys.items() if not _within(k, directory)}
        self.kept = {d for d in self.kept if not _within(d, directory)}
        self._keep_parent(directory)

    def _remove_tree(self, path):
        for name, attr in list(self.fs.list_dir(path)):
            if attr.is_dir:
                self._remove_tree(f"{path}/{name}")
            else:
                self.fs.unlink(f"{path}/{name}")
        self.fs.rmdir(path)

    @invariant()
    def the_store_holds_the_model(self):
        assert self.stored() == self.keys

    @invariant()
    def every_path_looks_up_as_the_model_says(self):
        expected = {key: Attributes(False, len(value)) for key, value in self.keys.items()}
        expected.update((directory, Attributes(True)) for directory in self._dirs())
        for path in {*expected, "a", "b", "d/c", "d/e/f", "x/y", "d", "d/e", "x", "n"}:
            attr = self.fs.lookup(path)
            shown = attr if attr is None else Attributes(attr.is_dir, attr.size)
            assert shown == expected.get(path), path
            cached = at_hand(self.fs.lookup, path)
            assert cached is NOT_AT_HAND or cached == attr, path

    @invariant()
    def the_core_lists_the_model(self):
        files, dirs = _walk(self.fs)
        assert files == {k: len(v) for k, v in self.keys.items()}
        assert dirs == self._dirs()
        for key, value in self.keys.items():
            file = self.fs.open(key, os.O_RDONLY)
            assert file.read(0, 1000) == value
            file.release()


class CachedPassthroughModel(PassthroughModel):
    """A local directory, its listings kept (one listing per directory)."""

    ttl = 3600.0


class CachedTreePassthroughModel(PassthroughModel):
    """memory://, which lists whole subtrees at once: listings come from subtree listings."""

    ttl = 3600.0

    def open_store(self):
        self.base = f"/zarrfs-model-{uuid.uuid4().hex}"
        store = open_store("memory://" + self.base)
        assert store.lists_trees
        return store

    def stored(self) -> dict[str, bytes]:
        fs = self.store.fs
        return {path[len(self.base) + 1 :]: fs.cat_file(path) for path in fs.find(self.base)}

    def teardown(self) -> None:
        super().teardown()
        self.store.erase_prefix("")


_MODEL_SETTINGS = settings(
    max_examples=25, stateful_step_count=15, deadline=None, suppress_health_check=list(HealthCheck)
)
TestPassthroughModel = PassthroughModel.TestCase
TestCachedPassthroughModel = CachedPassthroughModel.TestCase
TestCachedTreePassthroughModel = CachedTreePassthroughModel.TestCase
for _case in (TestPassthroughModel, TestCachedPassthroughModel, TestCachedTreePassthroughModel):
    _case.settings = _MODEL_SETTINGS


def test_the_spool_given_to_a_local_store_at_a_close_is_copied_before_it_is_written_again(core):
    """The close of a file's only open gives its spool to a local store on the same
    filesystem (linked in, not copied); a write through a descriptor still open after
    that close (a shell's duplicate) must not change the stored value behind its back."""
    fs, root = core
    file, _ = fs.create("k")
    file.write(0, b"first")
    file.flush()
    spool_inode = os.fstat(file.file._spool.fileno()).st_ino
    assert (root / "k").stat().st_ino == spool_inode, "the spool was copied, not linked"
    file.write(0, b"FIRST, then more")
    assert (root / "k").read_bytes() == b"first"
    file.flush()
    assert (root / "k").read_bytes() == b"FIRST, then more"
    file.release()
    assert (root / "k").read_bytes() == b"FIRST, then more"


def _close_failed(fs, root, monkeypatch):
    """A writer of "new" over "old" whose close failed (the store down), the store back."""
    (root / "k").write_bytes(b"old")
    file = fs.open("k", os.O_WRONLY | os.O_TRUNC)
    file.write(0, b"new")
    store_file = fs.store.set_file
    monkeypatch.setattr(fs.store, "set_file", lambda *args, **kwargs: (_ for _ in ()).throw(OSError(errno.EIO, "down")))
    with pytest.raises(OSError):
        file.flush()
    monkeypatch.setattr(fs.store, "set_file", store_file)
    return file


def test_what_a_close_failed_to_store_is_dropped_at_release_not_stored_behind_its_back(core, monkeypatch):
    fs, root = core
    file = _close_failed(fs, root, monkeypatch)
    file.release()  # the store is back, but the writer was told its close failed
    assert (root / "k").read_bytes() == b"old"


def test_what_a_close_failed_to_store_is_not_stored_by_a_readers_close_before_the_release(core, monkeypatch):
    """The writer's close failed and its release is still on its way when a reader opens
    and closes the file (as `cat` does right after): the reader's close does not store
    what the writer was told was not stored."""
    fs, root = core
    writer = _close_failed(fs, root, monkeypatch)
    reader = fs.open("k", os.O_RDONLY)
    reader.flush()
    reader.release()
    assert (root / "k").read_bytes() == b"old"
    writer.release()
    assert (root / "k").read_bytes() == b"old"
    written = fs.open("k", os.O_WRONLY)  # written again: stored as any write
    written.write(0, b"NEW")
    written.flush()
    written.release()
    assert (root / "k").read_bytes() == b"NEW"
