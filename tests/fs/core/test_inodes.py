"""Inode numbers (fs/inodes.py, and the FUSE adapter's replies) without a kernel: a number
lives while the kernel holds a lookup of it, counted as the kernel counts them (a reply to
lookup, mkdir, create or link: one; readdirplus: one for each entry that fits in the
reply, none for `.` and `..`; getattr: none), and leaves the table once forgotten."""

from __future__ import annotations

import pyfuse3
import pytest
import trio
import zarr

from zarrfs.format import IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.fs.fuse.adapter import FuseAdapter
from zarrfs.fs.fuse.requests import AdapterOptions
from zarrfs.fs.inodes import ROOT_INODE, InodeTable
from zarrfs.store import open_store


def test_a_path_keeps_its_number_until_every_lookup_of_it_is_forgotten():
    table = InodeTable()
    ino = table.lookup("a/data")
    assert table.lookup("a/data") == ino
    table.forget(ino, 1)
    assert table.path(ino) == "a/data"
    table.forget(ino, 1)
    with pytest.raises(KeyError):
        table.path(ino)
    assert len(table) == 1  # the root
    assert table.lookup("a/data") != ino  # seen again: a new number


def test_a_number_handed_out_without_a_lookup_counts_none():
    table = InodeTable()
    ino = table.inode("a")  # getattr, `.` and `..` replies
    assert table.lookup("a") == ino
    table.forget(ino, 1)
    assert table.known("a") is None


def test_the_root_is_never_forgotten():
    table = InodeTable()
    table.forget(ROOT_INODE, 3)
    assert table.path(ROOT_INODE) == "" and table.known("") == ROOT_INODE


def test_a_moved_node_keeps_its_numbers_and_their_lookups():
    table = InodeTable()
    info = table.lookup("g/a/info")
    table.rename_tree("g/a", "h/a")
    assert table.path(info) == "h/a/info" and table.known("g/a/info") is None
    table.forget(info, 1)
    assert table.known("h/a/info") is None and len(table) == 1


def test_what_is_below_a_path_is_what_a_pass_over_the_table_finds():
    """`under`, `remove_tree` and `rename_tree` find what is below a path through an index
    (not a pass over every path the kernel knows): after lookups, forgets, removals and
    moves in any order, it names what a pass over the table finds."""
    import random

    rng = random.Random(7)
    table = InodeTable()
    names = ["a", "b", "a b", "ab"]
    paths = ["/".join(rng.choice(names) for _ in range(rng.randint(1, 4))) for _ in range(60)]
    for _ in range(2000):
        path, op = rng.choice(paths), rng.random()
        if op < 0.5:
            table.lookup(path)
        elif op < 0.7 and table.known(path) is not None:
            table.forget(table.known(path), 1)
        elif op < 0.8:
            table.remove_tree(path)
        elif op < 0.9:
            target = rng.choice(paths)
            if target != path and not target.startswith(path + "/") and not path.startswith(target + "/"):
                table.rename_tree(path, target)
        for probe in (path, path.rpartition("/")[0], rng.choice(paths)):
            scanned = {i for p, i in table.items() if p == probe or not probe or p.startswith(probe + "/")}
            assert set(table.under(probe)) == scanned, probe


def test_forgetting_a_removed_number_leaves_the_new_number_at_its_path():
    table = InodeTable()
    old = table.lookup("a/info")
    table.remove_tree("a")
    new = table.lookup("a/info")
    table.forget(old, 1)
    assert new != old and table.path(new) == "a/info"


# ---------------------------------------------------------------- the adapter's replies


@pytest.fixture
def adapter(tmp_path) -> FuseAdapter:
    """An adapter over the decoded tree of array `a` of 20 one-element chunks."""
    zarr.create_array(str(tmp_path / "s.zarr" / "a"), shape=(20,), chunks=(1,), dtype="u1", fill_value=0)
    zarr.open_group(str(tmp_path / "s.zarr"), mode="a")
    core = DecodedCore(open_hierarchy(open_store(str(tmp_path / "s.zarr")), IOContext()), metadata_ttl=60)
    return FuseAdapter(core, AdapterOptions())  # the core's hooks: none, it tells no kernel


def _readdirplus(adapter: FuseAdapter, inode: int, room: int, monkeypatch) -> list[tuple[bytes, int]]:
    """The entries of directory `inode` that a reply with room for `room` of them takes."""
    taken: list[tuple[bytes, int]] = []

    def reply(token, name: bytes, entry, next_id: int) -> bool:
        if len(taken) == room:
            return False
        taken.append((name, entry.st_ino))
        return True

    monkeypatch.setattr(pyfuse3, "readdir_reply", reply)

    async def listing() -> None:
        fh = await adapter.opendir(inode, None)
        await adapter.readdir(fh, 0, None)
        await adapter.releasedir(fh)

    trio.run(listing)
    return taken


def test_readdirplus_counts_each_entry_that_fits_and_neither_dot(adapter, monkeypatch):
    """Once the kernel forgets what it was handed, as many times as it was handed it, the
    table holds the root alone: had the dots been counted (the kernel links no dots), `a`
    and `chunks` would stay; had an entry that did not fit been counted, it would."""
    a = trio.run(adapter.lookup, ROOT_INODE, b"a")
    chunks = trio.run(adapter.lookup, a.st_ino, b"chunks")
    trio.run(adapter.getattr, chunks.st_ino)  # counted by nobody
    taken = _readdirplus(adapter, chunks.st_ino, 12, monkeypatch)
    assert [name for name, _ in taken] == [b".", b".."] + [str(i).encode() for i in range(10)]
    assert adapter.inodes.known("a/chunks/10") is None
    trio.run(adapter.forget, [(ino, 1) for name, ino in taken[2:]] + [(a.st_ino, 1), (chunks.st_ino, 1)])
    assert len(adapter.inodes) == 1


def test_each_listing_of_an_entry_is_one_lookup_more(adapter, monkeypatch):
    a = trio.run(adapter.lookup, ROOT_INODE, b"a")
    chunks = trio.run(adapter.lookup, a.st_ino, b"chunks")
    first = dict(_readdirplus(adapter, chunks.st_ino, 100, monkeypatch))
    again = dict(_readdirplus(adapter, chunks.st_ino, 100, monkeypatch))
    assert first == again and len(first) == 22
    trio.run(adapter.forget, [(first[b"7"], 1)])
    assert adapter.inodes.path(first[b"7"]) == "a/chunks/7"  # the second listing's lookup
    trio.run(adapter.forget, [(first[b"7"], 1)])
    assert adapter.inodes.known("a/chunks/7") is None


def test_mkdir_hands_the_kernel_one_lookup(adapter):
    made = trio.run(adapter.mkdir, ROOT_INODE, b"g", 0o755, None)
    assert adapter.inodes.path(made.st_ino) == "g"
    trio.run(adapter.forget, [(made.st_ino, 1)])
    assert adapter.inodes.known("g") is None


def test_a_number_moved_onto_a_path_that_had_one_keeps_its_own():
    table = InodeTable()
    moved, replaced, beside = table.lookup("g/a/info"), table.lookup("h/a/info"), table.lookup("h/a/data")
    table.rename_tree("g/a", "h/a")
    assert table.known("h/a/info") == moved and table.find(replaced) is None
    assert table.known("h/a/data") == beside  # (as before: a path not moved onto stays)
    assert table.known("g/a/info") is None and table.known("g") is None
    table.forget(moved, 1)
    table.forget(beside, 1)
    assert len(table) == 1 and table.items() == [("", ROOT_INODE)]


def test_a_slot_used_again_never_gives_a_number_the_kernel_was_handed_before():
    table = InodeTable()
    handed = set()
    for i in range(50):
        ino = table.lookup(f"d/{i % 3}")
        assert ino not in handed
        handed.add(ino)
        table.forget(ino, 1)
    assert len(table) == 1


def test_a_directory_of_many_names_finds_each_through_its_index():
    """Past INDEXED names a directory's names are found by a dictionary, and below half of
    it by a look along its list again: each name keeps its number either way."""
    table = InodeTable()
    numbers = {f"g/a{i}": table.lookup(f"g/a{i}") for i in range(40)}
    assert all(table.known(p) == n and table.path(n) == p for p, n in numbers.items())
    for i in range(35):
        table.forget(numbers.pop(f"g/a{i}"), 1)
    assert all(table.known(p) == n and table.path(n) == p for p, n in numbers.items())
    assert table.known("g/a0") is None and len(table) == 1 + len(numbers)
