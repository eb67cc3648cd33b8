"""A rename on S3 (copy, then delete) whose delete step the endpoint refuses: moto behind
a fault proxy that answers chosen DeleteObjects requests with 403. The delete is tried
again; what is still left is named in one log line and counted (`rename_leftovers`);
the source's documents go first, so a source whose chunks stay is no node any more. The
bucket, listed directly (not through the proxy), is the oracle."""

from __future__ import annotations

import logging
from urllib.parse import urlparse

import pytest

from tests.faults import FaultProxy
from zarrfs.store import StoreError, open_store
from zarrfs.store.moves import ERASE_ATTEMPTS

CHUNKS = {f"src/c/{i}/{j}": bytes([i, j]) * 100 for i in range(3) for j in range(2)}
DOCUMENTS = {"src/zarr.json": b'{"zarr_format": 3, "node_type": "group"}', "src/sub/zarr.json": b"{}"}


@pytest.fixture(params=["obstore", "s3fs"])
def backend(request) -> str:
    return request.param


def _stores(backend, s3_bucket, s3_storage_options, pass_first: int, refuse_count: int | None):
    """The store through a proxy refusing DeleteObjects (403 AccessDenied, no transient
    failure: each refusal is one try of the delete step), and the store directly."""
    url = urlparse(s3_storage_options["endpoint_url"])
    proxy = FaultProxy(url.hostname or "127.0.0.1", url.port or 80)
    proxy.refuse_matching, proxy.refuse_status, proxy.error_code = b"?delete", 403, "AccessDenied"
    proxy.pass_first, proxy.refuse_count = pass_first, refuse_count
    root = f"s3://{s3_bucket}/root"
    direct = open_store(root, s3_storage_options, s3_backend=backend)
    direct.set_values({**CHUNKS, **DOCUMENTS})
    faulty = open_store(
        root, {**s3_storage_options, "endpoint_url": proxy.endpoint}, s3_backend=backend, retry_delay=0.01
    )
    return proxy, direct, faulty


def test_a_delete_refused_twice_is_tried_again_and_nothing_is_left(backend, s3_bucket, s3_storage_options):
    proxy, direct, faulty = _stores(backend, s3_bucket, s3_storage_options, 0, 2)
    try:
        faulty.move("src", "dst")
    finally:
        proxy.close()
    assert direct.list_prefix("src/") == []
    assert {key: direct.get(key) for key in direct.list_prefix("dst/")} == {
        "dst" + key[3:]: value for key, value in {**CHUNKS, **DOCUMENTS}.items()
    }
    assert proxy.matched == 4  # the documents: refused twice, then deleted; then the chunks
    assert faulty.request_stats()["rename_leftovers"] == 0


def test_chunks_that_cannot_be_deleted_are_named_and_counted_and_the_source_is_no_node(
    backend, s3_bucket, s3_storage_options, caplog
):
    # the documents' delete (the first request) goes through; every later one is refused
    proxy, direct, faulty = _stores(backend, s3_bucket, s3_storage_options, 1, None)
    try:
        with caplog.at_level(logging.WARNING, logger="zarrfs.store.moves"):
            faulty.move("src", "dst")
    finally:
        proxy.close()
    left = direct.list_prefix("src/")
    assert left == sorted(CHUNKS)  # no document: no node in a listing
    assert sorted(direct.list_prefix("dst/")) == sorted("dst" + key[3:] for key in {**CHUNKS, **DOCUMENTS})
    assert faulty.request_stats()["rename_leftovers"] == len(CHUNKS)
    assert proxy.matched == 1 + ERASE_ATTEMPTS
    [line] = [r.getMessage() for r in caplog.records if "rename of src to dst" in r.getMessage()]
    assert all(key in line for key in CHUNKS) and "no node" in line, line


def test_a_source_that_cannot_be_deleted_at_all_fails_the_rename_and_stays_whole(
    backend, s3_bucket, s3_storage_options
):
    proxy, direct, faulty = _stores(backend, s3_bucket, s3_storage_options, 0, None)
    try:
        with pytest.raises(StoreError, match="could not be deleted"):
            faulty.move("src", "dst")
    finally:
        proxy.close()
    everything = {**CHUNKS, **DOCUMENTS}
    assert {key: direct.get(key) for key in direct.list_prefix("src/")} == everything
    assert sorted(direct.list_prefix("dst/")) == sorted("dst" + key[3:] for key in everything)
    assert faulty.request_stats()["rename_leftovers"] == len(everything)


@pytest.mark.parametrize("pass_first", [0, 1], ids=["nothing-deleted", "the-chunks-left"])
def test_deletes_refused_key_by_key_in_an_answer_of_200_are_seen_as_refused(
    backend, s3_bucket, s3_storage_options, pass_first, caplog
):
    """Where a bucket policy denies the deletes, DeleteObjects answers 200 with an error
    for each key: the delete is tried again, then what is left is named and counted as
    for a refused request (s3fs's batched delete reports no such error itself)."""
    proxy, direct, faulty = _stores(backend, s3_bucket, s3_storage_options, pass_first, None)
    proxy.refuse_each_key = True
    try:
        with caplog.at_level(logging.WARNING, logger="zarrfs.store.moves"):
            if pass_first:
                faulty.move("src", "dst")
            else:
                with pytest.raises(StoreError, match="could not be deleted"):
                    faulty.move("src", "dst")
    finally:
        proxy.close()
    left = sorted(CHUNKS) if pass_first else sorted({**CHUNKS, **DOCUMENTS})
    assert direct.list_prefix("src/") == left
    assert faulty.request_stats()["rename_leftovers"] == len(left)
    assert proxy.matched == pass_first + ERASE_ATTEMPTS
    [line] = [r.getMessage() for r in caplog.records if "rename of src to dst" in r.getMessage()]
    assert all(key in line for key in left[:20]), line
