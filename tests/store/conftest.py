"""Store fixtures: `store` runs a test against a local directory, memory:// and moto S3
through each S3 backend (obstore, s3fs)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest_s3 import (  # noqa: F401 - fixtures
    s3_bucket,
    s3_endpoint,
    s3_filesystem,
    s3_storage_options,
)
from zarrfs.store import DiskCache, Store, open_store


@pytest.fixture(params=["local", "memory", "disk-cached memory", "s3-obstore", "s3-s3fs"])
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[Store]:
    """An empty read-write store of each kind (and memory:// behind a disk cache)."""
    if request.param == "local":
        yield open_store(str(tmp_path / "root"))
    elif request.param in ("memory", "disk-cached memory"):
        store = open_store(f"memory://zarrfs-test-{uuid.uuid4().hex}")
        if request.param == "disk-cached memory":
            store = DiskCache(store, str(tmp_path / "cache"), 1 << 20)
        yield store
        store.erase_prefix("")  # memory:// is process-wide
    else:
        bucket = request.getfixturevalue("s3_bucket")
        options = request.getfixturevalue("s3_storage_options")
        backend = request.param.split("-", 1)[1]
        store = open_store(f"s3://{bucket}/root", options, s3_backend=backend)
        assert type(store).__name__ == {"obstore": "ObstoreStore", "s3fs": "FsspecStore"}[backend]
        yield store
