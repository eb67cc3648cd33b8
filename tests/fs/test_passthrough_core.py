"""The passthrough core without a kernel (fs/passthrough/core.py): a hypothesis state
machine creates, rewrites, truncates, links, moves and removes keys and directories
through the core, against a model of the store, and after every step checks what the
core lists and what the local store holds on disk."""

from __future__ import annotations

import errno
import os
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from zarrfs.fs.errors import errno_for
from zarrfs.fs.passthrough import PassthroughCore
from zarrfs.store import open_store
from zarrfs.store.keys import TEMP_PREFIX


def _on_disk(root: str) -> dict[str, bytes]:
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            if not name.startswith(TEMP_PREFIX):
                path = os.path.join(directory, name)
                found[os.path.relpath(path, root)] = open(path, "rb").read()
    return found


def _walk(core: PassthroughCore, path: str = "") -> dict[str, int]:
    sizes = {}
    for name, attr in core.list_dir(path):
        child = f"{path}/{name}" if path else name
        if attr.is_dir:
            sizes.update(_walk(core, child))
        else:
            sizes[child] = attr.size
    return sizes


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
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "s")
        os.mkdir(self.root)
        self.fs = PassthroughCore(open_store(self.root), metadata_ttl=0, spool_dir=self.tmp.name)
        self.keys: dict[str, bytes] = {}

    def teardown(self) -> None:
        self.fs.shutdown()
        self.fs.close()
        self.tmp.cleanup()

    names = st.sampled_from(["a", "b", "d/c", "d/e/f", "x/y"])

    def _free(self, key: str) -> bool:
        """No key is a prefix of another (an object store allows it; a local one not)."""
        return not any(k.startswith(key + "/") or key.startswith(k + "/") for k in self.keys)

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
        self.keys[key] = data + current[len(data):]

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

    @rule(src=names, dst=names)
    def link(self, src, dst):
        if src not in self.keys or dst in self.keys or not self._free(dst):
            return
        self.fs.link(src, dst)
        self.keys[dst] = self.keys[src]

    @invariant()
    def the_store_holds_the_model(self):
        assert _on_disk(self.root) == self.keys

    @invariant()
    def the_core_lists_the_model(self):
        assert _walk(self.fs) == {k: len(v) for k, v in self.keys.items()}
        for key, value in self.keys.items():
            file = self.fs.open(key, os.O_RDONLY)
            assert file.read(0, 1000) == value
            file.release()


TestPassthroughModel = PassthroughModel.TestCase
TestPassthroughModel.settings = settings(max_examples=25, stateful_step_count=15, deadline=None,
                                         suppress_health_check=list(HealthCheck))
