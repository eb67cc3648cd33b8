"""SIGKILL of the daemon in the middle of writes (tests/fs/mount/crash.py), again and again on
one local store: no torn chunk or document, consolidated metadata that is JSON and lists
no node whose document is missing, every write whose fsync or close returned is there,
and the next mount serves the store the killed one left (docs/reliability.md)."""

from __future__ import annotations

import random
import subprocess

import pytest

from tests.conftest import wait_for, zarrfs
from tests.fs.mount.crash import kill_during_writes, leftovers, make_store
from zarrfs.store.keys import HOST, TEMP_PREFIX

KILLS = 8  # in this run (bench/crash.py makes more)


@pytest.mark.mount
def test_writes_acknowledged_before_a_sigkill_are_kept_and_nothing_is_torn(tmp_path):
    root = tmp_path / "store.zarr"
    make_store(root)
    rng = random.Random(49)
    for kill in range(KILLS):
        problems = kill_during_writes(root, tmp_path / f"kill{kill}", rng, first=kill * 1_000_000)
        assert not problems, f"after kill {kill}:\n" + "\n".join(problems)
    # the next mount serves it, and removes the temporary files the killed ones left (one
    # at least: of a writer just gone, as a kill between a write and its rename leaves it)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (root / "a" / "c" / "0" / f"{TEMP_PREFIX}{HOST}.{gone.pid}.0123456789abcdef").write_bytes(b"half")
    (tmp_path / "last").mkdir()
    zarrfs("mount", root, tmp_path / "last")
    assert (tmp_path / "last" / "a" / "data").read_bytes()
    wait_for(lambda: not leftovers(root))
    zarrfs("umount", tmp_path / "last")
