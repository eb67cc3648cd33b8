"""A move of a node on an object store (copies, then deletes) cut short never leaves a
document at the new name over chunks not copied: the documents are copied last
(zarrfs/store/moves.py). The cut is a copy that fails once the others were made, as
a killed daemon's would end."""

from __future__ import annotations

import pytest

from zarrfs.store import open_store


class _Killed(Exception):
    pass


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_a_move_cut_short_leaves_no_document_over_missing_chunks(backend, s3_bucket, s3_storage_options, monkeypatch):
    store = open_store(f"s3://{s3_bucket}/root", s3_storage_options, s3_backend=backend)
    node = {"n/zarr.json": b'{"node_type": "array"}', "n/c/0": b"chunk 0", "n/c/1": b"chunk 1"}
    for key, value in node.items():
        store.set(key, value)
    if backend == "obstore":
        real = store._obstore.copy

        class Obstore:
            def __getattr__(self, name):
                return getattr(store.__dict__["_real_obstore"], name)

            def copy(self, s3, src, dst, **kwargs):
                if src.endswith("c/1"):
                    raise _Killed
                return real(s3, src, dst, **kwargs)

        monkeypatch.setitem(store.__dict__, "_real_obstore", store._obstore)
        monkeypatch.setattr(store, "_obstore", Obstore())
    else:
        real = store.fs.copy

        def copy(paths, targets, **kwargs):  # each pair but chunk 1's, then the kill
            for path, target in zip(paths, targets):
                if not path.endswith("c/1"):
                    real(path, target)
            if any(path.endswith("c/1") for path in paths):
                raise _Killed

        monkeypatch.setattr(store.fs, "copy", copy)
    monkeypatch.setattr(store._retries, "attempts", 1, raising=False)
    with pytest.raises(Exception):  # noqa: B017 (whatever the store makes of the kill)
        store.move("n", "m")
    assert store.get("m/zarr.json") is None
    assert {key: store.get(key) for key in node} == node


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_a_move_whose_deletes_are_cut_short_leaves_no_document_under_the_old_name(
    backend, s3_bucket, s3_storage_options, monkeypatch
):
    store = open_store(f"s3://{s3_bucket}/root", s3_storage_options, s3_backend=backend)
    node = {"n/zarr.json": b'{"node_type": "array"}', "n/c/0": b"chunk 0"}
    for key, value in node.items():
        store.set(key, value)
    erase = store._erase_many

    def erase_documents_only(keys):  # the kill: before any other key is deleted
        if any(not key.endswith("zarr.json") for key in keys):
            raise _Killed
        erase(keys)

    monkeypatch.setattr(store, "_erase_many", erase_documents_only)
    with pytest.raises(_Killed):
        store.move("n", "m")
    assert store.get("n/zarr.json") is None
    assert {key: store.get("m" + key[1:]) for key in node} == node
