"""Multipart uploads that a killed mount left on a bucket: the next mount aborts those of
notes whose process is gone, under its own root; others stay
(zarrfs/store/pending_uploads.py). The whole run, with a real daemon killed mid-upload,
is tests/fs/mount/test_crash_consistency.py's."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest

from zarrfs.store import open_store, pending_uploads, s3fs_uploads
from zarrfs.store.keys import HOST, TEMP_PREFIX, temporary_name


@pytest.mark.parametrize("backend", ["obstore", "s3fs"])
def test_uploads_noted_by_gone_processes_are_aborted_and_others_kept(
    backend, s3_bucket, s3_storage_options, s3_filesystem, s3_endpoint, tmp_path, monkeypatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    notes = {
        f"{TEMP_PREFIX}{HOST}.{gone.pid}.0123456789abcdef": f"{s3_bucket}/root/big/k0",  # gone: aborted
        temporary_name(): f"{s3_bucket}/root/big/k1",  # this process, alive: kept
        f"{TEMP_PREFIX}{HOST}.{gone.pid}.fedcba9876543210": f"{s3_bucket}/other/k2",  # another root: kept
    }
    (tmp_path / pending_uploads.directory().rpartition("/")[2]).mkdir()
    for name, path in notes.items():
        with open(f"{pending_uploads.directory()}/{name}", "w") as f:
            json.dump({"endpoint": s3_endpoint, "path": path, "started": 0}, f)
        s3_filesystem.call_s3("create_multipart_upload", Bucket=s3_bucket, Key=path.partition("/")[2])
    store = open_store(f"s3://{s3_bucket}/root", s3_storage_options, s3_backend=backend)
    assert store.remove_stale_temporaries() == 1
    left = s3_filesystem.call_s3("list_multipart_uploads", Bucket=s3_bucket).get("Uploads") or []
    assert sorted(u["Key"] for u in left) == ["other/k2", "root/big/k1"]
    assert len(pending_uploads.stale_notes()) == 1  # (the other root's, for its own mount)


def test_an_upload_is_noted_while_it_runs_and_the_note_goes_with_it(
    s3_bucket, s3_storage_options, tmp_path, monkeypatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    store = open_store(f"s3://{s3_bucket}/root", s3_storage_options, s3_backend="s3fs")
    seen = []
    upload_part = s3fs_uploads._upload_part

    def part(*args, **kwargs):
        seen.append(
            [
                json.load(open(os.path.join(pending_uploads.directory(), p)))
                for p in os.listdir(pending_uploads.directory())
            ]
        )
        return upload_part(*args, **kwargs)

    monkeypatch.setattr(s3fs_uploads, "_upload_part", part)
    with open(tmp_path / "big", "wb+") as f:
        f.write(b"x" * (17 << 20))
        f.flush()
        store.set_file("big", f.fileno())
    assert seen and all(n == [{"endpoint": s3_storage_options["endpoint_url"], "path": f"{s3_bucket}/root/big",
                               "started": n[0]["started"]}] for n in seen)  # fmt: skip
    assert not os.listdir(pending_uploads.directory())
