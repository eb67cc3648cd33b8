"""Failures become StoreError subclasses: errno and S3 error codes are mapped, a missing
bucket is an error rather than an empty store, an unreachable, stalled or failing endpoint
is retried within the call's deadline, then unavailable; through both S3 backends."""

from __future__ import annotations

import errno
import socket
import threading
import time

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from tests.conftest_s3 import free_port, proxy  # noqa: F401 (a fixture)
from zarrfs.store import (
    ByteRange,
    KeyNotFoundError,
    ReadOnlyStoreError,
    StoreError,
    StorePermissionError,
    StoreUnavailableError,
    StoreVanishedError,
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
        (client_error("TooManyRequests", 429), StoreUnavailableError),  # rate limited: retried
        (client_error("Whatever", 429), StoreUnavailableError),
        (wrapped(client_error("AccessDenied", 403), OSError(errno.EIO, "x")), StorePermissionError),
        (ValueError("odd"), StoreError),
    ],
    ids=repr,
)
def test_translate_error_maps_failures_to_store_errors(exc, expected) -> None:
    error = translate_error(exc, "a/b")
    assert type(error) is expected
    assert error.key == "a/b" and "a/b" in str(error)


BACKENDS = ["obstore", "s3fs"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_bucket_is_an_error_not_an_empty_store(s3_storage_options, backend) -> None:
    store = open_store("s3://zarrfs-no-such-bucket/root", s3_storage_options, s3_backend=backend)
    for operation in (lambda: store.get("k"), store.list, lambda: store.set("k", b"v")):
        with pytest.raises(StoreError, match="bucket does not exist") as raised:
            operation()
        assert type(raised.value) is StoreVanishedError  # an error, not an empty store (nor a retry)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unreachable_endpoint_is_unavailable_after_retries(backend) -> None:
    options = {"endpoint_url": f"http://127.0.0.1:{free_port()}", "key": "k", "secret": "s"}
    store = open_store("s3://bucket/root", options, attempts=2, retry_delay=0.01, s3_backend=backend)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match="after 2 attempts"):
        store.get("k")
    with pytest.raises(StoreUnavailableError):
        store.get_partial_values([("k", None), ("j", None)])
    with pytest.raises(StoreUnavailableError):
        store.set("k", b"v")
    assert time.monotonic() - started < 10


@pytest.fixture(params=BACKENDS)
def behind_proxy(request, s3_bucket, proxy):
    """A store through the fault proxy with a 2 s deadline, two attempts; it holds `k`."""
    options = {"endpoint_url": proxy.endpoint, "key": "testing", "secret": "testing"}
    store = open_store(
        f"s3://{s3_bucket}/root", options, attempts=2, retry_delay=0.01, timeout=2, s3_backend=request.param
    )
    store.set("k", VALUE)
    return store


VALUE = bytes(range(256)) * 400  # 100 KiB: a response cut short loses most of it


def _fails_with(expected: type, operation) -> StoreError:
    with pytest.raises(StoreError) as raised:
        operation()
    assert type(raised.value) is expected, raised.value
    assert "\n" not in str(raised.value)  # one log line
    return raised.value


def test_a_frozen_endpoint_fails_each_call_within_its_deadline(behind_proxy, proxy) -> None:
    store = behind_proxy
    proxy.freeze()
    calls = [
        lambda: store.get("k"),
        lambda: store.get_partial_values([("k", None), ("k", ByteRange.span(0, 9))]),
        lambda: store.get_info("k"),
        store.list,
        lambda: store.list_dir(""),
        lambda: store.set("j", b"v"),
        lambda: store.set_values({"j": b"v", "i": VALUE}),
    ]
    for call in calls:
        started = time.monotonic()
        _fails_with(StoreUnavailableError, call)
        assert time.monotonic() - started < 6  # the 2 s deadline, and the last attempt's own bound
    proxy.thaw()
    assert store.get("k") == VALUE


def test_a_trickling_endpoint_fails_each_call_within_its_deadline(behind_proxy, proxy) -> None:
    """256 bytes every 0.2 s: no read timeout ever fires, and a 100 KiB GET would take 80 s."""
    store = behind_proxy
    proxy.trickle = 0.2
    for call in (lambda: store.get("k"), lambda: store.get_partial_values([("k", None), ("k", ByteRange.span(0, 9))])):
        started = time.monotonic()
        _fails_with(StoreUnavailableError, call)
        assert time.monotonic() - started < 6  # the 2 s deadline, and the last attempt's own bound
    proxy.trickle = None
    assert store.get("k") == VALUE


def test_an_http_endpoint_that_never_answers_fails_within_the_deadline() -> None:
    """A web server that takes the request and never answers (aiohttp alone waits 300 s)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held = []

    def take() -> None:  # each connection, held open unanswered
        while True:
            try:
                held.append(listener.accept())
            except OSError:  # closed
                return

    threading.Thread(target=take, daemon=True).start()
    try:
        store = open_store(
            f"http://127.0.0.1:{listener.getsockname()[1]}/x.zarr", attempts=2, retry_delay=0.01, timeout=2
        )
        started = time.monotonic()
        _fails_with(StoreUnavailableError, lambda: store.get("c/0"))
        assert time.monotonic() - started < 6
    finally:
        listener.close()
        for connection, _ in held:
            connection.close()


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("status 503", StoreUnavailableError),
        ("status 500", StoreUnavailableError),
        ("access denied", StorePermissionError),
        ("responses cut short", StoreUnavailableError),
        ("connections reset", StoreUnavailableError),
    ],
)
def test_an_endpoint_that_fails_gives_the_error_then_recovers(behind_proxy, proxy, fault, expected) -> None:
    store = behind_proxy
    if fault.startswith("status"):
        proxy.status = int(fault.split()[1])
    elif fault == "access denied":
        proxy.status, proxy.error_code = 403, "AccessDenied"
    elif fault == "responses cut short":
        proxy.truncate_after = 2000  # the headers and a little of the body: an error, never short data
    else:
        proxy.reset = True
    error = _fails_with(expected, lambda: store.get("k"))
    assert error.key == "k"
    _fails_with(expected, lambda: store.get("k", ByteRange.span(1000, 90000)))
    _fails_with(expected, lambda: store.get_partial_values([("k", None), ("k", ByteRange.suffix(50000))]))
    proxy.status, proxy.truncate_after, proxy.reset = None, None, False
    assert store.get("k", ByteRange.span(1000, 90000)) == VALUE[1000:90000]
