"""S3 fixtures: one moto S3 server per test session (on 127.0.0.1, a free port) and a
fresh bucket per test. Import them into a conftest.py (`from tests.conftest_s3 import *`)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

__all__ = ["s3_bucket", "s3_endpoint", "s3_filesystem", "s3_storage_options"]

_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """URL of a moto S3 server that lives for the whole session."""
    from moto.server import ThreadedMotoServer

    saved = {name: os.environ.get(name) for name in _CREDENTIALS}
    os.environ.update(_CREDENTIALS)
    _atomic_conditional_puts()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _atomic_conditional_puts() -> None:
    """PutObject with If-Match or If-None-Match, as S3 makes it: checked and stored in one
    step. moto checks, then stores, each request on a thread of its own, so two writers of
    one version both succeed now and then; its PutObject handlers are made to run one at
    a time."""
    import threading

    from moto.s3.responses import S3Response

    if getattr(S3Response.put_object, "one_at_a_time", False):
        return
    put, lock = S3Response.put_object, threading.Lock()

    def put_object(self: Any) -> Any:
        with lock:
            return put(self)

    put_object.one_at_a_time = True  # type: ignore[attr-defined]
    S3Response.put_object = put_object  # type: ignore[method-assign]


@pytest.fixture
def s3_storage_options(s3_endpoint: str) -> dict[str, Any]:
    """fsspec storage options that point s3fs at the moto server."""
    return {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"}


@pytest.fixture(scope="session")
def s3_filesystem(s3_endpoint: str) -> Any:
    """An s3fs filesystem on the moto server, for arranging and inspecting buckets."""
    import s3fs

    return s3fs.S3FileSystem(
        endpoint_url=s3_endpoint,
        key="testing",
        secret="testing",
        skip_instance_cache=True,
        use_listings_cache=False,
    )


@pytest.fixture
def s3_bucket(s3_filesystem: Any) -> str:
    """Name of a new, empty bucket on the moto server."""
    name = f"zarrfs-{uuid.uuid4().hex[:16]}"
    s3_filesystem.mkdir(name)
    return name


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[Any]:
    """A fault proxy (tests/faults.py) in front of the moto server."""
    from tests.faults import FaultProxy

    url = urlparse(s3_endpoint)
    proxy = FaultProxy(url.hostname, url.port)
    yield proxy
    proxy.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of the call)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
