"""What only the local store promises — atomic writes, no temporary files in sight,
erased prefixes leave no directories — and read-only stores (local and zip)."""

from __future__ import annotations

import os
import threading
import zipfile
from pathlib import Path

import pytest

from zarrfs.store import ByteRange, ReadOnlyStoreError, Store, StoreError, StoreVanishedError, open_store
from zarrfs.store.keys import TEMP_PREFIX


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_local_writes_leave_no_temporary_files(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    for i in range(20):
        store.set(f"a/b/{i % 3}", bytes(i))
    store.set_values({"c/0": b"0", "c/1": b"1"})
    store.set_partial_values([("c/0", 5, b"x")])
    assert all_files(tmp_path) == ["a", "a/b", "a/b/0", "a/b/1", "a/b/2", "c", "c/0", "c/1"]


def test_listings_skip_temporary_files(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    store.set("a/zarr.json", b"{}")
    (tmp_path / "a" / f"{TEMP_PREFIX}123").write_bytes(b"half-written")
    (tmp_path / f"{TEMP_PREFIX}456").write_bytes(b"half-written")
    assert store.list() == ["a/zarr.json"]
    assert store.list_prefix("a/") == ["a/zarr.json"]
    assert store.list_dir("") == ([], ["a"])
    assert store.list_dir("a/") == (["zarr.json"], [])


def test_a_reader_sees_the_old_or_the_new_value_never_a_mix(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    old, new = b"\1" * (4 << 20), b"\2" * (3 << 20)
    store.set("chunk", old)
    done = threading.Event()
    seen: set[tuple[int, bytes]] = set()

    def read() -> None:
        while not done.is_set():
            value = store.get("chunk")
            seen.add((len(value), bytes(set(value))))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(30):
            store.set("chunk", new if i % 2 == 0 else old)
    finally:
        done.set()
        reader.join()
    assert seen <= {(len(old), b"\1"), (len(new), b"\2")}
    assert all_files(tmp_path) == ["chunk"]


def test_erase_removes_directories_left_empty_but_not_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = open_store(str(root))
    store.set_values({"a/b/c/d": b"", "a/x": b"", "e/f": b""})
    store.erase("a/b/c/d")
    assert all_files(root) == ["a", "a/x", "e", "e/f"]
    store.erase_values(["a/x"])
    store.erase_prefix("e/")
    assert all_files(root) == []
    assert root.is_dir()


@pytest.mark.parametrize("how", ["removed", "made again", "replaced"])
def test_a_root_removed_or_replaced_is_a_vanished_store_never_remade(tmp_path: Path, how: str) -> None:
    root = tmp_path / "root"
    store = open_store(str(root))
    store.set("a/zarr.json", b"{}")
    for path in sorted(root.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    root.rmdir()
    if how == "made again":  # most filesystems give it the old inode number, were it free
        root.mkdir()
    elif how == "replaced":
        (tmp_path / "other").mkdir()
        (tmp_path / "other").rename(root)
    for operation in (
        lambda: store.get("a/zarr.json"),
        lambda: store.get_info("a/c/0"),
        store.list,
        lambda: store.list_dir(""),
        lambda: store.set("b/zarr.json", b"{}"),
        lambda: store.erase_prefix("a/"),
        lambda: store.move("a", "b"),
    ):
        with pytest.raises(StoreVanishedError, match=r"was (removed|replaced)"):
            operation()
    assert (all_files(root) if root.exists() else None) == (None if how == "removed" else [])


def test_a_root_not_made_yet_is_made_at_the_first_write_then_held_to(tmp_path: Path) -> None:
    root = tmp_path / "new"
    store = open_store(str(root))
    assert store.get("zarr.json") is None and store.list() == []
    store.set("zarr.json", b"{}")
    assert all_files(root) == ["zarr.json"]
    (root / "zarr.json").unlink()
    root.rmdir()
    with pytest.raises(StoreVanishedError):
        store.set("zarr.json", b"{}")
    assert not root.exists()


def test_erase_prefix_of_the_whole_store_keeps_the_root(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    store.set_values({"a/b": b"", "c": b""})
    store.erase_prefix("")
    assert all_files(tmp_path) == [] and tmp_path.is_dir()


def test_move_of_a_prefix_is_one_rename(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    store.set_values({"g/arr/zarr.json": b"{}", "g/arr/c/0": b"0"})
    inode = (tmp_path / "g" / "arr").stat().st_ino
    store.move("g/arr", "h/arr")
    assert (tmp_path / "h" / "arr").stat().st_ino == inode
    assert all_files(tmp_path) == ["h", "h/arr", "h/arr/c", "h/arr/c/0", "h/arr/zarr.json"]


def test_keys_never_escape_the_root(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "root"))
    for key in ["../x", "a/../../x", "/x"]:
        with pytest.raises(StoreError):
            store.set(key, b"x")
    assert all_files(tmp_path) == []


def assert_refuses_writes(store: Store) -> None:
    writes = [
        lambda: store.set("k", b"x"),
        lambda: store.set_values({"k": b"x"}),
        lambda: store.set_partial_values([("k", 0, b"x")]),
        lambda: store.erase("a/b"),
        lambda: store.erase_values(["a/b"]),
        lambda: store.erase_prefix("a/"),
        lambda: store.move("a/b", "moved"),
    ]
    for write in writes:
        with pytest.raises(ReadOnlyStoreError):
            write()


def test_read_only_local_store_refuses_writes(tmp_path: Path) -> None:
    open_store(str(tmp_path)).set("a/b", b"value")
    store = open_store(str(tmp_path), read_only=True)
    assert store.read_only
    assert_refuses_writes(store)
    assert store.get("a/b") == b"value"
    assert all_files(tmp_path) == ["a", "a/b"]


@pytest.fixture
def zip_path(tmp_path: Path) -> Path:
    path = tmp_path / "data.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("zarr.json", b'{"node_type": "group"}')
        archive.writestr("a/b", b"0123456789")
        archive.writestr("a/c d/e", b"e")
    return path


def test_zip_store_is_read_only_and_readable(zip_path: Path) -> None:
    store = open_store(str(zip_path))
    assert store.read_only
    assert_refuses_writes(store)
    assert store.list() == ["a/b", "a/c d/e", "zarr.json"]
    assert store.list_dir("") == (["zarr.json"], ["a"])
    assert store.list_dir("a/") == (["b"], ["c d"])
    assert store.get("a/b") == b"0123456789"
    assert store.get("a/b", ByteRange.suffix(3)) == b"789"
    requests = [("a/b", ByteRange.span(2, 4)), ("nope", None)]
    assert store.get_partial_values(requests) == [b"23", None]
    assert store.get_size("a/b") == 10


def test_chained_zip_url_opens_the_same_archive(zip_path: Path) -> None:
    store = open_store(f"zip::file://{zip_path}")
    assert store.read_only
    assert store.get("a/c d/e") == b"e"


def test_directory_named_like_a_zip_is_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "store.zip"
    path.mkdir()
    store = open_store(str(path))
    store.set("k", b"v")
    assert not store.read_only and os.path.isfile(path / "k")
