"""Temporary files of the local store's atomic writes that a killed writer left: the next
mount removes those of processes of this host that are gone, and any a day old; a live
writer's, or another host's recent one, stay (zarrfs/store/stale_temporaries.py)."""

from __future__ import annotations

import os
import subprocess
import time

from tests.conftest import wait_for
from zarrfs.store import LocalStore
from zarrfs.store.keys import HOST, TEMP_PREFIX, temporary_name


def test_temporaries_of_gone_writers_are_removed_and_others_kept(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / "a" / "c" / "0").mkdir(parents=True)
    (tmp_path / "a" / "c" / "0" / "0").write_bytes(b"chunk")
    names = {
        "a/c/0/" + f"{TEMP_PREFIX}{HOST}.{gone.pid}.0123456789abcdef": False,  # its writer is gone
        "a/" + temporary_name(): True,  # this process: alive
        f"{TEMP_PREFIX}elsewhere.1.0123456789abcdef": True,  # another host's, recent
        f"a/c/{TEMP_PREFIX}elsewhere.1.fedcba9876543210": False,  # another host's, two days old
        f"{TEMP_PREFIX}0123456789abcdef": False,  # the old naming, two days old
    }
    for name in names:
        (tmp_path / name).write_bytes(b"half a chunk")
    for name in list(names)[3:]:
        old = time.time() - 2 * 24 * 3600
        os.utime(tmp_path / name, (old, old))
    assert LocalStore(str(tmp_path)).remove_stale_temporaries() == 3
    assert {name: (tmp_path / name).exists() for name in names} == names
    assert (tmp_path / "a" / "c" / "0" / "0").read_bytes() == b"chunk"


def test_a_temporary_of_a_killed_writer_not_yet_reaped_is_removed(tmp_path):
    """A killed writer nobody has reaped yet stays a zombie: it
    writes nothing more, so its temporary file is stale."""
    ended = subprocess.Popen(["true"])  # not waited for: a zombie once it ends
    try:
        wait_for(lambda: _state(ended.pid) == "Z")
        name = f"{TEMP_PREFIX}{HOST}.{ended.pid}.0123456789abcdef"
        (tmp_path / name).write_bytes(b"half a chunk")
        assert LocalStore(str(tmp_path)).remove_stale_temporaries() == 1
        assert not (tmp_path / name).exists()
    finally:
        ended.wait()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0]


def test_temporary_names_are_reserved_and_never_listed(tmp_path):
    store = LocalStore(str(tmp_path))
    store.set("a/b", b"x")
    (tmp_path / "a" / temporary_name()).write_bytes(b"y")
    assert store.list_prefix("") == ["a/b"]
