"""What a user installs: `python -m build` makes an sdist and a wheel (the wheel built from
the sdist, so the sdist holds everything), and each, installed into a fresh virtualenv,
gives a `zarrfs` that mounts. The fresh virtualenvs take the dependencies from this one
(a path, not an install: nothing of this checkout's own zarrfs is on it), so the test
needs no network; the Containerfile is checked for what the image must do."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO, is_mounted

SOURCES = ("pyproject.toml", "README.md", "zarrfs")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, built from a copy of the sources a clone has."""
    pytest.importorskip("build")
    base = tmp_path_factory.mktemp("packaging")
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, src / name)
    out = base / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_the_sdist_and_the_wheel_hold_the_whole_package(dist):
    [sdist] = dist.glob("zarrfs-*.tar.gz")
    [wheel] = dist.glob("zarrfs-*-py3-none-any.whl")
    package = {p.relative_to(REPO).as_posix() for p in (REPO / "zarrfs").rglob("*.py")}
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        entry_points = next(whl.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert package <= names, sorted(package - names)
    assert "zarrfs = zarrfs.cli:main" in entry_points and "mount.fuse.zarrfs = zarrfs.cli:mount_helper" in entry_points
    with tarfile.open(sdist) as tar:
        in_sdist = {re.sub(r"^zarrfs-[^/]+/", "", n) for n in tar.getnames()}
    assert package <= in_sdist and "pyproject.toml" in in_sdist and "README.md" in in_sdist


def fresh_virtualenv(path: Path) -> Path:
    """A new virtualenv whose imports fall back on this one's packages (the dependencies)."""
    venv.create(path, with_pip=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(purelib) / "dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    # the setuptools ensurepip brings to Python 3.11 is older than the build needs: this
    # one's is used instead (Python 3.12 and later bring none)
    subprocess.run([path / "bin" / "pip", "uninstall", "-q", "-y", "setuptools"], capture_output=True, cwd=path)
    return path


@pytest.mark.mount
@pytest.mark.parametrize("artifact", ["wheel", "sdist"])
def test_each_installs_into_a_fresh_virtualenv_and_mounts(dist, artifact, tmp_path):
    pattern = "zarrfs-*-py3-none-any.whl" if artifact == "wheel" else "zarrfs-*.tar.gz"
    [package] = dist.glob(pattern)
    env = fresh_virtualenv(tmp_path / "venv")
    installed = subprocess.run(
        [env / "bin/pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation", package],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert installed.returncode == 0, installed.stderr
    where = subprocess.run(
        [env / "bin/python", "-c", "import zarrfs; print(zarrfs.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert where.stdout.startswith(str(env)), where.stdout + where.stderr  # the install, not this checkout

    zarrfs = str(env / "bin" / "zarrfs")
    version = subprocess.run([zarrfs, "--version"], capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert version.startswith("zarrfs ") and "libfuse" in version
    store, mountpoint = tmp_path / "survey.zarr", tmp_path / "z"
    mountpoint.mkdir()
    subprocess.run([zarrfs, "demo", store], capture_output=True, check=True, timeout=120, cwd=tmp_path)
    subprocess.run([zarrfs, "mount", store, mountpoint], capture_output=True, check=True, timeout=120, cwd=tmp_path)
    try:
        assert (mountpoint / "climate" / "temp" / "info").read_text().startswith("path:               /climate/temp")
    finally:
        subprocess.run([zarrfs, "umount", mountpoint], capture_output=True, timeout=120)
        if is_mounted(str(mountpoint)):
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)])
    assert not is_mounted(str(mountpoint))


def test_the_containerfile_builds_an_image_that_mounts():
    """Read as a builder would: two stages, pyfuse3 compiled in the first against
    libfuse's headers, the runtime keeping fusermount3, `zarrfs mount` the entry point."""
    text = (REPO / "Containerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)", text, flags=re.M)
    assert len(stages) == 2
    build, runtime = text.split("\nFROM ", 2)[1:]
    assert "libfuse3-dev" in build and "pkg-config" in build and "gcc" in build
    copied = re.findall(r"^COPY\s+(?!--from)(.*)$", text, flags=re.M)
    for line in copied:
        for name in line.split()[:-1]:
            assert (REPO / name).exists(), name
    assert "fuse3" in runtime and "libfuse3-dev" not in runtime
    assert re.search(r'^ENTRYPOINT \["zarrfs", "mount", "--foreground"\]$', text, flags=re.M)
    for instruction in re.findall(r"^([A-Z]+)\s", text, flags=re.M):
        assert instruction in {"ARG", "FROM", "RUN", "COPY", "ENV", "STOPSIGNAL", "ENTRYPOINT", "CMD"}


@pytest.mark.skipif(not (shutil.which("buildah") or shutil.which("podman")), reason="needs buildah or podman")
def test_a_builder_reads_the_containerfiles_stages():
    """buildah (or podman) parses the Containerfile as far as its stages without building
    (building needs the base image from a container registry, which the test run may not
    reach): an unknown target is refused by name, not the file."""
    tool = shutil.which("buildah") or shutil.which("podman")
    assert tool
    result = subprocess.run(
        [tool, "build", "--target", "no-such-stage", "-f", str(REPO / "Containerfile"), str(REPO)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "no-such-stage" in result.stderr, result.stderr
