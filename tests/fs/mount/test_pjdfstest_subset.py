"""pjdfstest's own files (tests/suites, unmodified) against `--raw` mounts of a local
store and of S3 (moto): the files that cover what docs/posix.md promises, each of which
passes in full. pjdfstest is built once per session with the suites' build.sh (autotools
and perl's prove come from scripts/setup.sh); it runs as root, as it asks."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

SUITES = REPO / "tests" / "suites"

# by what they check (docs/posix.md)
FILES = {
    "names of more than NAME_MAX bytes": [
        "mkdir/02.t",
        "rename/01.t",
        "link/02.t",
        "truncate/02.t",
        "ftruncate/02.t",
        "unlink/02.t",
        "rmdir/02.t",
    ],
    # paths of PATH_MAX bytes: on a local store only (S3 keys end at S3_KEY_BYTES)
    "paths of PATH_MAX bytes": [
        "mkdir/03.t",
        "rename/02.t",
        "truncate/03.t",
        "ftruncate/03.t",
        "unlink/03.t",
        "rmdir/03.t",
    ],
    "an open file that is unlinked": ["unlink/14.t"],
    "sizes past the largest file": ["truncate/12.t", "ftruncate/12.t"],
    "directory times and links": ["rename/24.t", "rmdir/00.t"],
}
LOCAL_ONLY = {"paths of PATH_MAX bytes"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="pjdfstest runs as root")


@pytest.fixture(scope="session")
def pjdfstest(tmp_path_factory) -> Path:
    """The tests directory of a pjdfstest built from tests/suites."""
    missing = [tool for tool in ("autoreconf", "libtoolize", "make", "gcc", "prove") if shutil.which(tool) is None]
    if missing:  # (build.sh would install them with apt: scripts/setup.sh does that)
        pytest.skip(f"pjdfstest cannot be built here: no {', '.join(missing)} (scripts/setup.sh installs them)")
    out = tmp_path_factory.mktemp("suites")
    subprocess.run(["bash", SUITES / "build.sh", out], check=True, capture_output=True, timeout=600)
    return out / "pjdfstest" / "tests"


@pytest.mark.parametrize("what", list(FILES))
def test_pjdfstest_files_pass_in_full(raw, pjdfstest, what):
    if what in LOCAL_ONLY and raw.kind != "local":
        pytest.skip(f"{what}: not on {raw.kind}")
    workdir = raw / "pjdfstest"  # pjdfstest makes and removes its names in the current directory
    workdir.mkdir()
    result = subprocess.run(
        ["prove", *[pjdfstest / name for name in FILES[what]]], cwd=workdir, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert os.listdir(workdir) == []
    os.rmdir(workdir)
    assert raw.stored() == {}
