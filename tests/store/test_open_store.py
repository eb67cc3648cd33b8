"""open_store: which URL or path opens which kind of store."""

from __future__ import annotations

from pathlib import Path

import pytest

from zarrfs.store import StoreError, open_store


def test_relative_paths_and_file_urls_open_local_stores(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    open_store("rel/store").set("k", b"v")
    assert open_store(f"file://{tmp_path}/rel/store").get("k") == b"v"
    assert (tmp_path / "rel" / "store" / "k").read_bytes() == b"v"


def test_memory_stores_with_different_roots_are_separate() -> None:
    first, second = open_store("memory://zarrfs-open-a"), open_store("memory://zarrfs-open-b")
    try:
        first.set("k", b"first")
        assert second.get("k") is None
        assert open_store("memory://zarrfs-open-a/").get("k") == b"first"
    finally:
        first.erase_prefix("")


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_s3_endpoint_comes_from_aws_endpoint_url(s3_endpoint, s3_bucket, monkeypatch, backend) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    store = open_store(f"s3://{s3_bucket}/data.zarr", s3_backend=backend)
    store.set("zarr.json", b"{}")
    assert store.list() == ["zarr.json"]
    assert store.url == f"s3://{s3_bucket}/data.zarr"


def test_storage_options_are_not_modified(s3_storage_options, s3_bucket) -> None:
    options = {**s3_storage_options, "config_kwargs": {"retries": {"max_attempts": 1}}}
    assert open_store(f"s3://{s3_bucket}/x", options).get("k") is None
    assert options["config_kwargs"] == {"retries": {"max_attempts": 1}}


def test_unknown_protocol_cannot_be_opened() -> None:
    with pytest.raises(StoreError, match="cannot open the store"):
        open_store("nosuchprotocol://x/y")


def test_s3_url_without_bucket_is_rejected(s3_storage_options) -> None:
    with pytest.raises(StoreError, match="no bucket"):
        open_store("s3://", s3_storage_options)
