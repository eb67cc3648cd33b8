"""Conditional writes through s3fs (FsspecStore on S3): a value read with its ETag in one
GetObject, and PutObject with If-Match: ETAG or If-None-Match: * (what S3, MinIO and
moto honour)."""

from __future__ import annotations

from typing import Any


async def _get(fs: Any, bucket: str, key: str) -> tuple[bytes, str | None]:
    response = await fs._call_s3("get_object", Bucket=bucket, Key=key)
    body = response["Body"]
    try:
        value = await body.read()
    finally:
        body.close()
    return value, response.get("ETag")


def get_versioned(fs: Any, path: str, timeout: float) -> tuple[bytes, str | None]:
    """The value at `path` and its ETag, of one response (FileNotFoundError if none)."""
    from fsspec.asyn import sync

    bucket, key, _ = fs.split_path(path)
    answer: tuple[bytes, str | None] = sync(fs.loop, _get, fs, bucket, key, timeout=timeout)
    return answer


def put_if(fs: Any, path: str, value: bytes, etag: str | None, timeout: float) -> None:
    """PutObject of `value` if the object is still `etag` (None: if there is none); the
    client's error (a 412) where it is not."""
    from fsspec.asyn import sync

    bucket, key, _ = fs.split_path(path)
    condition = {"IfNoneMatch": "*"} if etag is None else {"IfMatch": etag}
    sync(fs.loop, fs._call_s3, "put_object", Bucket=bucket, Key=key, Body=value, **condition, timeout=timeout)
    fs.invalidate_cache(path)
