"""The store layer: Zarr's abstract key/value store over local directories (confined to
their root), S3 through obstore, fsspec (memory, S3, GCS, HTTP, zip, references) and
Icechunk repositories. It knows nothing of Zarr metadata; open_store() turns a URL or
path into a Store, and DiskCache keeps what a remote one serves on local disk."""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
import os
import re
from collections.abc import Iterable
from typing import Any, TypedDict

from ..defaults import STORE_TIMEOUT
from .base import Store
from .byte_range import ByteRange
from .containers import NO_CONTAINERS, VirtualChunks
from .deadlines import DeadlinePool, UnansweredFetches
from .disk_cache import DiskCache
from .errors import (
    ConfinementError,
    InvalidKeyError,
    KeyExistsError,
    KeyNotFoundError,
    ReadOnlyStoreError,
    StoreError,
    StorePermissionError,
    StoreUnavailableError,
    StoreVanishedError,
    ValueTooLargeError,
    translate_error,
)
from .fsspec_store import FsspecStore
from .icechunk_repository import IcechunkRepository, icechunk_spec
from .icechunk_store import CommitConflictError, IcechunkStore
from .keys import join_key, validate_key, validate_prefix
from .local_store import LocalStore
from .obstore_store import ObstoreStore
from .records import FileMeta, TreeListing
from .references import ReferencesStore, is_references
from .s3_options import UnsupportedByObstore, add_s3fs_defaults, obstore_settings
from .urls import is_url

__all__ = [
    "S3_BACKENDS",
    "ByteRange",
    "CommitConflictError",
    "ConfinementError",
    "DeadlinePool",
    "DiskCache",
    "FileMeta",
    "FsspecStore",
    "IcechunkRepository",
    "IcechunkStore",
    "InvalidKeyError",
    "KeyExistsError",
    "KeyNotFoundError",
    "LocalStore",
    "ObstoreStore",
    "ReadOnlyStoreError",
    "Store",
    "StoreError",
    "StorePermissionError",
    "StoreUnavailableError",
    "StoreVanishedError",
    "TreeListing",
    "UnansweredFetches",
    "ValueTooLargeError",
    "join_key",
    "open_store",
    "parse_storage_options",
    "translate_error",
    "validate_key",
    "validate_prefix",
]

log = logging.getLogger(__name__)

_READ_ONLY_PROTOCOLS = {"http", "https", "zip"}
# auto: obstore where it is installed and understands every storage option given
S3_BACKENDS = ("auto", "obstore", "s3fs")
# Numbers without leading zeros: "0123" (say, an account id) stays a string.
_INT = re.compile(r"[+-]?(0|[1-9]\d*)")
_FLOAT = re.compile(r"[+-]?((0|[1-9]\d*)(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


class _Version(TypedDict):
    """Which version of an Icechunk repository to open (IcechunkRepository.open_version)."""

    ref: str | None
    snapshot: str | None
    read_only: bool


def open_store(
    url_or_path: str,
    storage_options: dict[str, Any] | None = None,
    read_only: bool = False,
    *,
    ref: str | None = None,
    snapshot: str | None = None,
    attempts: int = 3,
    retry_delay: float = 0.1,
    timeout: float = STORE_TIMEOUT,
    s3_backend: str = "auto",
    virtual_chunks: VirtualChunks = NO_CONTAINERS,
) -> Store:
    """Open the store at a local path or fsspec URL (chained URLs like zip::… included).

    A local path or file:// URL ending in ".zip" opens that zip file; a local references
    file or directory (kerchunk) opens the hierarchy it describes. http(s), zip and
    reference stores are always read-only. An Icechunk repository (local or s3://) opens
    the head of branch `main`, or the branch or tag `ref`, or `snapshot`. S3 takes its
    endpoint from `endpoint_url` in `storage_options` or the AWS_ENDPOINT_URL variable,
    and never caches listings; `s3_backend` (one of S3_BACKENDS) says whether obstore or
    s3fs reaches it. `timeout` is the deadline of one store call, its retries included
    (docs/errors.md): S3's connections are given a share of it, and no retry starts past it.
    """
    if s3_backend not in S3_BACKENDS:
        raise ValueError(f"unknown S3 backend {s3_backend!r}")
    # Copied because botocore rewrites the config dicts it is given.
    options = copy.deepcopy(dict(storage_options or {}))
    settings = {"url": url_or_path, "attempts": attempts, "retry_delay": retry_delay, "timeout": timeout}
    version: _Version = {"ref": ref, "snapshot": snapshot, "read_only": read_only}
    try:
        if not is_url(url_or_path) or url_or_path.startswith("file://"):
            store = _open_local(url_or_path, options, read_only, settings, version, virtual_chunks)
            return _versioned_only(store, version)
        protocol = url_or_path.split("::", 1)[0].split("://", 1)[0]
        if protocol == "reference":
            return ReferencesStore(options.pop("fo", None), options, virtual_chunks=virtual_chunks, **settings)
        store = None
        if protocol in ("s3", "s3a") and "::" not in url_or_path:
            store = _open_obstore(url_or_path, options, read_only, settings, s3_backend)
        if store is None:
            store = _open_fsspec(url_or_path, protocol, options, read_only, settings)
        spec = icechunk_spec(url_or_path, lambda: store.list_dir(""))
        if spec:
            return IcechunkRepository(
                url_or_path, storage_options, timeout=timeout, spec=spec, virtual_chunks=virtual_chunks
            ).open_version(**version)
        return _versioned_only(store, version)
    except StoreError:
        raise
    except Exception as exc:
        error = translate_error(exc)
        raise type(error)(f"cannot open the store: {error.message}", url_or_path) from exc


def parse_storage_options(items: Iterable[str]) -> dict[str, Any]:
    """Turn command-line "KEY=VALUE" strings into fsspec storage options.

    Values "true"/"false" become booleans, "none"/"null" None, numbers int or float,
    and JSON objects or arrays ('{"region_name": "eu-west-1"}') dicts or lists.
    """
    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"storage option {item!r} is not KEY=VALUE")
        options[key.strip()] = _coerce(text.strip())
    return options


def _open_obstore(
    url: str, options: dict[str, Any], read_only: bool, settings: dict[str, Any], backend: str
) -> Store | None:
    """The store for an s3:// URL through obstore, or None where s3fs is to serve it."""
    if backend == "s3fs":
        return None
    if importlib.util.find_spec("obstore") is None:
        if backend == "obstore":
            raise StoreError("obstore is not installed (pip install obstore)", url)
        return None
    try:
        s3 = obstore_settings(options, timeout=settings["timeout"], attempts=settings["attempts"])
    except UnsupportedByObstore as exc:
        if backend == "obstore":
            raise StoreError(f"obstore cannot serve it: {exc}", url) from None
        log.info("%s: through s3fs: %s", url, exc)
        return None
    bucket, _, prefix = url.split("://", 1)[1].partition("/")
    if not bucket:
        raise StoreError("the URL names no bucket", url)
    s3fs_options = copy.deepcopy(options)
    log.info("%s: through obstore", url)
    return ObstoreStore(
        bucket,
        prefix,
        s3,
        read_only=read_only,
        **settings,
        lister=lambda: _open_fsspec(url, "s3", s3fs_options, read_only, settings),
    )


def _open_fsspec(url: str, protocol: str, options: dict[str, Any], read_only: bool, settings: dict[str, Any]) -> Store:
    import fsspec.core

    if protocol in ("s3", "s3a", "gs", "gcs"):
        options.setdefault("skip_instance_cache", True)
        options.setdefault("use_listings_cache", False)
    if protocol in ("s3", "s3a"):
        add_s3fs_defaults(options, settings["timeout"] / max(1, settings["attempts"]))
    fs, root = fsspec.core.url_to_fs(url, **options)
    if protocol in ("s3", "s3a"):
        fs.retries = 1  # s3fs's own retry loop (5 tries, backing off) would multiply with ours
    if protocol in ("s3", "s3a", "gs", "gcs") and not root.strip("/"):
        raise StoreError("the URL names no bucket", url)
    fs_protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    read_only = read_only or bool(fs_protocols & _READ_ONLY_PROTOCOLS)
    return FsspecStore(fs, root, read_only=read_only, **settings)


def _open_local(
    url_or_path: str,
    options: dict[str, Any],
    read_only: bool,
    settings: dict[str, Any],
    version: _Version,
    virtual_chunks: VirtualChunks = NO_CONTAINERS,
) -> Store:
    path = _local_path(url_or_path)
    if path.endswith(".zip") and not os.path.isdir(path):
        from fsspec.implementations.zip import ZipFileSystem

        return FsspecStore(ZipFileSystem(fo=path, **options), "", read_only=True, **settings)
    if is_references(path):
        return ReferencesStore(path, options, virtual_chunks=virtual_chunks, **settings)
    spec = icechunk_spec(path, None)
    if spec:
        return IcechunkRepository(
            path, options, timeout=settings["timeout"], spec=spec, virtual_chunks=virtual_chunks
        ).open_version(**version)
    return LocalStore(path, url=settings["url"], read_only=read_only, timeout=settings["timeout"])


def _local_path(url_or_path: str) -> str:
    """A local path or file:// URL as an absolute path with no trailing slash (as fsspec's
    local filesystem has it, without importing fsspec for a local mount)."""
    path = os.path.expanduser(url_or_path)
    for prefix in ("file://", "local://", "file:", "local:"):
        if path.startswith(prefix):
            path = path.removeprefix(prefix)
            break
    if path.startswith("~"):
        path = os.path.expanduser(path)
    elif not path.startswith("/"):
        path = os.path.join(os.getcwd(), path.removeprefix("./") if path != "." else "")
    return path.rstrip("/") or "/"


def _versioned_only(store: Store, version: _Version) -> Store:
    if (version["ref"] or version["snapshot"]) and getattr(store, "repository", None) is None:
        raise StoreError("--ref and --snapshot apply to Icechunk repositories only", store.url)
    return store


def _coerce(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text.startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text
