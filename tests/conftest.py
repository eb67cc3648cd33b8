"""Fixtures shared by every test directory: real FUSE mounts of zarrfs run through its
command line, and a check at teardown that each daemon unmounted and exited cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from zarrfs.cli import is_mounted, pid_file, process_alive

# The fixtures that mount: a test that takes one (directly or through another fixture) is
# marked `mount`, as are the tests of the modules below, which mount by other means (the
# command line's own daemons, mount(8), systemd, the demo script), and every test in
# tests/fs/mount (the filesystem's tests by folder: tests/fs/core mounts nothing); a test
# elsewhere that mounts by itself carries @pytest.mark.mount
MOUNT_FIXTURES = {"mount", "module_mount"}
MOUNTING_MODULES = {"test_service.py", "test_demo.py"}
MOUNT_TESTS = Path(__file__).resolve().parent / "fs" / "mount"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (
            MOUNT_FIXTURES & set(getattr(item, "fixturenames", ()))
            or item.path.name in MOUNTING_MODULES
            or MOUNT_TESTS in item.path.parents
        ):
            item.add_marker(pytest.mark.mount)


@pytest.fixture(scope="session", autouse=True)
def _test_log_dir(tmp_path_factory):
    """Daemonized mounts that log to no file of their own log in the session's temporary
    directory (pytest's basetemp, kept after a failure), not to /var/log/zarrfs; their
    subprocesses inherit it."""
    os.environ["ZARRFS_LOG_DIR"] = str(tmp_path_factory.mktemp("logs"))


# the installed console script, as a user runs it
_SCRIPT = Path(sys.executable).parent / "zarrfs"
ZARRFS = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "zarrfs.cli"]
REPO = Path(__file__).resolve().parents[1]
CORPORA = REPO / "tests" / "data" / "corpora"  # other implementations' hierarchies (README there)


def zarrfs(
    *args: str, check: bool = True, timeout: float = 120, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run the zarrfs command line as a user would."""
    result = subprocess.run(
        [*ZARRFS, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )
    if check and result.returncode != 0:
        raise AssertionError(f"zarrfs {' '.join(map(str, args))} failed ({result.returncode}): {result.stderr}")
    return result


@dataclass
class Mount:
    path: Path
    log: Path
    pid: int

    def __truediv__(self, other: str) -> Path:
        return self.path / other

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def unmount(self) -> None:
        zarrfs("umount", self.path)
        assert not is_mounted(str(self.path)), f"{self.path} still mounted"
        assert not process_alive(self.pid), f"daemon {self.pid} still running after umount"
        text = self.log_text()
        assert "Traceback" not in text, f"the daemon logged a traceback:\n{text}"
        assert "unmounted" in text and "after an error" not in text, f"unclean exit:\n{text}"


def _force_unmount(path: Path) -> None:
    subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)


class Mounts:
    """Mounts made through the command line: `mounts(source, *options, env=None) -> Mount`.
    `close()` unmounts what is still mounted and checks each daemon exited cleanly."""

    def __init__(self, tmp_path_factory) -> None:
        self._tmp = tmp_path_factory
        self._mounts: list[Mount] = []

    def __call__(self, source, *options: str, env: dict | None = None) -> Mount:
        base = self._tmp.mktemp("mnt")
        path = base / "m"
        path.mkdir()
        log = base / "zarrfs.log"
        zarrfs("mount", source, path, "--log-file", log, "--log-level", "INFO", *options, env=env)
        assert is_mounted(str(path))
        with open(pid_file(str(path))) as f:
            pid = int(f.read())
        m = Mount(path, log, pid)
        self._mounts.append(m)
        return m

    def close(self) -> None:
        failures = []
        for m in self._mounts:
            if not is_mounted(str(m.path)):
                continue
            try:
                m.unmount()
            except AssertionError as exc:
                failures.append(str(exc))
                _force_unmount(m.path)
        assert not failures, "\n".join(failures)


@pytest.fixture
def mount(tmp_path_factory):
    """mount(source, *options, env=None) -> Mount: a real zarrfs mount, unmounted (and
    checked for a clean daemon exit) at teardown unless the test did so itself."""
    mounts = Mounts(tmp_path_factory)
    yield mounts
    mounts.close()


@pytest.fixture(scope="module")
def module_mount(tmp_path_factory):
    """As `mount`, for mounts that a module's tests share (unmounted after the module)."""
    mounts = Mounts(tmp_path_factory)
    yield mounts
    mounts.close()


def tree_snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every entry below `directory`, links not followed: file contents, link targets,
    and the kind of anything else (to check that nothing in it changed)."""
    out: dict[str, bytes | str] = {}
    for base, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(base) / name
            key = str(path.relative_to(directory))
            if path.is_symlink():
                out[key] = "-> " + os.readlink(path)
            elif path.is_file():
                out[key] = path.read_bytes()
            else:
                out[key] = "dir" if path.is_dir() else "special"
    return out


def wait_for(condition, timeout: float = 30.0, interval: float = 0.05):
    """Poll until condition() is truthy; returns its value or fails at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
