"""Writes repo/, a tiny Icechunk repository of on-disk spec 1, with icechunk 1 (the last
for Python 3.11): `python tests/data/icechunk1/make.py`. The icechunk 2 run checks that
zarrfs reads it and commits to it as icechunk 2 does."""

import shutil
from pathlib import Path

import icechunk
import numpy as np
import zarr

HERE = Path(__file__).parent
VALUES = np.arange(6, dtype="int16") * 3  # what tests/fs/mount/test_icechunk.py reads back

repo_path = HERE / "repo"
shutil.rmtree(repo_path, ignore_errors=True)
repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_path)))
session = repo.writable_session("main")
zarr.group(store=session.store).create_array("x", shape=(6,), chunks=(3,), dtype="int16", fill_value=0)[:] = VALUES
session.commit("written by icechunk 1")
print(f"icechunk {icechunk.__version__}, spec {int(icechunk.spec_version())}: {repo_path}")
