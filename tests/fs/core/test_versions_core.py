"""The Icechunk versions core without a kernel (fs/versions/): what paths under
/.zarrfs/versions and /.zarrfs/commit name, and what each refuses, driven directly."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from tests.icechunk_repos import FIRST, write_repository
from zarrfs.fs.errors import FsError, errno_for
from zarrfs.fs.mount import MountConfig, build_core
from zarrfs.fs.versions.core import VersionsCore

icechunk = pytest.importorskip("icechunk")


@pytest.fixture
def core(tmp_path):
    written = write_repository(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    (tmp_path / "mnt").mkdir()
    core, cleanup = build_core(MountConfig(source=str(tmp_path / "repo"), mountpoint=str(tmp_path / "mnt")))
    assert isinstance(core, VersionsCore)
    yield core, written
    core.shutdown()
    cleanup()


def _read(core, path: str) -> bytes:
    file = core.open(path, os.O_RDONLY)
    return file.read(0, 1 << 20)


def test_versions_list_and_route_to_read_only_trees(core):
    core, _written = core
    assert [name for name, _ in core.list_dir(".zarrfs") if name in ("versions", "commit")] == ["versions", "commit"]
    assert [name for name, _ in core.list_dir(".zarrfs/versions/tags")] == ["v1"]
    attributes = core.lookup(".zarrfs/versions/tags/v1/temp/data")
    assert attributes.size == FIRST.nbytes and not attributes.writable
    np.testing.assert_array_equal(
        np.frombuffer(_read(core, ".zarrfs/versions/tags/v1/temp/data"), "<i4"), FIRST.ravel()
    )
    assert core.lookup(".zarrfs/versions/tags/nope") is None
    assert core.lookup(".zarrfs/versions/other") is None


@pytest.mark.parametrize(
    "write",
    [
        lambda c: c.open(".zarrfs/versions/tags/v1/temp/data", os.O_RDWR),
        lambda c: c.mkdir(".zarrfs/versions/tags/v1/new"),
        lambda c: c.unlink(".zarrfs/versions/tags/v1/temp/chunks/0/0"),
        lambda c: c.rename("temp", ".zarrfs/versions/tags/v1/temp2"),
        lambda c: c.set_xattr(".zarrfs/versions/tags/v1/temp", "user.zarr.x", b"1"),
        lambda c: c.open(".zarrfs/versions/log", os.O_WRONLY),
    ],
)
def test_every_write_under_versions_is_erofs(core, write):
    with pytest.raises(FsError) as info:
        write(core[0])
    assert errno_for(info.value) == errno.EROFS


def test_the_commit_file_commits_at_flush_and_reads_as_the_outcome(core):
    core, written = core
    core.unlink("temp/chunks/0/0")
    file = core.open(".zarrfs/commit", os.O_RDWR)
    file.write(0, b"erase one chunk\n")
    file.flush()
    word, snapshot = file.read(0, 100).decode().split()
    assert word == "committed"
    info = next(iter(written.repository().ancestry(branch="main")))
    assert (info.id, info.message) == (snapshot, "erase one chunk")
    assert _read(core, ".zarrfs/versions/log").decode().split()[0] == snapshot
    file.flush()  # nothing written since: no second commit
    assert next(iter(written.repository().ancestry(branch="main"))).id == snapshot
