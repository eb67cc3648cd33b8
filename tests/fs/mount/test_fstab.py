"""An fstab line of type fuse.zarrfs works: mount(8) runs `mount.fuse.zarrfs SOURCE
MOUNTPOINT -o OPTIONS`, which returns once the mount is ready."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import zarrfs
from zarrfs.cli import is_mounted

HELPER = Path(sys.executable).parent / "mount.fuse.zarrfs"


@pytest.fixture
def demo(tmp_path) -> Path:
    zarrfs("demo", tmp_path / "demo.zarr")
    return tmp_path / "demo.zarr"


def _check_read_only_mount(mountpoint: Path) -> None:
    assert is_mounted(str(mountpoint))
    assert "temp" in os.listdir(mountpoint / "climate")
    with pytest.raises(OSError) as info:
        open(mountpoint / "climate/temp/data", "r+b")
    assert info.value.errno == errno.EROFS
    zarrfs("umount", mountpoint)
    assert not is_mounted(str(mountpoint))


def test_the_mount_helper_takes_mount8_arguments(demo, tmp_path):
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    subprocess.run([HELPER, demo, mountpoint, "-n", "-o", "ro,_netdev,allow_other,nofail"], check=True, timeout=60)
    _check_read_only_mount(mountpoint)


@pytest.mark.skipif(os.geteuid() != 0, reason="mount(8) with a helper in /sbin needs root")
def test_mount_t_fuse_zarrfs_runs_the_helper(demo, tmp_path):
    link = Path("/sbin/mount.fuse.zarrfs")
    previous = os.readlink(link) if link.is_symlink() else None
    if os.path.lexists(link) and previous is None:
        pytest.fail(f"{link} exists and is not a symlink: not replacing it")
    if previous is not None:
        link.unlink()
    link.symlink_to(HELPER)
    try:
        mountpoint = tmp_path / "mnt"
        mountpoint.mkdir()
        subprocess.run(
            ["mount", "-t", "fuse.zarrfs", "-o", "ro,_netdev,allow_other", str(demo), str(mountpoint)],
            check=True,
            timeout=60,
        )
        _check_read_only_mount(mountpoint)
    finally:
        link.unlink()
        if previous is not None:
            link.symlink_to(previous)
