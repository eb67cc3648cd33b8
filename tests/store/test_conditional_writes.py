"""Conditional writes (compare-and-swap) on every kind of store: a value is replaced only
if it is still the version read, created only where none is; writers that race lose
nothing (each appends to one value, retrying on a refusal), across threads and, on a
local directory, across processes (as mounts of one store on several nodes)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from zarrfs.store import KeyExistsError, Store, open_store


def test_a_value_is_replaced_only_if_it_is_still_the_version_read(store: Store) -> None:
    store.create("g/zarr.json", b"first")
    value, version = store.get_versioned("g/zarr.json")
    assert value == b"first"
    assert store.set_if("g/zarr.json", b"second", version)
    assert not store.set_if("g/zarr.json", b"third", version)  # another writer's came between
    assert store.get("g/zarr.json") == b"second"
    assert store.request_stats()["store_precondition_failed"] == 1


def test_of_two_creations_of_one_key_the_second_is_refused(store: Store) -> None:
    store.create("a/zarr.json", b"mine")
    with pytest.raises(KeyExistsError):
        store.create("a/zarr.json", b"theirs")
    assert store.get("a/zarr.json") == b"mine"
    assert store.get_versioned("missing") == (None, None)
    assert not store.set_if("missing", b"x", "some version")  # gone, or never there


def _append(store: Store, key: str, piece: str) -> None:
    while True:
        value, version = store.get_versioned(key)
        if store.set_if(key, (value or b"") + piece.encode() + b",", version):
            return


def test_racing_writers_lose_no_update(store: Store) -> None:
    store.set("log", b"")
    threads = [
        threading.Thread(target=lambda w=w: [_append(store, "log", f"{w}-{i}") for i in range(10)]) for w in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(store.get("log").decode().split(",")[:-1]) == sorted(f"{w}-{i}" for w in range(4) for i in range(10))


_WRITER = """
import sys
from zarrfs.store import open_store
from tests.store.test_conditional_writes import _append
store = open_store(sys.argv[1])
for i in range(20):
    _append(store, "log", f"{sys.argv[2]}-{i}")
"""


def test_writers_in_separate_processes_on_one_directory_lose_no_update(tmp_path) -> None:
    root = str(tmp_path / "root")
    open_store(root).set("log", b"")
    repo = Path(__file__).parents[2]
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, root, str(w)], cwd=repo) for w in range(4)]
    assert [writer.wait(timeout=120) for writer in writers] == [0] * 4
    pieces = open_store(root).get("log").decode().split(",")[:-1]
    assert sorted(pieces) == sorted(f"{w}-{i}" for w in range(4) for i in range(20))
