"""Which client serves an s3:// store (obstore where it understands every storage option
given, else s3fs), how the options and AWS variables configure obstore, and that both
clients list a bucket alike, keys neither can take as Zarr keys included."""

from __future__ import annotations

import pytest

from zarrfs.store import ByteRange, FsspecStore, ObstoreStore, StoreError, open_store
from zarrfs.store.s3_options import UnsupportedByObstore, obstore_settings

AWS_VARIABLES = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
]


@pytest.fixture
def bare_environment(monkeypatch, tmp_path):
    """No AWS variables, and no AWS files botocore could read."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_obstore_serves_s3_unless_an_option_is_s3fs_only(s3_storage_options, s3_bucket) -> None:
    url = f"s3://{s3_bucket}/root"
    obstore = open_store(url, s3_storage_options)
    assert isinstance(obstore, ObstoreStore)
    obstore.set("a/k", b"written by obstore")
    s3fs_only = {**s3_storage_options, "requester_pays": False}
    through_s3fs = open_store(url, s3fs_only)
    assert isinstance(through_s3fs, FsspecStore)
    assert through_s3fs.get("a/k") == b"written by obstore"
    assert isinstance(open_store(url, s3_storage_options, s3_backend="s3fs"), FsspecStore)
    with pytest.raises(StoreError, match="requester_pays"):
        open_store(url, s3fs_only, s3_backend="obstore")
    with pytest.raises(ValueError, match="unknown S3 backend"):
        open_store(url, s3_storage_options, s3_backend="boto")


def test_obstore_hands_its_own_buffers_to_a_reader_that_asks_for_them(s3_storage_options, s3_bucket) -> None:
    """Decoding reads values in place: no copy into `bytes` (which holds the GIL); every
    other reader gets `bytes`, ranges, missing keys and the size bound as before."""
    store = open_store(f"s3://{s3_bucket}/buffers", s3_storage_options)
    assert isinstance(store, ObstoreStore)
    value = bytes(range(256)) * 64
    store.set("k", value)
    requests = [("k", None), ("k", ByteRange.span(10, 20)), ("missing", None)]
    views = store.get_partial_values(requests, buffers=True)
    assert [type(v) for v in views] == [memoryview, memoryview, type(None)]
    assert views[0].readonly and views[0] == value and views[1] == value[10:20]
    assert [type(v) for v in store.get_partial_values(requests)] == [bytes, bytes, type(None)]
    assert store.get_partial_values(requests) == [value, value[10:20], None]
    with pytest.raises(StoreError):
        store.get_partial_values([("k", None)], max_size=100, buffers=True)


def test_options_translate_to_obstore_settings(bare_environment) -> None:
    settings = obstore_settings(
        {"endpoint_url": "http://127.0.0.1:9", "key": "K", "secret": "S", "token": "T", "region_name": "eu-west-3"},
        timeout=6,
        attempts=3,
    )
    assert settings.config == {
        "endpoint": "http://127.0.0.1:9",
        "access_key_id": "K",
        "secret_access_key": "S",
        "session_token": "T",
        "region": "eu-west-3",
    }
    assert settings.client_options["allow_http"] is True
    assert settings.client_options["read_timeout"].total_seconds() == 2  # a stall ends one attempt
    assert settings.client_options["timeout"].total_seconds() == 6  # the call's deadline
    nested = obstore_settings(
        {"anon": True, "client_kwargs": {"endpoint_url": "https://s3.example", "region_name": "ca-central-1"}},
        timeout=30,
        attempts=3,
    )
    assert nested.config == {"endpoint": "https://s3.example", "skip_signature": True, "region": "ca-central-1"}
    assert nested.client_options["allow_http"] is False


def test_obstore_reads_the_aws_variables(bare_environment, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")  # obstore reads the credentials itself
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    settings = obstore_settings({}, timeout=30, attempts=3)
    assert settings.config == {"endpoint": "http://127.0.0.1:9", "region": "eu-north-1"}
    assert settings.credential_provider is None


def test_a_profile_gives_obstore_its_credentials_and_region(bare_environment, monkeypatch, tmp_path) -> None:
    (tmp_path / "credentials").write_text("[science]\naws_access_key_id = PKEY\naws_secret_access_key = PSECRET\n")
    (tmp_path / "config").write_text("[profile science]\nregion = ap-south-2\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    for options in ({"profile": "science"}, {}):
        if not options:
            monkeypatch.setenv("AWS_PROFILE", "science")
        settings = obstore_settings(options, timeout=30, attempts=3)
        assert settings.config == {"region": "ap-south-2"}
        credential = settings.credential_provider()
        assert (credential["access_key_id"], credential["secret_access_key"]) == ("PKEY", "PSECRET")
        assert credential["expires_at"] is None  # static credentials never expire


def test_an_unknown_region_leaves_s3_to_s3fs(bare_environment) -> None:
    # on AWS itself obstore needs the bucket's region, which s3fs looks up
    with pytest.raises(UnsupportedByObstore, match="region"):
        obstore_settings({"anon": True}, timeout=30, attempts=3)
    with pytest.raises(UnsupportedByObstore, match="config_kwargs, skip_instance_cache"):
        obstore_settings({"anon": True, "skip_instance_cache": True, "config_kwargs": {}}, timeout=30, attempts=3)


@pytest.fixture(params=["obstore", "s3fs"])
def written_by_others(request, s3_filesystem, s3_bucket, s3_storage_options):
    """A function that stores empty objects under `root/` as other tools name them (S3
    takes any key), then opens the store at `root` through each backend."""

    def write(*keys: str):
        for key in keys:
            s3_filesystem.call_s3("put_object", Bucket=s3_bucket, Key=f"root/{key}", Body=b"")
        return open_store(f"s3://{s3_bucket}/root", s3_storage_options, s3_backend=request.param)

    return write


def test_keys_with_empty_or_dot_segments_are_left_out_of_listings(written_by_others) -> None:
    # obstore refuses a whole listing that meets one of them: s3fs makes it instead
    store = written_by_others("a//b", "x/./y", "x/../y", "/lead", "dir/", "zarr.json", "g/k")
    assert store.list() == ["g/k", "zarr.json"]
    assert store.list_prefix_sizes("") == {"g/k": 0, "zarr.json": 0}
    assert store.list_dir("") == (["zarr.json"], ["a", "dir", "g", "x"])
    assert store.list_dir_info("x/") == ({}, [])  # ".", ".." are no names


def test_folder_markers_over_keys_are_no_keys(written_by_others) -> None:
    store = written_by_others("g/", "g/k", "g/sub/", "g/sub/j", "zarr.json")  # as the S3 console makes them
    assert store.list() == ["g/k", "g/sub/j", "zarr.json"]
    assert store.list_prefix_sizes("g/") == {"g/k": 0, "g/sub/j": 0}
    assert store.list_dir("g/") == (["k"], ["sub"])
    store.move("g", "h")
    assert store.list_prefix("h/") == ["h/k", "h/sub/j"]


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_a_batch_of_reads_has_its_requests_in_flight_together(
    s3_endpoint, s3_bucket, s3_storage_options, backend
) -> None:
    from bench.s3proxy import LatencyProxy

    keys = [f"c/{i}" for i in range(8)]
    open_store(f"s3://{s3_bucket}/root", s3_storage_options).set_values({key: key.encode() for key in keys})
    proxy = LatencyProxy(s3_endpoint, latency=0.05).start()
    try:
        store = open_store(
            f"s3://{s3_bucket}/root", {**s3_storage_options, "endpoint_url": proxy.url}, s3_backend=backend
        )
        proxy.reset()
        requests = [(key, None) for key in keys] + [(key, ByteRange.span(1, 3)) for key in keys]
        assert store.get_partial_values(requests) == [k.encode() for k in keys] + [k.encode()[1:3] for k in keys]
        counts = proxy.counts()
    finally:
        proxy.stop()
    assert counts["total"] == 16  # one GET each, no HEAD
    assert counts["max_in_flight"] >= 4  # (one at a time would be 1)
