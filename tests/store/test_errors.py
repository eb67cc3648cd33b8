"""Failures become StoreError subclasses: errno and S3 error codes are mapped, a missing
bucket is an error rather than an empty store, an unreachable endpoint is retried."""

from __future__ import annotations

import errno
import time

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from tests.conftest_s3 import free_port
from zarrfs.store import (
    KeyNotFoundError,
    ReadOnlyStoreError,
    StoreError,
    StorePermissionError,
    StoreUnavailableError,
    open_store,
    translate_error,
)


def client_error(code: str, status: int) -> ClientError:
    response = {
        "Error": {"Code": code, "Message": code},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "GetObject")


def wrapped(cause: BaseException, outer: BaseException) -> BaseException:
    """`outer` raised from `cause`, as s3fs re-raises botocore errors as OSError."""
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (FileNotFoundError(errno.ENOENT, "gone"), KeyNotFoundError),
        (PermissionError(errno.EACCES, "denied"), StorePermissionError),
        (OSError(errno.EPERM, "not permitted"), StorePermissionError),
        (OSError(errno.EROFS, "read-only file system"), ReadOnlyStoreError),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), StoreUnavailableError),
        (OSError(errno.ETIMEDOUT, "timed out"), StoreUnavailableError),
        (TimeoutError(), StoreUnavailableError),
        (EndpointConnectionError(endpoint_url="http://x"), StoreUnavailableError),
        (client_error("NoSuchKey", 404), KeyNotFoundError),
        (client_error("AccessDenied", 403), StorePermissionError),
        (client_error("SlowDown", 503), StoreUnavailableError),
        (client_error("Whatever", 500), StoreUnavailableError),
        (wrapped(client_error("AccessDenied", 403), OSError(errno.EIO, "x")), StorePermissionError),
        (ValueError("odd"), StoreError),
    ],
    ids=repr,
)
def test_translate_error_maps_failures_to_store_errors(exc, expected) -> None:
    error = translate_error(exc, "a/b")
    assert type(error) is expected
    assert error.key == "a/b" and "a/b" in str(error)


def test_missing_bucket_is_an_error_not_an_empty_store(s3_storage_options) -> None:
    store = open_store("s3://zarrfs-no-such-bucket/root", s3_storage_options)
    for operation in (lambda: store.get("k"), store.list, lambda: store.set("k", b"v")):
        with pytest.raises(StoreError, match="bucket does not exist") as raised:
            operation()
        assert type(raised.value) is StoreError


def test_unreachable_endpoint_is_unavailable_after_retries() -> None:
    options = {"endpoint_url": f"http://127.0.0.1:{free_port()}", "key": "k", "secret": "s"}
    store = open_store("s3://bucket/root", options, attempts=2, retry_delay=0.01)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="after 2 attempts"):
        store.get("k")
    with pytest.raises(StoreUnavailableError):
        store.get_partial_values([("k", None), ("j", None)])
    with pytest.raises(StoreUnavailableError):
        store.set("k", b"v")
    assert time.monotonic() - started < 10
