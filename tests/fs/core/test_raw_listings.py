"""Passthrough listings without a kernel (fs/passthrough/listings.py): over a store that
lists whole subtrees (memory://, as S3), the first listing of a directory fetches its
subtree once and answers listings and lookups of everything below until the ttl passes;
what the mount changes shows at once; big subtrees fall back to one listing a directory;
what is kept stays bounded. Store calls are counted by wrapping the store's two listings."""

from __future__ import annotations

import threading
import uuid

import pytest

from tests.conftest import wait_for
from tests.fs.core.at_hand import NOT_AT_HAND, at_hand
from tests.fs.core.test_passthrough_core import _walk
from zarrfs.fs.passthrough import PassthroughCore, listings
from zarrfs.store import open_store

# 3 groups of 2 arrays, each with a document and 3 chunks; a document at the root
KEYS = {"zarr.json": b"{}"}
for _g in range(3):
    KEYS[f"g{_g}/zarr.json"] = b"{}"
    for _a in range(2):
        KEYS[f"g{_g}/a{_a}/zarr.json"] = b'{"node_type": "array"}'
        KEYS.update({f"g{_g}/a{_a}/c/0/{i}": bytes(10 + i) for i in range(3)})


def _dirs(keys) -> set[str]:
    return {key.rsplit("/", i)[0] for key in keys for i in range(1, key.count("/") + 1)}


class Counted:
    """The store's listings, counted: ("tree" | "dir", prefix) per call."""

    def __init__(self, store) -> None:
        self.calls: list[tuple[str, str]] = []
        tree, directory = store.list_tree_info, store.list_dir_info

        def list_tree_info(prefix, max_keys):
            self.calls.append(("tree", prefix))
            return tree(prefix, max_keys)

        def list_dir_info(prefix):
            self.calls.append(("dir", prefix))
            return directory(prefix)

        store.list_tree_info, store.list_dir_info = list_tree_info, list_dir_info


@pytest.fixture
def tree_store():
    store = open_store(f"memory://zarrfs-listings-{uuid.uuid4().hex}")
    store.set_values(KEYS)
    yield store
    store.erase_prefix("")


def _core(store, tmp_path, ttl: float = 60.0, names_kept: int = 100_000) -> tuple[PassthroughCore, Counted]:
    counted = Counted(store)
    metadata_memory = names_kept * listings.LISTED_NAME_BYTES
    return PassthroughCore(store, metadata_ttl=ttl, spool_dir=str(tmp_path), metadata_memory=metadata_memory), counted


def test_listing_the_root_lists_the_subtree_once_and_answers_everything_below(tree_store, tmp_path):
    core, counted = _core(tree_store, tmp_path)
    assert at_hand(core.list_dir, "") is NOT_AT_HAND  # nothing listed yet
    files, dirs = _walk(core)
    assert files == {key: len(value) for key, value in KEYS.items()}
    assert dirs == _dirs(KEYS)
    for directory in dirs | {""}:
        assert list(core.list_dir(directory, wait=False)) == list(core.list_dir(directory))
    for key, value in KEYS.items():
        assert core.lookup(key).size == len(value)
        assert core.lookup(key, wait=False) == core.lookup(key)
        assert core.lookup(key + "-missing") is None
    for directory in dirs:
        assert core.lookup(directory, wait=False).is_dir
        assert core.lookup(directory + "/missing") is None
    assert core.lookup("nowhere/at/all") is None
    assert counted.calls == [("tree", "")]
    assert tree_store.request_stats().get("store_head", 0) == 0  # sizes came with the listing
    core.close()


def test_after_the_ttl_a_directory_is_listed_again(tree_store, tmp_path):
    core, counted = _core(tree_store, tmp_path, ttl=0.2)
    _walk(core)
    tree_store.set("g0/a0/c/1/0", b"new")  # written by another program
    assert core.lookup("g0/a0/c/1") is None
    wait_for(lambda: at_hand(core.lookup, "g0/a0/c/1") is NOT_AT_HAND, timeout=30, interval=0.02)  # the ttl passed
    files, _ = _walk(core)
    assert files["g0/a0/c/1/0"] == 3
    assert counted.calls[0] == ("tree", "") and len(counted.calls) > 1
    core.close()


def test_with_nothing_kept_each_directory_is_one_listing(tree_store, tmp_path):
    core, counted = _core(tree_store, tmp_path, ttl=0)
    assert core.lookup("g0/a0/zarr.json").size == len(KEYS["g0/a0/zarr.json"])
    assert dict(core.list_dir("g1")).keys() == {"a0", "a1", "zarr.json"}
    assert counted.calls == [("dir", "g0/a0/"), ("dir", ""), ("dir", "g1/")]
    core.close()


def test_what_the_mount_writes_shows_at_once_in_a_listed_subtree(tree_store, tmp_path):
    core, counted = _core(tree_store, tmp_path)
    _walk(core)
    file, _ = core.create("g0/new/deeper/k")
    file.write(0, b"abc")
    file.release()
    assert core.lookup("g0/new/deeper/k").size == 3
    assert core.mkdir("g2/empty").is_dir
    core.unlink("g1/a0/c/0/0")
    core.rename("g1/a1", "g2/moved")
    files, dirs = _walk(core)
    expected = {k: len(v) for k, v in KEYS.items() if not k.startswith(("g1/a1/", "g1/a0/c/0/0"))}
    expected.update(
        {"g0/new/deeper/k": 3},
        **{"g2/moved" + k[len("g1/a1") :]: len(v) for k, v in KEYS.items() if k.startswith("g1/a1/")},
    )
    assert files == expected
    assert {"g0/new", "g0/new/deeper", "g2/empty", "g2/moved/c/0", "g1/a0/c/0"} <= dirs
    assert "g1/a1" not in dirs
    # after the move, directories with no listing kept are listed again; nothing else is
    assert counted.calls[0] == ("tree", "")
    assert set(counted.calls[1:]) <= {("tree", "g2/moved/"), ("tree", "g2/empty/")}
    core.close()


def test_a_listing_the_mount_changed_while_in_flight_is_not_kept(tree_store, tmp_path):
    core, _counted = _core(tree_store, tmp_path)
    listed, written = threading.Event(), threading.Event()
    tree = tree_store.list_tree_info

    def slow_tree(prefix, max_keys):
        answer = tree(prefix, max_keys)  # listed before the write below
        listed.set()
        written.wait(10)
        return answer

    tree_store.list_tree_info = slow_tree
    lister = threading.Thread(target=lambda: list(core.list_dir("")))
    lister.start()
    assert listed.wait(10)
    file, _ = core.create("g0/a0/c/0/9")
    file.write(0, b"late")
    file.release()
    written.set()
    lister.join()
    assert core.lookup("g0/a0/c/0/9").size == 4
    assert "9" in dict(core.list_dir("g0/a0/c/0"))
    core.close()


def test_a_subtree_too_big_to_hold_is_listed_per_directory_keeping_the_groups_it_saw_whole(
    tree_store, tmp_path, monkeypatch
):
    monkeypatch.setattr(listings, "TREE_KEYS", 12)  # each group holds 9 keys, the root 28
    core, counted = _core(tree_store, tmp_path)
    assert dict(core.list_dir("")).keys() == {"g0", "g1", "g2", "zarr.json"}
    assert counted.calls == [("tree", ""), ("dir", "")]
    # g0 was seen whole before the listing stopped (in g1): answered without a call
    assert core.lookup("g0/a1/c/0/2", wait=False).size == 12
    assert at_hand(core.lookup, "g1/zarr.json") is NOT_AT_HAND
    files, _ = _walk(core)
    assert files == {key: len(value) for key, value in KEYS.items()}
    assert counted.calls[2:] == [("tree", "g1/"), ("tree", "g2/")]
    core.close()


def test_what_is_kept_stays_bounded_and_true(tree_store, tmp_path):
    core, _counted = _core(tree_store, tmp_path, names_kept=40)
    for _ in range(2):
        files, dirs = _walk(core)
        assert files == {key: len(value) for key, value in KEYS.items()}
        assert dirs == _dirs(KEYS)
        assert core._listings._entries <= 40
    core.close()


def test_a_directory_listing_more_names_than_the_bound_is_served_and_not_kept(tmp_path):
    """A flat directory of a million keys would have been kept whole, past the bound."""
    store = open_store(f"memory://zarrfs-listings-{uuid.uuid4().hex}")
    store.set_values({f"flat/k{i:03d}": b"x" for i in range(100)})
    try:
        core, _ = _core(store, tmp_path, names_kept=40)
        for _ in range(2):
            assert sorted(name for name, _ in core.list_dir("flat")) == [f"k{i:03d}" for i in range(100)]
            assert core._listings._entries <= 40
        core.close()
    finally:
        store.erase_prefix("")


def test_the_versions_of_files_opened_are_remembered_for_a_bounded_number(tree_store, tmp_path, monkeypatch):
    """Raw mode remembers each file's (size, mtime) at its last open, so that an unchanged
    file keeps the kernel's pages: for the VERSIONS_KEPT opened last, not every file ever."""
    import os

    from zarrfs.fs.passthrough import core as core_module

    monkeypatch.setattr(core_module, "VERSIONS_KEPT", 5)
    core, _ = _core(tree_store, tmp_path)
    chunks = [key for key in KEYS if "/c/" in key]
    for key in chunks:
        file = core.open(key, os.O_RDONLY)
        assert file.read(0, 100) == KEYS[key]
        file.release()
    assert len(core._versions) == 5 and list(core._versions) == chunks[-5:]
    again = core.open(chunks[-1], os.O_RDONLY)
    assert again.keep_cache  # opened again unchanged: its pages stay
    again.release()
    core.close()
