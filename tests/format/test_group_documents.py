"""Documents that carry consolidated metadata, written while another writer (a mount on
another node) rewrites them: each write is made on the version read, and again on top of
the other writer's where it came between, so neither loses what the other wrote."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

from zarrfs.format.consolidated_writes import store_document
from zarrfs.store import open_store


def test_a_group_document_written_while_another_writer_consolidates_keeps_their_entries(tmp_path) -> None:
    path = str(tmp_path / "job.zarr")
    root = zarr.open_group(path, mode="w")
    root.create_array("a", shape=(2,), dtype="int8", fill_value=0)
    zarr.consolidate_metadata(path)
    store = open_store(path)
    mine = json.loads(store.get("zarr.json"))
    mine["attributes"] = {"title": "mine"}  # as setfattr on the root makes it, from what it read
    read = store.get_versioned

    def another_writer_between(key: str):
        got = read(key)
        if not hasattr(another_writer_between, "done"):
            another_writer_between.done = True  # type: ignore[attr-defined]
            zarr.open_group(path, mode="r+").create_array("b", shape=(2,), dtype="int8", fill_value=0)
            zarr.consolidate_metadata(path)
        return got

    store.get_versioned = another_writer_between  # type: ignore[method-assign]
    store_document(store, "zarr.json", json.dumps(mine).encode())
    reopened = zarr.open_group(path, mode="r", use_consolidated=True)
    assert sorted(reopened.array_keys()) == ["a", "b"]
    assert reopened.attrs["title"] == "mine"
    np.testing.assert_array_equal(reopened["b"][...], 0)
    assert store.request_stats()["store_precondition_failed"] == 1


def test_of_two_writers_creating_one_node_at_once_the_second_gets_file_exists(open_hierarchy, tmp_path) -> None:
    zarr.open_group(str(tmp_path), mode="w")
    first, second = open_hierarchy(tmp_path), open_hierarchy(tmp_path)
    # the second looked before the first made it (another node's mount, a moment earlier)
    second._check_place = lambda path: None
    first.create_group("common", {"by": "first"})
    with pytest.raises(FileExistsError, match="another writer"):
        second.create_group("common", {"by": "second"})
    assert zarr.open_group(str(tmp_path), mode="r")["common"].attrs["by"] == "first"
