"""What each process imports (docs/reads.md, "Until the mount is ready"): the command line's front end none of
the filesystem's libraries, so that `zarrfs mount` forks its daemon at once and `umount`,
`stats` and `--help` answer at once; the daemon answers its mountpoint before numpy, and
imports numpy and numcodecs on its own once it answers. Checked through what Python itself
reports (`sys.modules`, `-X importtime`), never through timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.conftest import REPO, wait_for, zarrfs
from zarrfs.cli import is_mounted

# what a front end that parses, refuses or waits must not have imported
HEAVY = (
    "numpy",
    "numcodecs",
    "fsspec",
    "s3fs",
    "botocore",
    "aiobotocore",
    "pyfuse3",
    "trio",
    "zarr",
    "icechunk",
    "asyncio",
    "zarrfs.format",
    "zarrfs.views",
    "zarrfs.fs.fuse",
    "zarrfs.fs.decoded",
)


def _imported_after(script: str) -> dict:
    """Run `script` (Python, with `argv` bound to a list to hand to zarrfs.cli.main) in a
    fresh interpreter; what it printed last: {"code": exit status, "heavy": [modules]}."""
    program = (
        "import json, sys\n"
        "import zarrfs.cli\n"
        f"{script}\n"
        f"heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in {HEAVY!r}))\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A group holding a zstd-compressed array (zarr-python's default codecs)."""
    root = tmp_path_factory.mktemp("lazy") / "h.zarr"
    group = zarr.open_group(str(root), mode="w")
    temp = group.create_group("climate").create_array("temp", shape=(6, 4), chunks=(3, 2), dtype="float32")
    temp[:] = np.arange(24, dtype="float32").reshape(6, 4)
    return root


def test_importing_the_command_line_imports_none_of_the_filesystem():
    assert _imported_after("code = 0")["heavy"] == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["mount", "--help"],
        ["umount", "--help"],
        ["stats", "--help"],
        ["info", "--help"],
    ],
)
def test_help_and_version_import_none_of_the_filesystem(argv):
    out = _imported_after(f"try:\n    code = zarrfs.cli.main({argv!r})\nexcept SystemExit as exc:\n    code = exc.code")
    assert out == {"code": 0, "heavy": []}


def test_umount_and_stats_of_nothing_import_none_of_the_filesystem(tmp_path):
    for command in ("umount", "stats"):
        out = _imported_after(f"code = zarrfs.cli.main([{command!r}, {str(tmp_path)!r}])")
        assert out == {"code": 1, "heavy": []}, command


def test_a_refused_mount_imports_none_of_the_filesystem(tmp_path, source):
    """Options, the mountpoint and the source's existence are checked before any import."""
    missing = tmp_path / "nowhere.zarr"
    argv = ["mount", str(missing), str(tmp_path), "--storage-option", "anon=true", "-o", "ro,allow_other"]
    assert _imported_after(f"code = zarrfs.cli.main({argv!r})") == {"code": 1, "heavy": []}


@pytest.mark.mount
def test_mounting_forks_the_daemon_before_importing_the_filesystem(tmp_path, source):
    """The process that waits for the daemon imports nothing heavy: the daemon imports
    what it needs, once, after the fork."""
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    argv = ["mount", str(source), str(mountpoint), "--log-file", str(tmp_path / "log")]
    try:
        out = _imported_after(f"code = zarrfs.cli.main({argv!r})")
        assert is_mounted(str(mountpoint))
        assert (mountpoint / "climate" / "temp" / "data").read_bytes() == np.arange(24, dtype="<f4").tobytes()
    finally:
        if is_mounted(str(mountpoint)):
            zarrfs("umount", mountpoint)
    assert out == {"code": 0, "heavy": []}


class _ForegroundDaemon:
    """`zarrfs mount -f` under `python -X importtime`: Python reports each import on
    standard error as it completes, so `imported()` tells what the daemon has imported
    so far."""

    def __init__(self, source: Path, mountpoint: Path, log: Path) -> None:
        self.mountpoint = mountpoint
        self.log = log
        self._stderr = open(log, "w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-X",
                "importtime",
                "-m",
                "zarrfs.cli",
                "mount",
                "-f",
                str(source),
                str(mountpoint),
                "--log-level",
                "INFO",
            ],
            stderr=self._stderr,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        wait_for(lambda: is_mounted(str(mountpoint)) or self.process.poll() is not None, timeout=60)
        assert self.process.poll() is None, self.log.read_text()

    def imported(self, before: str | None = None) -> set[str]:
        """What it has imported; with `before`, only what it had when it logged a line
        holding that text (standard error is written in order)."""
        lines = self.log.read_text().splitlines()
        if before is not None:
            lines = lines[: next(i for i, line in enumerate(lines) if before in line)]
        return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}

    def close(self) -> None:
        try:
            if is_mounted(str(self.mountpoint)):
                zarrfs("umount", self.mountpoint)
            self.process.wait(timeout=60)
        finally:
            self._stderr.close()


@pytest.mark.mount
def test_the_daemon_is_ready_before_numpy_then_imports_numpy_and_numcodecs_on_its_own(tmp_path, source):
    """The mount answers before numpy is imported; then, with nothing asked of it, the
    daemon imports numpy and numcodecs on a thread of its own, so that the first array
    read does not wait for them."""
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    daemon = _ForegroundDaemon(source, mountpoint, tmp_path / "stderr")
    try:
        wait_for(lambda: "ready: " in daemon.log.read_text())
        before_ready = daemon.imported(before="ready: ")
        assert {"pyfuse3", "trio"} <= before_ready  # it reports what it imports
        assert not {"numpy", "numcodecs", "fsspec"} & before_ready
        wait_for(lambda: {"numpy", "numcodecs"} <= daemon.imported())
        assert sorted(os.listdir(mountpoint)) == ["climate", "zarr.json"]
        assert (mountpoint / "climate" / "temp" / "data").read_bytes() == np.arange(24, dtype="<f4").tobytes()
        assert "fsspec" not in daemon.imported()  # a local source never needs it
    finally:
        daemon.close()
    assert daemon.process.returncode == 0, daemon.log.read_text()
