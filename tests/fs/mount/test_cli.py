"""The command line (docs/configuration.md): `zarrfs mount` refuses what it cannot mount with one clear
line and a failing status, honours --read-only and -o uid=,gid=, works in the form
mount.fuse3 uses; `zarrfs info` prints the tree or one node; `zarrfs umount` of nothing
fails clearly."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

from tests.conftest import ZARRFS, zarrfs  # noqa: E402
from zarrfs.cli import is_mounted, pid_file  # noqa: E402


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli") / "h.zarr"
    top = zarr.open_group(str(root), mode="w")
    temp = top.create_group("climate").create_array(
        "temp", shape=(6, 4), chunks=(3, 2), dtype="float32", attributes={"units": "K"}
    )
    temp[:] = np.arange(24, dtype="float32").reshape(6, 4)
    top.create_array("mask", shape=(5,), chunks=(5,), dtype="bool")[:] = True
    return root


def _one_clear_line(result: subprocess.CompletedProcess, *words: str) -> str:
    assert result.returncode != 0, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("zarrfs: ") and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture
def mountpoint(tmp_path) -> Path:
    path = tmp_path / "mnt"
    path.mkdir()
    yield path
    if is_mounted(str(path)):  # a refused mount must not have happened
        subprocess.run(["fusermount3", "-u", "-z", str(path)])
        pytest.fail(f"{path} was mounted")


def test_mount_of_a_missing_source_fails_clearly(tmp_path, mountpoint):
    missing = tmp_path / "nowhere.zarr"
    _one_clear_line(zarrfs("mount", missing, mountpoint, check=False), str(missing), "does not exist")


def test_mount_of_a_directory_that_is_not_zarr_fails_clearly(tmp_path, mountpoint):
    plain = tmp_path / "plain"
    (plain / "sub").mkdir(parents=True)
    (plain / "notes.txt").write_text("no zarr here")
    _one_clear_line(zarrfs("mount", plain, mountpoint, check=False), str(plain), "not a Zarr hierarchy")


def test_mount_on_a_missing_mountpoint_fails_clearly(tmp_path, source):
    missing = tmp_path / "no-such-dir"
    _one_clear_line(zarrfs("mount", source, missing, check=False), str(missing), "does not exist")
    assert not missing.exists()


def test_mount_on_a_busy_mountpoint_fails_clearly(source, mount):
    m = mount(source)
    _one_clear_line(zarrfs("mount", source, m.path, check=False), str(m.path), "busy")
    assert (m / "climate" / "temp" / "data").read_bytes() == np.arange(24, dtype="<f4").tobytes()


@pytest.mark.parametrize("command", ["mount", "info"])
def test_a_storage_option_that_is_not_key_value_is_a_usage_error(source, mountpoint, command):
    where = [mountpoint] if command == "mount" else []
    result = zarrfs(command, source, *where, "--storage-option", "anon", check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--storage-option: 'anon' is not KEY=VALUE" in result.stderr.strip().splitlines()[-1]


def test_umount_of_something_not_mounted_fails_clearly(tmp_path):
    _one_clear_line(zarrfs("umount", tmp_path, check=False), str(tmp_path), "not")


@pytest.mark.parametrize("option", [["--read-only"], ["-o", "ro"]])
def test_read_only_mount_refuses_every_write_with_erofs(source, mount, option):
    m = mount(source, *option)
    before = {p: p.stat().st_mtime for p in source.rglob("*")}
    temp = m / "climate" / "temp"
    attempts = [
        lambda: os.open(temp / "data", os.O_WRONLY),
        lambda: os.open(temp / "chunks" / "0" / "0", os.O_RDWR),
        lambda: os.open(temp / "zarr.json", os.O_WRONLY | os.O_TRUNC),
        lambda: os.open(m / "climate" / "new.npy", os.O_WRONLY | os.O_CREAT, 0o644),
        lambda: os.mkdir(m / "newgroup"),
        lambda: os.unlink(temp / "chunks" / "0" / "0"),
        lambda: os.rename(m / "mask", m / "mask2"),
        lambda: os.setxattr(temp, "user.zarr.units", b'"C"'),
        lambda: os.removexattr(temp, "user.zarr.units"),
        lambda: os.truncate(temp / "data", 0),
    ]
    for i, attempt in enumerate(attempts):
        with pytest.raises(OSError) as info:
            attempt()
        assert info.value.errno == errno.EROFS, f"attempt {i}: {info.value}"
    assert {p: p.stat().st_mtime for p in source.rglob("*")} == before
    assert (temp / "data").read_bytes() == np.arange(24, dtype="<f4").tobytes()


def test_uid_and_gid_options_set_the_owner(source, mount):
    m = mount(source, "-o", "uid=1234,gid=1234")
    for path in (m.path, m / "climate", m / "climate" / "temp" / "data", m / "climate" / "temp" / "chunks" / "1" / "1"):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid) == (1234, 1234), path


@pytest.mark.parametrize("option", ["uid=abc", "gid=-1", "uid=²"])
def test_an_owner_that_is_not_a_number_is_refused_by_name(source, mountpoint, option):
    _one_clear_line(
        zarrfs("mount", source, mountpoint, "-o", option, check=False), option.partition("=")[0], "takes a number"
    )


def test_a_mountpoint_whose_path_has_spaces_tabs_and_backslashes_mounts_and_unmounts(source, tmp_path):
    """/proc/self/mountinfo writes such a path escaped (a space as \\040): the busy check,
    `stats`, `umount` and the raised readahead all find the mount by it."""
    mountpoint = tmp_path / "my data\tset\\2024"
    mountpoint.mkdir()
    zarrfs("mount", source, mountpoint)
    try:
        assert is_mounted(str(mountpoint))
        assert sorted(os.listdir(mountpoint)) == ["climate", "mask", "zarr.json"]
        _one_clear_line(zarrfs("mount", source, mountpoint, "--allow-non-empty", check=False), "is busy")
        assert "bytes_fetched" in json.loads(zarrfs("stats", mountpoint).stdout)
        escaped = "".join({" ": "\\040", "\t": "\\011", "\\": "\\134"}.get(c, c) for c in str(mountpoint))
        with open("/proc/self/mountinfo") as f:
            device = next(line.split()[2] for line in f if line.split()[4] == escaped)
        assert Path(f"/sys/class/bdi/{device}/read_ahead_kb").read_text().strip() == "1024"
    finally:
        _cleanup_unmount(mountpoint)


def test_fsname_and_subtype_given_replace_zarrfs_own(source, mount):
    m = mount(source, "-o", "fsname=survey,subtype=zarrtest")
    with open("/proc/self/mounts") as f:
        fields = next(line.split() for line in f if line.split()[1] == str(m.path))
    assert fields[0] == "survey" and fields[2] == "fuse.zarrtest", fields


def test_info_prints_the_tree(source):
    out = zarrfs("info", source).stdout
    for name in ("climate", "temp", "mask"):
        assert name in out, out
    temp = zarr.open_array(str(source / "climate" / "temp"), mode="r")
    line = next(line for line in out.splitlines() if "temp" in line)
    assert str(temp.dtype) in line and "6" in line and "4" in line, line
    assert out.index("climate") < out.index("temp"), "the tree lists a group before its children"


def test_info_aligns_the_trees_columns(source):
    """Each column of the tree (kind, data type, shape, chunks) starts where it starts on
    every other line: they followed each name at two spaces."""
    lines = zarrfs("info", source).stdout.splitlines()
    arrays = [line for line in lines if " array " in line]
    assert len(arrays) >= 2 and len(lines) > len(arrays)
    for column, among in ((r" (array|group)\b", lines), (r" \[", arrays), (r" chunks \[", arrays)):
        starts = {match.start() for line in among if (match := re.search(column, line))}
        assert len(starts) == 1, "\n".join(lines)


def test_info_of_a_node_prints_its_summary(source):
    out = zarrfs("info", source, "climate/temp").stdout
    temp = zarr.open_array(str(source / "climate" / "temp"), mode="r")
    assert "/climate/temp" in out
    assert str(tuple(temp.shape)) in out and str(tuple(temp.chunks)) in out and str(temp.dtype) in out, out
    assert '"units": "K"' in out, out
    _one_clear_line(zarrfs("info", source, "climate/nothing", check=False), "nothing")


def test_a_mount_whose_store_has_vanished_is_still_a_busy_mountpoint(tmp_path):
    """Its root fails `stat` (the store's root is gone): a mount there is refused as busy,
    not as a mountpoint that does not exist."""
    source, mountpoint = tmp_path / "h.zarr", tmp_path / "mnt"
    zarr.open_group(str(source), mode="w").create_group("g")
    mountpoint.mkdir()
    zarrfs("mount", source, mountpoint, "--metadata-ttl", "0")
    try:
        shutil.rmtree(source)
        with pytest.raises(OSError):
            os.stat(mountpoint)
        _one_clear_line(zarrfs("mount", tmp_path, mountpoint, "--allow-non-empty", check=False), "is busy")
    finally:
        _cleanup_unmount(mountpoint)


def _cleanup_unmount(path: Path) -> None:
    """zarrfs umount, then: nothing mounted, and the daemon gone."""
    pid = int(Path(pid_file(str(path))).read_text())
    zarrfs("umount", path)
    assert not is_mounted(str(path))
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().split(") ")[-1][:1] == "Z", f"daemon {pid} still running"


def test_mount_fuse3_form_mounts_read_only(source, mountpoint):
    zarrfs(source, mountpoint, "-o", "ro,nodev,nosuid,noatime,_netdev")
    try:
        assert (mountpoint / "climate" / "temp" / "data").read_bytes() == np.arange(24, dtype="<f4").tobytes()
        with pytest.raises(OSError) as info:
            os.open(mountpoint / "mask" / "data", os.O_WRONLY)
        assert info.value.errno == errno.EROFS
    finally:
        _cleanup_unmount(mountpoint)


def test_mount_fuse3_helper_runs_zarrfs(source, mountpoint):
    """As fstab does it: mount.fuse3 TYPE#SOURCE MOUNTPOINT -o OPTIONS, zarrfs on the PATH."""
    bin_dir = os.path.dirname(ZARRFS[0]) if len(ZARRFS) == 1 else os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    result = subprocess.run(
        ["mount.fuse3", f"zarrfs#{source}", str(mountpoint), "-o", "ro"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    try:
        assert sorted(os.listdir(mountpoint)) == ["climate", "mask", "zarr.json"]
    finally:
        _cleanup_unmount(mountpoint)


def test_a_mistyped_option_is_refused_by_the_commands_usage_with_the_option_meant(source, mountpoint):
    result = zarrfs("mount", source, mountpoint, "--read-onyl", check=False)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: zarrfs mount ")
    assert "unrecognized arguments: --read-onyl (did you mean --read-only?)" in result.stderr


def test_output_cut_short_by_a_reader_that_stops_is_no_traceback(source):
    # as `zarrfs info X | head -1`: the reader has gone before everything is written
    reader = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    result = subprocess.run(
        [*ZARRFS, "info", str(source)],
        stdout=reader.stdin,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    reader.stdin.close()
    reader.wait(timeout=10)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    assert result.returncode in (0, 141)
