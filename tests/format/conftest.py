"""Fixtures for the format layer tests: hierarchies over a store with a thread pool and a
chunk cache, and the reference arrays written once per session by the oracles."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from format_oracle import ALL_CASES, write_case

from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem, s3_storage_options  # noqa: F401
from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.store import open_store

HERE = Path(__file__).resolve().parent
# the oracles warn about their own unstable data types and numcodecs codecs; lossy
# numcodecs filters warn when the sample data's NaNs and infinities pass through them
_QUIET = [
    pytest.mark.filterwarnings("ignore::Warning:zarr"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.parent == HERE:
            for mark in _QUIET:
                item.add_marker(mark)


@pytest.fixture(scope="session")
def executor():
    with ThreadPoolExecutor(2) as pool:
        yield pool


@pytest.fixture
def open_hierarchy(executor):
    """Hierarchy over a local path or URL, with a 2-thread pool and a chunk cache."""

    def open_(url_or_path, read_only: bool = False, storage_options=None, **kwargs) -> Hierarchy:
        context = IOContext(executor=executor, cache=ChunkCache(16 << 20))
        store = open_store(str(url_or_path), storage_options, read_only=read_only)
        return Hierarchy(store, context, **kwargs)

    return open_


@pytest.fixture(scope="session")
def oracle_root(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Every reference case written under one directory; (root, {case: error}) where a
    writer failed (the case's tests report it)."""
    root = tmp_path_factory.mktemp("oracle")
    errors = {}
    for case in ALL_CASES:
        try:
            write_case(root, case)
        except Exception as exc:  # reported by the case's own test
            errors[case.name] = f"{type(exc).__name__}: {exc}"
    return root, errors
