"""Reference sources (kerchunk, VirtualiZarr; docs/formats.md): a JSON references file or a
parquet references directory that maps Zarr keys onto byte ranges of other files
(NetCDF4, HDF5, GRIB…). They are read through fsspec's ReferenceFileSystem, always
read-only. Recognition reads at most the head of one small file."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .byte_range import ByteRange
from .containers import NO_CONTAINERS, VirtualChunks, authorized, container_prefix, suggested_prefix
from .errors import StoreError
from .fsspec_store import FsspecStore

# A references file is one JSON object whose first key tells, so only the head of the file
# is read: one of kerchunk's keys (its format's version 1), or (version 0, the bare
# mapping) a store key, a node's document or a chunk's, whose value is a reference: a
# string (inline data) or a list starting with the target's URL.
_JSON_HEAD = re.compile(
    rb'\A\s*\{\s*(?:"(?:version|refs|templates|gen)"\s*:'
    rb'|"(?:[^"\\/]+/)*(?:\.zgroup|\.zattrs|\.zarray|\.zmetadata|zarr\.json|c(?:[./]\d+)*|\d+(?:[./]\d+)*)"'
    rb'\s*:\s*(?:"|\[\s*"))'
)
_HEAD_BYTES = 4096
_PARQUET_METADATA = ".zmetadata"
_PARQUET_FIRST = "refs.0.parq"


def is_references(path: str) -> bool:
    """Whether the local `path` is a JSON references file or a parquet references
    directory (fsspec's layout: `.zmetadata` beside one directory of `refs.N.parq`
    files per array, which no Zarr store holds)."""
    try:
        if os.path.isfile(path):
            with open(path, "rb") as f:
                return bool(_JSON_HEAD.match(f.read(_HEAD_BYTES)))
        if os.path.isfile(os.path.join(path, _PARQUET_METADATA)):
            with os.scandir(path) as entries:
                return any(
                    entry.is_dir() and os.path.isfile(os.path.join(entry.path, _PARQUET_FIRST)) for entry in entries
                )
    except OSError:
        pass
    return False


def reference_options(fo: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """ReferenceFileSystem's arguments: the references (`fo`) and the storage options,
    passed on as fsspec defines them (remote_protocol, remote_options, target_options…).
    S3 targets get the same endpoint default as an s3:// store."""
    options = dict(options)
    if fo is not None:
        options["fo"] = fo
    if options.get("remote_protocol") in ("s3", "s3a"):
        remote = dict(options.get("remote_options") or {})
        client = remote.get("client_kwargs") or {}
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_url" not in remote and "endpoint_url" not in client:
            remote["endpoint_url"] = endpoint
        options["remote_options"] = remote
    return options


def _target_options(containers: VirtualChunks, url: str) -> dict[str, Any]:
    """ReferenceFileSystem's remote_protocol and remote_options from the storage options
    --virtual-chunks-file gives the containers: fsspec reads every target of a protocol
    through one filesystem, so the containers given options must agree on one protocol and
    one set of them."""
    given = {
        (p.split("://", 1)[0] if "://" in p else "file", json.dumps(o, sort_keys=True))
        for p, o in containers.items()
        if o
    }
    if not given:
        return {}
    if len(given) > 1:
        raise StoreError(
            "references read every target through one filesystem: the containers of --virtual-chunks-file "
            "that have storage options must name one protocol and the same options",
            url,
        )
    ((protocol, options),) = given
    return {"remote_protocol": protocol, "remote_options": json.loads(options)}


class ReferencesStore(FsspecStore):
    """The keys of a references file or directory, read-only. fsspec's parquet references
    answer a key that is no chunk of an array they hold (`temp/zarr.json`, which the
    format layer asks for) with ValueError: such a key is missing, as elsewhere."""

    def __init__(
        self, fo: str, options: dict[str, Any], *, virtual_chunks: VirtualChunks = NO_CONTAINERS, **settings: Any
    ) -> None:
        import fsspec

        options = {**options, **_target_options(virtual_chunks, settings.get("url", fo))}
        super().__init__(
            fsspec.filesystem("reference", **reference_options(fo, options)), "", read_only=True, **settings
        )
        # with --virtual-chunks, the targets read are confined to those prefixes
        self._authorized = [container_prefix(p) for p in virtual_chunks]

    def _check_targets(self, requests: list[tuple[str, ByteRange | None]]) -> None:
        for key, _ in requests:
            try:
                part = self.fs.references[self._path(key)]
            except (KeyError, ValueError, FileNotFoundError):
                continue  # no reference: missing, as elsewhere
            if (
                isinstance(part, list)
                and part
                and isinstance(part[0], str)
                and not authorized(part[0], self._authorized)
            ):
                raise StoreError(
                    f"a reference to {part[0]}, outside the prefixes --virtual-chunks authorizes: "
                    f"mount with --virtual-chunks {suggested_prefix(part[0])} to read it",
                    key,
                )

    def _get_many(
        self, requests: list[tuple[str, ByteRange | None]], max_size: int | None = None
    ) -> list[bytes | None]:
        if self._authorized:
            self._check_targets(requests)
        try:
            return super()._get_many(requests, max_size)
        except StoreError as exc:
            if not isinstance(exc.__cause__, ValueError):
                raise
        if len(requests) == 1:
            return [None]
        return [self._get_many([request], max_size)[0] for request in requests]

    def _get_info(self, key: str) -> tuple[int, float | None] | None:
        try:
            return super()._get_info(key)
        except StoreError as exc:
            if isinstance(exc.__cause__, ValueError):
                return None
            raise
