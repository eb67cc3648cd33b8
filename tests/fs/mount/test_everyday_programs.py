"""Everyday programs writing through the decoded tree as they do anywhere else (docs/posix.md,
"What programs see"): Python's shutil, cp -p and -a, install, rsync -a, tar, sed -i, a
temporary file renamed onto zarr.json, vim. Each exits 0, and what it put in is read back
by zarr-python after the unmount."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.fs.mount.test_raw import assert_errno
from tests.fs.mount.write_fixtures import run, store_snapshot


def _store(tmp_path: Path) -> Path:
    """A v3 store written by zarr-python: group g, array g/a (4x6 int16, chunks 2x3)."""
    root = tmp_path / "store.zarr"
    group = zarr.create_group(root / "g")
    group.create_array("a", shape=(4, 6), chunks=(2, 3), dtype="<i2", attributes={"units": "K"})[...] = np.arange(
        24, dtype="<i2"
    ).reshape(4, 6)
    return root


def _npys(directory: Path, count: int = 3) -> dict[str, np.ndarray]:
    directory.mkdir(parents=True, exist_ok=True)
    values = {f"d{i}": np.arange(10 * (i + 1), dtype="<f8").reshape(-1, 2) * (i + 1) for i in range(count)}
    for name, value in values.items():
        np.save(directory / f"{name}.npy", value)
    return values


def _check_arrays(root: Path, group: str, values: dict[str, np.ndarray]) -> None:
    for name, value in values.items():
        np.testing.assert_array_equal(zarr.open_array(root / group / name, mode="r")[...], value)


def _attributes(root: Path, path: str) -> dict:
    return dict(zarr.open_array(root / path, mode="r").attrs)


# ------------------------------------------------------------------ tar


def test_tar_x_over_an_existing_zarr_json_ends_and_stores_the_archived_document(mount, tmp_path):
    """tar removes a file that exists and makes it again: an unlink that answered 0 and left
    the name had it loop forever."""
    root = _store(tmp_path)
    source = tmp_path / "src"
    shutil.copytree(root / "g", source / "g", ignore=shutil.ignore_patterns("c"))
    document = json.loads((source / "g/a/zarr.json").read_text())
    document["attributes"] = {"units": "m"}
    (source / "g/a/zarr.json").write_text(json.dumps(document))
    run("tar", "-cf", tmp_path / "group.tar", "-C", source, "g")
    m = mount(root)
    done = subprocess.run(["tar", "-xf", tmp_path / "group.tar", "-C", m.path], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads((m / "g/a/zarr.json").read_text())["attributes"] == {"units": "m"}
    m.unmount()
    assert _attributes(root, "g/a") == {"units": "m"}
    np.testing.assert_array_equal(zarr.open_array(root / "g/a")[...], np.arange(24).reshape(4, 6))


def test_tar_x_of_npy_files_makes_arrays_and_keeps_their_modes_and_times(mount, tmp_path):
    root = _store(tmp_path)
    values = _npys(tmp_path / "arrays")
    os.utime(tmp_path / "arrays/d0.npy", (1_600_000_000, 1_600_000_000))
    run("tar", "-cf", tmp_path / "arrays.tar", "-C", tmp_path / "arrays", ".")
    m = mount(root)
    done = subprocess.run(["tar", "-xf", tmp_path / "arrays.tar", "-C", m / "g"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert os.stat(m / "g/d0.npy").st_mtime == 1_600_000_000
    m.unmount()
    _check_arrays(root, "g", values)


def test_unlink_of_a_view_fails_and_rm_r_still_removes_the_array(mount, tmp_path):
    root = _store(tmp_path)
    m = mount(root)
    assert_errno(errno.EPERM, os.unlink, m / "g/a/info")
    assert (m / "g/a/info").exists()
    run("rm", "-r", m / "g/a")
    assert not (m / "g/a").exists()
    m.unmount()
    assert "a" not in zarr.open_group(root / "g", mode="r")


def test_an_array_made_where_one_whose_document_was_removed_was_moved_away_is_not_rmdir_able(mount, tmp_path):
    """`rm zarr.json` lets the views go and the rmdir that follows erase the array; once it
    is moved away, an array made at its old path has its views and is not erased by a
    plain rmdir (it was: the removal was remembered by path)."""
    root = _store(tmp_path)
    values = _npys(tmp_path / "in", 1)
    m = mount(root)
    os.unlink(m / "g/a/zarr.json")
    os.rename(m / "g/a", m / "g/b")
    shutil.copy(tmp_path / "in/d0.npy", m / "g/a.npy")
    assert_errno(errno.EPERM, os.unlink, m / "g/a/info")
    assert_errno(errno.ENOTEMPTY, os.rmdir, m / "g/a")
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(root / "g/a", mode="r")[...], values["d0"])
    np.testing.assert_array_equal(zarr.open_array(root / "g/b", mode="r")[...], np.arange(24).reshape(4, 6))


# ------------------------------------------------------- copies into a group


def test_shutil_copy_copy2_copytree_and_move_make_arrays(mount, tmp_path):
    root = _store(tmp_path)
    values = _npys(tmp_path / "in", 4)
    tree = _npys(tmp_path / "tree", 2)
    m = mount(root)
    shutil.copy(tmp_path / "in/d0.npy", m / "g")
    shutil.copy2(tmp_path / "in/d1.npy", m / "g")
    shutil.move(str(tmp_path / "in/d2.npy"), str(m / "g"))
    shutil.copytree(tmp_path / "tree", m / "g/t")
    assert os.stat(m / "g/d1.npy").st_mtime == os.stat(tmp_path / "in/d1.npy").st_mtime
    assert not (tmp_path / "in/d2.npy").exists()
    m.unmount()
    _check_arrays(root, "g", {k: values[k] for k in ("d0", "d1", "d2")})
    _check_arrays(root, "g/t", tree)


@pytest.mark.parametrize(
    "command",
    [["cp", "-p", "{src}/d0.npy", "{dst}"], ["install", "-m", "644", "{src}/d0.npy", "{dst}"]],
    ids=["cp -p", "install -m"],
)
def test_cp_p_and_install_make_an_array(mount, tmp_path, command):
    root = _store(tmp_path)
    values = _npys(tmp_path / "in", 1)
    m = mount(root)
    os.utime(tmp_path / "in/d0.npy", (1_600_000_000, 1_600_000_000))
    run(*[part.format(src=tmp_path / "in", dst=m / "g") for part in command])
    shown = os.stat(m / "g/d0.npy")
    assert shown.st_mode & 0o777 == 0o644 and shown.st_size == (tmp_path / "in/d0.npy").stat().st_size
    if command[0] == "cp":  # set on the open file, before the close that made the array
        assert shown.st_mtime == 1_600_000_000
    m.unmount()
    _check_arrays(root, "g", values)


def test_cp_a_of_a_directory_of_npy_files_makes_a_group_of_arrays(mount, tmp_path):
    root = _store(tmp_path)
    values = _npys(tmp_path / "dir")
    m = mount(root)
    run("cp", "-a", tmp_path / "dir", m / "g")
    m.unmount()
    _check_arrays(root, "g/dir", values)


def test_a_npy_copied_again_after_its_array_was_removed_shows_its_own_mode_and_time(mount, tmp_path):
    """What `cp -p` set on `x.npy` goes with array `x` (rm -r, mv): a plain `cp` of another
    `x.npy` showed the removed array's mode and time, so rsync took it for the file sent."""
    root = _store(tmp_path)
    values = _npys(tmp_path / "in", 1)
    os.chmod(tmp_path / "in/d0.npy", 0o600)
    os.utime(tmp_path / "in/d0.npy", ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    m = mount(root)
    run("cp", "-p", tmp_path / "in/d0.npy", m / "g/")
    assert os.stat(m / "g/d0.npy").st_mtime_ns == 1_500_000_000_000_000_000
    run("mv", m / "g/d0", m / "g/d1")
    assert os.stat(m / "g/d1.npy").st_mode & 0o777 == 0o600
    run("rm", "-r", m / "g/d1")
    for name in ("d0.npy", "d1.npy"):
        run("cp", tmp_path / "in/d0.npy", m / "g" / name)
        shown = os.stat(m / "g" / name)
        assert shown.st_mode == os.stat(m / "g/a/data.npy").st_mode, name
        assert shown.st_mtime_ns != 1_500_000_000_000_000_000, name
    m.unmount()
    _check_arrays(root, "g", values)


def test_rsync_a_of_npy_files_into_a_group_twice_sends_nothing_the_second_time(mount, tmp_path):
    root = _store(tmp_path)
    values = _npys(tmp_path / "dir")
    m = mount(root)
    first = run("rsync", "-a", "--out-format=%n", f"{tmp_path / 'dir'}/", f"{m / 'g/rs'}/")
    assert {f"{n}.npy" for n in values} <= set(first.stdout.split())
    second = run("rsync", "-a", "--out-format=%n", f"{tmp_path / 'dir'}/", f"{m / 'g/rs'}/")
    assert [line for line in second.stdout.split() if not line.endswith("/")] == []
    m.unmount()
    _check_arrays(root, "g/rs", values)


# ------------------------------------------------------------ editing documents


def test_sed_i_edits_a_zarr_json(mount, tmp_path):
    root = _store(tmp_path)
    m = mount(root)
    run("sed", "-i", 's/"K"/"kelvin"/', m / "g/a/zarr.json")
    assert not [p for p in os.listdir(m / "g/a") if p.startswith("sed")]
    m.unmount()
    assert _attributes(root, "g/a") == {"units": "kelvin"}


def test_a_temporary_file_renamed_onto_zarr_json_replaces_it(mount, tmp_path):
    root = _store(tmp_path)
    m = mount(root)
    document = json.loads((m / "g/a/zarr.json").read_text())
    document["attributes"]["source"] = "replace"
    (m / "g/a/zarr.json.tmp").write_text(json.dumps(document))
    os.replace(m / "g/a/zarr.json.tmp", m / "g/a/zarr.json")
    # as `jq ... zarr.json > tmp && mv tmp zarr.json`
    edit = "import json,sys; d=json.load(sys.stdin); d['attributes']['by']='jq'; print(json.dumps(d))"
    subprocess.run(
        ["sh", "-c", f'python3 -c "{edit}" < zarr.json > tmp && mv tmp zarr.json'], cwd=m / "g/a", check=True
    )
    m.unmount()
    assert _attributes(root, "g/a") == {"units": "K", "source": "replace", "by": "jq"}


def _vim() -> str:
    for name in ("vim", "vim.tiny", "vim.basic", "vim.nox"):
        if shutil.which(name):
            return name
    pytest.skip("vim is not installed")


@pytest.mark.parametrize("backupcopy", ["yes", "no", "auto"])
def test_vim_saves_a_zarr_json(mount, tmp_path, backupcopy):
    """Its swap file (.zarr.json.swp) and backup (zarr.json~) beside the document, as vim
    makes them by default where it may. With backupcopy=no vim renames the document away
    to zarr.json~ before it writes the new one: the node keeps its document meanwhile."""
    root = _store(tmp_path)
    m = mount(root)
    done = subprocess.run(
        [
            _vim(),
            "-N",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-es",
            "-c",
            f"set nobackup writebackup backupskip= backupcopy={backupcopy} backupdir=. directory=. swapfile",
            "-c",
            r"%s/\"K\"/\"C\"/",
            "-c",
            "wq",
            str(m / "g/a/zarr.json"),
        ],
        capture_output=True,
        timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((m / "g/a/zarr.json").read_text())["attributes"] == {"units": "C"}
    m.unmount()
    assert _attributes(root, "g/a") == {"units": "C"}
    np.testing.assert_array_equal(zarr.open_array(root / "g/a")[...], np.arange(24).reshape(4, 6))
    assert "scratch file" not in m.log_text()  # its swap file and backup were removed


# ------------------------------------------------------- copies out of a mount


@pytest.mark.parametrize("how", ["cp -a", "rsync -a", "tar -c"])
def test_a_group_copies_out_of_the_mount(mount, tmp_path, how):
    root = _store(tmp_path)
    out = tmp_path / "out"
    m = mount(root)
    if how == "cp -a":
        run("cp", "-a", m / "g", out)
    elif how == "rsync -a":
        run("rsync", "-a", f"{m / 'g'}/", f"{out}/")
    else:
        out.mkdir()
        run("sh", "-c", f"tar -cf - -C {m / 'g'} . | tar -xf - -C {out}")
    np.testing.assert_array_equal(np.load(out / "a/data.npy"), np.arange(24).reshape(4, 6))
    assert json.loads((out / "a/zarr.json").read_text())["attributes"] == {"units": "K"}
    m.unmount()


# ---------------------------------------------------------- modes and times


def test_chmod_chown_and_utime_are_held_by_the_mount_and_views_still_refuse_writes(mount, tmp_path):
    root = _store(tmp_path)
    before = store_snapshot(root)
    m = mount(root)
    os.chmod(m / "g/a/info", 0o664)
    os.chown(m / "g/a/data", 1234, 5678)
    os.chmod(m / "g", 0o750)
    os.utime(m / "g/a/zarr.json", ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    assert os.stat(m / "g/a/info").st_mode & 0o777 == 0o664
    assert (os.stat(m / "g/a/data").st_uid, os.stat(m / "g/a/data").st_gid) == (1234, 5678)
    assert os.stat(m / "g").st_mode & 0o777 == 0o750
    assert os.stat(m / "g/a/zarr.json").st_mtime_ns == 1_500_000_000_000_000_000
    assert_errno(errno.EACCES, open, m / "g/a/info", "r+b")
    m.unmount()
    assert store_snapshot(root) == before


def test_a_node_moved_onto_an_empty_group_keeps_its_own_modes(mount, tmp_path):
    """As rename(2) replacing an empty directory: what chmod set on the group replaced goes
    with it, and never shows on the node moved there."""
    root = _store(tmp_path)
    m = mount(root)
    os.mkdir(m / "g/e")
    os.chmod(m / "g/e", 0o500)
    os.chown(m / "g/e", 1234, 5678)
    mode, owner = os.stat(m / "g/a").st_mode, os.stat(m / "g/a").st_uid
    os.rename(m / "g/a", m / "g/e")
    assert (os.stat(m / "g/e").st_mode, os.stat(m / "g/e").st_uid) == (mode, owner)
    (m / "g/e/zarr.json").write_bytes((m / "g/e/zarr.json").read_bytes())
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(root / "g/e")[...], np.arange(24).reshape(4, 6))


def test_a_node_is_not_moved_onto_a_group_that_holds_a_scratch_file(mount, tmp_path):
    """rename(2) does not replace a directory that is not empty: the scratch file stayed,
    shown inside the node moved there."""
    root = _store(tmp_path)
    m = mount(root)
    os.mkdir(m / "g/e")
    (m / "g/e/notes.txt").write_bytes(b"keep me")
    assert_errno(errno.ENOTEMPTY, os.rename, m / "g/a", m / "g/e")
    assert (m / "g/e/notes.txt").read_bytes() == b"keep me"
    os.unlink(m / "g/e/notes.txt")
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(root / "g/a")[...], np.arange(24).reshape(4, 6))


# ---------------------------------------------------------- scratch files


def test_a_scratch_file_renamed_onto_a_chunk_is_stored_as_that_chunk(mount, tmp_path):
    root = _store(tmp_path)
    m = mount(root)
    chunk = np.full((2, 3), -5, dtype="<i2").tobytes()
    (m / "g/a/chunks/1/.1.tmp").write_bytes(chunk)
    os.rename(m / "g/a/chunks/1/.1.tmp", m / "g/a/chunks/1/1")
    assert (m / "g/a/chunks/1/1").read_bytes() == chunk
    m.unmount()
    expected = np.arange(24, dtype="<i2").reshape(4, 6)
    expected[2:4, 3:6] = -5
    np.testing.assert_array_equal(zarr.open_array(root / "g/a")[...], expected)


def test_rsync_stores_a_chunk_file_whose_name_a_second_rm_took_away(mount, tmp_path):
    """A chunk file removed twice with nothing written between loses its name (as tar
    makes it); rsync's temporary renamed onto it is stored as that chunk (it became a
    scratch file of that name, never stored)."""
    root = _store(tmp_path)
    chunk = np.full((2, 3), -5, dtype="<i2").tobytes()
    (tmp_path / "in/1").mkdir(parents=True)
    (tmp_path / "in/1/1").write_bytes(chunk)
    m = mount(root)
    for _ in range(2):
        os.unlink(m / "g/a/chunks/1/1")
    assert "1" not in os.listdir(m / "g/a/chunks/1")
    run("rsync", "-a", f"{tmp_path / 'in'}/", f"{m / 'g/a/chunks'}/")
    assert (m / "g/a/chunks/1/1").read_bytes() == chunk
    m.unmount()
    expected = np.arange(24, dtype="<i2").reshape(4, 6)
    expected[2:4, 3:6] = -5
    np.testing.assert_array_equal(zarr.open_array(root / "g/a")[...], expected)


def test_a_scratch_file_renamed_onto_zarr_json_that_is_invalid_fails_and_keeps_the_old_one(mount, tmp_path):
    root = _store(tmp_path)
    m = mount(root)
    (m / "g/a/zarr.json.new").write_text('{"zarr_format": 3, "node_type": "array"}')
    assert_errno(errno.EINVAL, os.rename, m / "g/a/zarr.json.new", m / "g/a/zarr.json")
    assert (m / "g/a/zarr.json.new").exists()
    assert json.loads((m / "g/a/zarr.json").read_text())["attributes"] == {"units": "K"}
    os.unlink(m / "g/a/zarr.json.new")
    m.unmount()
    assert _attributes(root, "g/a") == {"units": "K"}


def test_a_scratch_file_reads_back_truncates_and_survives_its_unlink_while_open(mount, tmp_path):
    root = _store(tmp_path)
    m = mount(root)
    path = m / "g/.notes.swp"
    with open(path, "w+b") as f:
        f.write(b"hello world")
        f.flush()
        assert os.listxattr(path) == []
        assert_errno(errno.ENOTSUP, os.setxattr, path, "user.zarr.units", b'"K"')
        assert path.read_bytes() == b"hello world"
        os.truncate(path, 5)
        assert os.fstat(f.fileno()).st_size == 5
        os.rename(path, m / "g/4913")
        assert not path.exists()
        os.unlink(m / "g/4913")
        assert not (m / "g/4913").exists()
        f.seek(0)
        assert f.read() == b"hello"
        f.write(b"!")
        assert os.fstat(f.fileno()).st_nlink == 0
    assert "4913" not in os.listdir(m / "g")
    m.unmount()


def test_scratch_files_left_at_unmount_are_logged_and_never_stored(mount, tmp_path):
    root = _store(tmp_path)
    before = store_snapshot(root)
    m = mount(root)
    (m / "g/sedRp5dMc").write_bytes(b"x" * 100)
    (m / "g/a/zarr.json~").write_bytes(b"{}")
    assert {"sedRp5dMc"} <= set(os.listdir(m / "g"))
    m.unmount()
    assert store_snapshot(root) == before
    lines = [line for line in m.log_text().splitlines() if "scratch file" in line]
    assert len(lines) == 1 and "/g/sedRp5dMc" in lines[0] and "/g/a/zarr.json~" in lines[0]


def test_scratch_files_of_names_that_are_not_utf8_left_at_unmount_are_logged(mount, tmp_path):
    """A name that is not UTF-8 is logged with its bytes escaped: the log line was lost
    whole (a logging error), so nobody was told the scratch files were dropped."""
    root = _store(tmp_path)
    before = store_snapshot(root)
    m = mount(root)
    (m / "g/notes").write_bytes(b"x")
    with open(os.fsencode(m / "g") + b"/caf\xe9.txt", "wb") as f:
        f.write(b"y")
    m.unmount()
    assert store_snapshot(root) == before
    lines = [line for line in m.log_text().splitlines() if "scratch file" in line]
    assert len(lines) == 1 and "/g/notes" in lines[0] and "/g/caf\\udce9.txt" in lines[0], m.log_text()


def test_a_document_renamed_away_is_copied_and_the_node_keeps_it_until_a_new_one_is_written(mount, tmp_path):
    """vim's backupcopy=no: zarr.json renamed to zarr.json~, then a new zarr.json written.
    The store never holds the array without its document."""
    root = _store(tmp_path)
    m = mount(root)
    old = (m / "g/a/zarr.json").read_bytes()
    os.rename(m / "g/a/zarr.json", m / "g/a/zarr.json~")
    assert "zarr.json" not in os.listdir(m / "g/a") and (m / "g/a/zarr.json~").read_bytes() == old
    assert (root / "g/a/zarr.json").read_bytes() == old
    assert _attributes(root, "g/a") == {"units": "K"}
    (m / "g/a/zarr.json").write_bytes(old.replace(b'"K"', b'"F"'))
    os.unlink(m / "g/a/zarr.json~")
    m.unmount()
    assert _attributes(root, "g/a") == {"units": "F"}
    np.testing.assert_array_equal(zarr.open_array(root / "g/a")[...], np.arange(24).reshape(4, 6))


def test_a_npy_named_as_a_scratch_file_fails_eexist(mount, tmp_path):
    """`g/y.npy` makes array `g/y`; where a scratch file `g/y` is, the array was made behind
    it: listed twice under one name, `g/y` the scratch file."""
    root = _store(tmp_path)
    values = _npys(tmp_path / "in", 1)
    m = mount(root)
    (m / "g/d0").write_bytes(b"notes")
    assert_errno(errno.EEXIST, shutil.copy, tmp_path / "in/d0.npy", m / "g/d0.npy")
    assert sorted(os.listdir(m / "g")) == ["a", "d0", "zarr.json"]
    os.unlink(m / "g/d0")
    shutil.copy(tmp_path / "in/d0.npy", m / "g/d0.npy")
    m.unmount()
    _check_arrays(root, "g", values)


def test_a_scratch_file_renamed_onto_the_npy_of_an_array_that_exists_replaces_the_array(mount, tmp_path):
    root = _store(tmp_path)
    values = _npys(tmp_path / "in", 2)
    m = mount(root)
    shutil.copy(tmp_path / "in/d0.npy", m / "g")
    shutil.copy(tmp_path / "in/d1.npy", m / "g/.d0.npy.tmp")
    os.rename(m / "g/.d0.npy.tmp", m / "g/d0.npy")
    assert ".d0.npy.tmp" not in os.listdir(m / "g")
    m.unmount()
    _check_arrays(root, "g", {"d0": values["d1"]})


def test_tar_x_of_an_array_over_itself_ends_and_keeps_its_values(mount, tmp_path):
    """tar removes each file before it makes it again. A chunk file stays once its chunk is
    erased (it reads as the fill value); removed again, its name goes, and tar makes it
    with the archived bytes. The views cannot be made: tar reports them and ends."""
    root = _store(tmp_path)
    m = mount(root)
    run("tar", "-cf", tmp_path / "a.tar", "-C", m / "g", "a")
    done = subprocess.run(["tar", "-xf", tmp_path / "a.tar", "-C", m / "g"], capture_output=True, timeout=60)
    assert done.returncode == 2 and b"a/info: Cannot open: File exists" in done.stderr, done.stderr
    assert b"chunks" not in done.stderr and b"zarr.json" not in done.stderr
    m.unmount()
    assert _attributes(root, "g/a") == {"units": "K"}
    np.testing.assert_array_equal(zarr.open_array(root / "g/a")[...], np.arange(24).reshape(4, 6))
