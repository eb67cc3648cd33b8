"""scripts/setup.sh gives a user the newest releases their Python can have; the tested
lower ends (scripts/constraints.txt) are the test run's, asked for with ZARRFS_PINNED=1,
in a virtualenv of its own; a second run installs nothing and prints nothing. Run with a
virtualenv whose python and pip record what they are asked, and apt's packages taken as
installed: no network, no apt."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO

RECORDER = """#!/bin/sh
echo "$(basename "$0") $*" >> "$(dirname "$0")/../calls"
"""


def fake_venv(path: Path) -> Path:
    (path / "bin").mkdir(parents=True)
    for name in ("python", "pip"):
        (path / "bin" / name).write_text(RECORDER)
        (path / "bin" / name).chmod(0o755)
    return path


def setup(venv: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    dpkg = bin_dir / "dpkg-query"  # every apt package taken as installed
    dpkg.write_text("#!/bin/sh\nprintf 'install ok installed'\n")
    dpkg.chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ZARRFS_")}
    environ |= {"PATH": f"{bin_dir}:{os.environ['PATH']}", "ZARRFS_VENV": str(venv), **env}
    return subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=REPO, env=environ, capture_output=True, text=True, timeout=60
    )


def installs(venv: Path) -> list[str]:
    calls = (venv / "calls").read_text().splitlines() if (venv / "calls").exists() else []
    return [call for call in calls if call.startswith("pip install") and "-e .[test]" in call]


def test_the_users_set_up_takes_the_newest_releases_once(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    first = setup(venv, tmp_path)
    assert first.returncode == 0, first.stderr
    [install] = installs(venv)
    assert "constraints.txt" not in install
    assert "--upgrade" in install and "--upgrade-strategy eager" in install
    again = setup(venv, tmp_path)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert len(installs(venv)) == 1, "a second run installs nothing"


def test_the_pinned_set_up_takes_the_tested_lower_ends(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    result = setup(venv, tmp_path, ZARRFS_PINNED="1")
    assert result.returncode == 0, result.stderr
    [install] = installs(venv)
    assert "-c scripts/constraints.txt" in install and "--upgrade-strategy" not in install
    assert setup(venv, tmp_path, ZARRFS_PINNED="1").stdout == ""
    assert len(installs(venv)) == 1


def test_the_test_run_pins_in_a_virtualenv_of_its_own():
    """The README's test command does not reinstall over the demo's .venv (nor it over the
    test run's): the host run and the checks use .venv-pinned, the Debian 13 run the newest."""
    script = (REPO / "scripts/test.sh").read_text()
    assert "ZARRFS_PINNED=1 ZARRFS_VENV=.venv-pinned" in script
    assert ".venv-pinned/bin/python -m pytest" in script
    assert "ZARRFS_PINNED" not in (REPO / "scripts/debian13.sh").read_text()
    assert "ZARRFS_VENV" not in (REPO / "scripts/demo.sh").read_text()


def test_the_constraints_are_the_lower_ends_of_the_declared_ranges():
    """Each pin of scripts/constraints.txt is the lower bound pyproject.toml declares."""
    pyproject = (REPO / "pyproject.toml").read_text()
    for line in (REPO / "scripts/constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            assert f'"{name}>={version}' in pyproject or f'"{name}[server]>={version}' in pyproject, line
