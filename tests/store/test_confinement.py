"""Confinement of the local store (docs/errors.md): keys resolve inside the root only. Symbolic
links (to a file or directory outside, `..`, loops, /dev/zero), FIFOs and sockets are not
values: they read as missing, are not listed, and nothing outside the root is read,
written, moved or removed through them. A FIFO never blocks."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import tree_snapshot
from zarrfs.store import ByteRange, ConfinementError, KeyNotFoundError, LocalStore, StoreError, open_store

SECRET = b"outside the store"


@pytest.fixture
def hostile(tmp_path: Path):
    """A store root holding every kind of hostile entry, and a directory outside it."""
    outside = tmp_path / "outside"
    (outside / "secret_arr" / "c").mkdir(parents=True)
    (outside / "secret").write_bytes(SECRET)
    (outside / "secret_arr" / "zarr.json").write_bytes(b"{}")
    (outside / "secret_arr" / "c" / "0").write_bytes(SECRET)
    root = tmp_path / "root"
    (root / "arr" / "c").mkdir(parents=True)
    (root / "arr" / "zarr.json").write_bytes(b"{}")
    (root / "arr" / "c" / "9").write_bytes(b"real chunk")
    links = {
        "arr/c/0": outside / "secret",  # file link out of the root
        "link_dir": outside,  # directory link out of the root
        "up": Path(".."),  # `..`
        "loop": Path("loop"),  # a link to itself
        "ping": Path("pong"),  # a two-link loop
        "pong": Path("ping"),
        "arr/c/1": Path("/dev/zero"),  # endless bytes
        "arr/c/5": Path("9"),  # a link inside the root is not followed either
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    os.mkfifo(root / "arr" / "c" / "2")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "arr" / "c" / "3"))
    yield open_store(str(root)), root, outside
    server.close()


HOSTILE_KEYS = [
    "arr/c/0",
    "arr/c/1",
    "arr/c/2",
    "arr/c/3",
    "arr/c/5",
    "link_dir/secret",
    "link_dir/secret_arr/c/0",
    "up/outside/secret",
    "loop",
    "loop/x",
    "ping",
    "ping/x",
]


def test_the_local_store_is_a_local_store(hostile) -> None:
    store, _, _ = hostile
    assert isinstance(store, LocalStore)


@pytest.mark.parametrize("key", HOSTILE_KEYS)
def test_links_fifos_and_sockets_read_as_missing(hostile, key: str) -> None:
    store, _, _ = hostile
    assert store.get(key) is None
    assert store.get(key, ByteRange.span(0, 4)) is None
    assert store.get_info(key) is None
    assert not store.exists(key)
    assert store.get_partial_values([(key, None), ("arr/c/9", None)]) == [None, b"real chunk"]


def test_a_fifo_key_never_blocks(hostile) -> None:
    store, _, _ = hostile
    result: list[object] = []
    reader = threading.Thread(target=lambda: result.append(store.get("arr/c/2")), daemon=True)
    start = time.monotonic()
    reader.start()
    reader.join(5)
    assert not reader.is_alive() and result == [None]
    assert time.monotonic() - start < 2


def test_listings_show_only_regular_files_and_real_directories(hostile) -> None:
    store, _, _ = hostile
    assert store.list() == ["arr/c/9", "arr/zarr.json"]
    assert store.list_prefix("link_dir/") == []
    assert store.list_prefix("up/") == []
    assert store.list_dir("") == ([], ["arr"])
    assert store.list_dir("arr/c/") == (["9"], [])
    assert store.list_dir("link_dir/") == ([], [])
    infos, prefixes = store.list_dir_info("arr/c/")
    assert list(infos) == ["9"] and prefixes == []
    assert store.list_prefix_sizes("") == {"arr/c/9": 10, "arr/zarr.json": 2}


def test_erasing_never_removes_anything_through_a_link(hostile) -> None:
    store, root, outside = hostile
    before = tree_snapshot(outside)
    store.erase("link_dir/secret")
    store.erase("arr/c/0")
    store.erase_values(["up/outside/secret", "link_dir/secret_arr/c/0", "arr/c/2", "arr/c/3"])
    store.erase_prefix("link_dir/")
    store.erase_prefix("link_dir/secret_arr/")
    store.erase_prefix("up/")
    store.erase_prefix("arr/")
    assert tree_snapshot(outside) == before
    # the store's own keys went; what is not a value stays where it was
    assert store.list() == []
    assert sorted(p.name for p in (root / "arr" / "c").iterdir()) == ["0", "1", "2", "3", "5"]


def test_erasing_the_whole_store_leaves_the_outside_alone(hostile) -> None:
    store, _, outside = hostile
    before = tree_snapshot(outside)
    store.erase_prefix("")
    assert tree_snapshot(outside) == before
    assert store.list() == []


def test_writes_never_go_through_a_linked_directory(hostile) -> None:
    store, _, outside = hostile
    before = tree_snapshot(outside)
    for key in ["link_dir/new", "link_dir/secret_arr/c/1", "up/outside/new", "loop/x"]:
        with pytest.raises(StoreError):
            store.set(key, b"written")
    with pytest.raises(StoreError):
        store.set_partial_values([("link_dir/secret", 0, b"x")])
    assert tree_snapshot(outside) == before


def test_a_write_to_a_linked_key_replaces_the_link_not_its_target(hostile) -> None:
    store, root, outside = hostile
    store.set("arr/c/0", b"new chunk")
    assert (outside / "secret").read_bytes() == SECRET
    assert not (root / "arr" / "c" / "0").is_symlink()
    assert store.get("arr/c/0") == b"new chunk"


def test_moves_never_go_through_a_link(hostile) -> None:
    store, root, outside = hostile
    before = tree_snapshot(outside)
    with pytest.raises(KeyNotFoundError):
        store.move("link_dir/secret_arr", "stolen")
    with pytest.raises(KeyNotFoundError):
        store.move("arr/c/0", "stolen")
    with pytest.raises(StoreError):
        store.move("arr/c/9", "link_dir/planted")
    assert tree_snapshot(outside) == before
    assert not (root / "stolen").exists()
    assert store.get("arr/c/9") == b"real chunk"


def test_a_directory_swapped_for_a_link_is_refused_when_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store = open_store(str(tmp_path / "root"))
    store.set("g/a/zarr.json", b"{}")
    store.erase_prefix("g/")
    os.symlink(outside, tmp_path / "root" / "g")
    with pytest.raises(ConfinementError):
        store.set("g/a/zarr.json", b"{}")
    assert list(outside.iterdir()) == []


def test_the_root_itself_may_be_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "a").mkdir(parents=True)
    (real / "a" / "b").write_bytes(b"v")
    os.symlink(real, tmp_path / "alias")
    store = open_store(str(tmp_path / "alias"))
    assert store.get("a/b") == b"v"
    assert store.list() == ["a/b"]
