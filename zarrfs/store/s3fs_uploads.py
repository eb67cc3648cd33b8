"""Multipart uploads through s3fs (FsspecStore.set_file of a file larger than one part):
parts sent several at once within the uploads' memory, completed, or aborted on failure
so that no partial object is ever seen."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

from . import fsspec_info, pending_uploads
from .uploads import UploadParts, read_file

_PART_COPIES = 2  # an upload part in memory: ours, and botocore's copy of it

Call = Callable[..., Any]  # FsspecStore._call: (key, operation, *args, **kwargs), within the deadline


def multipart(
    call: Call,
    fs: Any,
    path: str,
    key: str,
    fd: int,
    plan: tuple[int, int, int],
    uploads: UploadParts,
    metadata: dict[str, str] | None = None,
) -> None:
    """Upload the open file `fd` to `path` (the object of `key`) in parts: `plan` is (size,
    part size, parts in flight); `metadata`, the object's user metadata."""
    size, part, in_flight = plan
    bucket, object_key, _ = fs.split_path(path)
    target = {"Bucket": bucket, "Key": object_key}
    extra: dict[str, Any] = {} if metadata is None else {"Metadata": metadata}
    upload = call(key, fs.call_s3, "create_multipart_upload", **target, **extra)["UploadId"]
    try:
        # each part is a call of its own (its deadline, its retries), read from the
        # file only once its bytes are taken from the uploads' memory: twice its
        # size, as botocore holds a copy of the body it sends (measured)
        in_flight = max(1, in_flight // _PART_COPIES)
        with ThreadPoolExecutor(in_flight, thread_name_prefix="zarrfs-upload") as pool:
            sent = [
                pool.submit(_upload_part, call, fs, key, fd, (target, upload), (start, part), uploads)
                for start in range(0, size, part)
            ]
            try:
                tags = [future.result() for future in sent]
            except BaseException:
                for future in sent:  # the parts not yet begun are not sent at all
                    future.cancel()
                raise
        parts = [{"PartNumber": n, "ETag": tag} for n, tag in enumerate(tags, 1)]
        call(key, fs.call_s3, "complete_multipart_upload", **target, UploadId=upload, MultipartUpload={"Parts": parts})
    except BaseException:
        # no object was made: the parts sent are dropped, not left to be billed
        with contextlib.suppress(Exception):
            call(key, fs.call_s3, "abort_multipart_upload", **target, UploadId=upload)
        raise
    finally:
        fs.invalidate_cache(path)


def _upload_part(
    call: Call,
    fs: Any,
    key: str,
    fd: int,
    upload: tuple[dict[str, str], str],
    span: tuple[int, int],
    uploads: UploadParts,
) -> str:
    """Send bytes start:start+part (`span`) of the file as its part; the part's ETag."""
    (target, upload_id), (start, part) = upload, span
    uploads.take(part * _PART_COPIES)
    try:
        body = read_file(fd, start, start + part)
        answer = call(
            key, fs.call_s3, "upload_part", **target, UploadId=upload_id, PartNumber=start // part + 1, Body=body
        )
        return str(answer["ETag"])
    finally:
        uploads.give(part * _PART_COPIES)


def target(fs: AbstractFileSystem, path: str) -> tuple[str | None, str]:
    """(endpoint, "bucket/key") of the object at `path`: where a note of its upload points."""
    return getattr(fs, "endpoint_url", None), path


def abort_left(fs: AbstractFileSystem, root: str, call: Callable[..., Any]) -> int:
    """Abort the multipart uploads that killed mounts left below `root` (a bucket path)."""
    if not fsspec_info.is_s3(fs):
        return 0
    return pending_uploads.abort_left(getattr(fs, "endpoint_url", None), root, call)
