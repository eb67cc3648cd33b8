"""The batched delete of an fsspec store: one call of the filesystem's `rm`, or on S3
DeleteObjects made here, whose answer is read for the keys it refused. S3 answers 200 to
a DeleteObjects whose deletes a bucket policy denies, with an error for each key, and
s3fs's `rm` reads only the keys deleted: a delete that deleted nothing would pass for
done (a rename would then leave its source whole, unnamed and uncounted)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import fsspec_info
from .errors import translate_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from fsspec import AbstractFileSystem

BATCH = 1000  # keys of one DeleteObjects at most (S3's limit)


class KeysNotDeleted(Exception):
    """What a DeleteObjects answered for the first key it refused, as botocore gives an
    error (its code decides: AccessDenied is no transient failure, InternalError is)."""

    def __init__(self, error: dict[str, Any], refused: int) -> None:
        self.response = {"Error": {"Code": error.get("Code"), "Message": error.get("Message")}}
        super().__init__(f"{refused} key(s) not deleted, {error.get('Key')} the first: {error.get('Code')}")


def remove(fs: AbstractFileSystem, paths: list[str], call: Callable[..., Any]) -> None:
    """Delete `paths` (of one bucket on S3; missing ones are no error), each call made as
    `call(operation, *args, **kwargs)` (the store's retries and deadline). Raises the
    StoreError of a key S3 refused."""
    if not fsspec_info.is_s3(fs):
        call(fs.rm, paths)
        return
    for start in range(0, len(paths), BATCH):
        batch = paths[start : start + BATCH]
        bucket = fs.split_path(batch[0])[0]
        objects = [{"Key": fs.split_path(path)[1]} for path in batch]
        for path in batch:  # (what s3fs's own rm forgets of listings)
            fs.invalidate_cache(path)
            fs.invalidate_cache(fs._parent(path))
        answer = call(fs.call_s3, "delete_objects", Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
        errors = (answer or {}).get("Errors") or []
        if errors:
            raise translate_error(KeysNotDeleted(errors[0], len(errors)), f"{bucket}/{errors[0].get('Key')}")
