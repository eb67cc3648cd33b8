"""Writes repo/, a tiny Icechunk repository of on-disk spec 2, with icechunk 2 (Python
>= 3.12): `python tests/data/icechunk2/make.py`. The icechunk 1 run checks that zarrfs
refuses it with one clear line; the icechunk 2 run reads it back."""

import shutil
from pathlib import Path

import icechunk
import numpy as np
import zarr

HERE = Path(__file__).parent
VALUES = np.arange(6, dtype="int16")  # what tests/fs/mount/test_icechunk.py reads back

repo_path = HERE / "repo"
shutil.rmtree(repo_path, ignore_errors=True)
repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_path)), spec_version=2)
session = repo.writable_session("main")
zarr.group(store=session.store).create_array("x", shape=(6,), chunks=(3,), dtype="int16", fill_value=0)[:] = VALUES
session.commit("written by icechunk 2")
print(f"icechunk {icechunk.__version__}, spec {repo.spec_version}: {repo_path}")
