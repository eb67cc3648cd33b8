"""A `.npy` copied over the name of an array that exists replaces the array, as copying a
file over another replaces its bytes: `tar -x`, `rsync -a` and `cp` exit 0, and zarr-python
reads the new values back after the unmount (docs/posix.md). A group is never replaced by
a `.npy`."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import zarr

from tests.fs.mount.test_raw import assert_errno
from tests.fs.mount.write_fixtures import run


def _store(tmp_path: Path) -> Path:
    """Group g holding array r1 (3x4 int16) and group sub, written by zarr-python."""
    root = tmp_path / "store.zarr"
    group = zarr.create_group(root / "g")
    group.create_array("r1", shape=(3, 4), chunks=(2, 2), dtype="<i2", attributes={"old": 1})[...] = np.arange(
        12, dtype="<i2"
    ).reshape(3, 4)
    group.create_group("sub").create_array("k", shape=(2,), dtype="<i4")[...] = [7, 8]
    return root


def _new_values(directory: Path) -> np.ndarray:
    """r1.npy of another shape and type than the array r1 in the store."""
    directory.mkdir(parents=True, exist_ok=True)
    values = np.linspace(-1, 1, 30, dtype="<f8").reshape(5, 6)
    np.save(directory / "r1.npy", values)
    return values


def _check(root: Path, values: np.ndarray) -> None:
    array = zarr.open_array(root / "g" / "r1", mode="r")
    np.testing.assert_array_equal(array[...], values)
    assert array.dtype == values.dtype and dict(array.attrs) == {}  # the old array's attributes went with it
    assert not [p.name for p in (root / "g").iterdir() if p.name.startswith(".r1")]  # no replacement left over
    np.testing.assert_array_equal(zarr.open_array(root / "g/sub/k", mode="r")[...], [7, 8])


def test_tar_x_of_a_npy_over_an_array_replaces_it(mount, tmp_path):
    root = _store(tmp_path)
    values = _new_values(tmp_path / "in")
    os.utime(tmp_path / "in/r1.npy", (1_600_000_000, 1_600_000_000))
    run("tar", "-cf", tmp_path / "r1.tar", "-C", tmp_path / "in", "r1.npy")
    m = mount(root)
    done = subprocess.run(["tar", "-xf", tmp_path / "r1.tar", "-C", m / "g"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert os.stat(m / "g/r1.npy").st_mtime == 1_600_000_000  # the time tar set, on the new array's .npy
    np.testing.assert_array_equal(np.load(m / "g/r1/data.npy"), values)
    m.unmount()
    _check(root, values)


def test_rsync_a_of_a_npy_over_an_array_replaces_it_and_a_second_run_sends_nothing(mount, tmp_path):
    root = _store(tmp_path)
    values = _new_values(tmp_path / "in")
    m = mount(root)
    done = run("rsync", "-a", "--itemize-changes", f"{tmp_path / 'in'}/", f"{m / 'g'}/")
    assert "r1.npy" in done.stdout
    again = run("rsync", "-a", "--itemize-changes", f"{tmp_path / 'in'}/", f"{m / 'g'}/")
    assert "r1.npy" not in again.stdout, again.stdout
    m.unmount()
    _check(root, values)


def test_cp_of_a_npy_over_an_array_replaces_it(mount, tmp_path):
    root = _store(tmp_path)
    values = _new_values(tmp_path / "in")
    m = mount(root)
    run("cp", tmp_path / "in/r1.npy", m / "g/r1.npy")
    shutil.copy(tmp_path / "in/r1.npy", m / "g/r1.npy")  # and again, over the array it made
    m.unmount()
    _check(root, values)


def test_a_npy_is_not_copied_over_a_group(mount, tmp_path):
    root = _store(tmp_path)
    _new_values(tmp_path / "in")
    shutil.copy(tmp_path / "in/r1.npy", tmp_path / "in/sub.npy")
    m = mount(root)
    assert_errno(errno.EEXIST, shutil.copy, tmp_path / "in/sub.npy", m / "g/sub.npy")
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(root / "g/sub/k", mode="r")[...], [7, 8])
