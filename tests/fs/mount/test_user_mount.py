"""A mount made by an ordinary user, as on a cluster node where jobs run unprivileged:
fusermount3 mounts and unmounts it, the daemon logs in the user's state directory, and
what the user writes through it lands in the store."""

from __future__ import annotations

import contextlib
import io
import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.conftest import REPO, ZARRFS, wait_for
from zarrfs.cli import is_mounted

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="makes an ordinary user's mount from root")

USER = "zarrfs-test"


@contextlib.contextmanager
def _ordinary_user() -> Iterator[pwd.struct_passwd]:
    """`nobody`, or where there is none a user made for the test (and removed after)."""
    try:
        yield pwd.getpwnam("nobody")
        return
    except KeyError:
        pass
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
    try:
        yield pwd.getpwnam(USER)
    finally:
        subprocess.run(["userdel", USER], check=False)


@contextlib.contextmanager
def _fuse_for_everyone() -> Iterator[None]:
    """/dev/fuse as a distribution leaves it for users (0666) for the test, then as it was."""
    mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    os.chmod("/dev/fuse", mode | 0o666)
    try:
        yield
    finally:
        os.chmod("/dev/fuse", mode)


def _zarrfs_for(user: pwd.struct_passwd) -> tuple[list[str], dict[str, str]]:
    """The zarrfs command as `user` can run it, and its environment: the installed script,
    or where its interpreter lies where the user cannot reach it (a Python under /root),
    the system's python3 of the same version with the virtualenv's packages."""
    ids = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    with contextlib.suppress(OSError):
        if subprocess.run([sys.executable, "-c", "pass"], **ids, capture_output=True).returncode == 0:
            return ZARRFS, {}
    python = shutil.which("python3", path="/usr/bin:/bin")
    version = f"import sys; sys.exit(sys.version_info[:2] != {tuple(sys.version_info[:2])})"
    if python is None or subprocess.run([python, "-c", version], **ids).returncode != 0:
        pytest.skip(f"{user.pw_name} can run neither {sys.executable} nor a python3 of its version")
    return [python, "-m", "zarrfs.cli"], {"PYTHONPATH": sysconfig.get_paths()["purelib"]}


def _as(user: pwd.struct_passwd, home: Path, *args: str | Path) -> subprocess.CompletedProcess:
    command, extra = _zarrfs_for(user)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ZARRFS_SYSLOG_SOCKET": str(home / "no-syslog"),  # so that the log goes to the state directory
        **extra,
    }
    return subprocess.run(
        [*command, *map(str, args)],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_ordinary_user_mounts_reads_writes_and_unmounts():
    with _ordinary_user() as user, _fuse_for_everyone():
        # a directory of the user's own where every user may reach it (pytest's are 0700)
        home = Path(tempfile.mkdtemp(prefix="zarrfs-user-"))
        try:
            os.chmod(home, 0o755)
            store, mnt = home / "job.zarr", home / "mnt"
            root = zarr.open_group(zarr.storage.LocalStore(store), mode="w")
            root.create_array("a", shape=(6,), chunks=(3,), dtype="int16", fill_value=0)[:] = np.arange(6)
            mnt.mkdir()
            for path in [home, *home.rglob("*")]:
                os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
            mounted = _as(user, home, "mount", store, mnt, "--log-level", "INFO")
            assert mounted.returncode == 0, mounted.stderr
            try:
                assert is_mounted(str(mnt))
                # (only the user reaches the mount: without allow_other, not even root)
                ids = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
                read = subprocess.run(["cat", mnt / "a/data.npy"], **ids, capture_output=True, check=True)
                np.testing.assert_array_equal(np.load(io.BytesIO(read.stdout)), np.arange(6))
                written = np.full(6, 7, dtype="<i2").tobytes()
                subprocess.run(
                    ["dd", f"of={mnt}/a/data", "conv=notrunc", "status=none"], **ids, input=written, check=True
                )
            finally:
                unmounted = _as(user, home, "umount", mnt)
            assert unmounted.returncode == 0, unmounted.stderr
            wait_for(lambda: not is_mounted(str(mnt)))
            log = home / ".local/state/zarrfs" / (str(mnt).strip("/").replace("/", "-") + ".log")
            assert "unmounted" in log.read_text()
            assert log.stat().st_uid == user.pw_uid
            np.testing.assert_array_equal(zarr.open_array(zarr.storage.LocalStore(store), path="a")[...], 7)
        finally:
            if is_mounted(str(home / "mnt")):
                subprocess.run(["fusermount3", "-u", "-z", str(home / "mnt")], check=False)
            shutil.rmtree(home, ignore_errors=True)
