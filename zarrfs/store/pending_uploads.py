"""Multipart uploads that a killed daemon left on an object store (SIGKILL between
starting one and completing or aborting it): the bucket keeps their parts, unseen by any
listing and billed, until a lifecycle rule aborts them. While an upload runs, a note of
it (endpoint, bucket and key, when it began) lies in a directory of the temporary
directory named for the process that makes it; the next mount of the store that may
write aborts the uploads of notes whose process is gone (as stale_temporaries.py
removes the local store's temporary files) and removes the notes. A note kept in another
temporary directory, or lost with it at a reboot, is not found: the lifecycle rule
remains for those. An upload of the same key that another mount has under way at that
moment is aborted too (its close fails; two writers of one key conflict anyway)."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from .keys import temporary_name
from .stale_temporaries import is_stale

log = logging.getLogger(__name__)


def directory() -> str:
    return os.path.join(tempfile.gettempdir(), f"zarrfs-uploads-{os.getuid()}")


@contextlib.contextmanager
def noted(endpoint: str | None, path: str) -> Iterator[None]:
    """Keep a note of a multipart upload to `path` ("bucket/key") while it runs; written
    before the upload begins, so that a kill at any point leaves it."""
    notes = directory()
    os.makedirs(notes, mode=0o700, exist_ok=True)
    note = os.path.join(notes, temporary_name())
    with open(note, "w") as f:
        json.dump({"endpoint": endpoint, "path": path, "started": time.time()}, f)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(note)


def noting(multipart: Callable[..., None]) -> Callable[..., None]:
    """A store's method that makes a multipart upload of `key`, noted while it runs; the
    store's `upload_target(key)` says (endpoint, "bucket/key")."""

    @functools.wraps(multipart)
    def noted_multipart(store: Any, key: str, *args: Any, **kwargs: Any) -> None:
        with noted(*store.upload_target(key)):
            multipart(store, key, *args, **kwargs)

    return noted_multipart


def stale_notes() -> list[tuple[str, dict[str, Any]]]:
    """(path, record) of each note whose process is gone."""
    notes, now, found = directory(), time.time(), []
    try:
        names = os.listdir(notes)
    except FileNotFoundError:
        return []
    for name in names:
        note = os.path.join(notes, name)
        try:
            with open(note) as f:
                record = json.load(f)
            if is_stale(name, os.stat(note).st_mtime, now):
                found.append((note, record))
        except (OSError, ValueError):
            continue
    return found


def abort_left(endpoint: str | None, root: str, call: Callable[..., Any]) -> int:
    """Abort the multipart uploads below `root` ("bucket/prefix") that processes now gone
    noted; `call(method, **arguments)` makes an S3 request. How many were aborted."""
    aborted = 0
    for note, record in stale_notes():
        if record.get("endpoint") != endpoint or not str(record.get("path", "")).startswith(root + "/"):
            continue
        bucket, _, key = record["path"].partition("/")
        uploads = call("list_multipart_uploads", Bucket=bucket, Prefix=key).get("Uploads") or []
        for upload in uploads:
            # (every upload of that key: S3 says when each began, not who began it, and
            # moto's answer is a fixed date; two writers of one key conflict anyway)
            if upload["Key"] == key:
                call("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload["UploadId"])
                aborted += 1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(note)
    if aborted:
        log.info("aborted %d multipart uploads that killed writers left in %s", aborted, root)
    return aborted
