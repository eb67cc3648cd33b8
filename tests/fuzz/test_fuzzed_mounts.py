"""A sample of the fuzzer's generated stores (tests/fuzz) through real mounts: each
mounted by the command line, walked with os.walk and read file by file by this process as
any program would. Failures are the documented errno values, the daemon survives the walk
and exits cleanly at unmount, its peak memory stays bounded, and every array no mutation
touched reads as zarr-python read it."""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.conftest import is_mounted, pid_file, zarrfs
from tests.fuzz.mutations import apply, plans
from tests.fuzz.stores import make_case, write_references
from tests.fuzz.walk import ALLOWED, DEADLINE, MEMORY, READ

SAMPLE = 10
_cases = itertools.count()


def _walk(mountpoint: Path, problems: list[str]) -> None:
    def refused(error: OSError) -> None:
        if error.errno not in ALLOWED:
            problems.append(f"{error.filename}: {error}")

    for base, dirs, files in os.walk(mountpoint, onerror=refused):
        del dirs[64:]
        for name in files[:64]:
            try:
                with open(os.path.join(base, name), "rb") as f:
                    f.read(READ)
            except OSError as error:
                refused(error)


def _peak_memory(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmHWM:"))


def check_mounted(directory: Path, plan) -> None:
    kind, mutations, references = plan
    case = make_case(kind, directory)
    apply(case, mutations)
    if kind == "references":
        write_references(case, directory, references)
    mountpoint = directory / "m"
    mountpoint.mkdir()
    log = directory / "zarrfs.log"
    mounted = zarrfs("mount", case.source, mountpoint, "--log-file", log, "--timeout", "5", check=False)
    if mounted.returncode:
        assert not is_mounted(str(mountpoint)) and mounted.stderr.strip(), mounted.stderr
        return
    pid = int(Path(pid_file(str(mountpoint))).read_text())
    problems: list[str] = []
    try:
        walker = threading.Thread(target=_walk, args=(mountpoint, problems), daemon=True)
        walker.start()
        walker.join(DEADLINE)
        assert not walker.is_alive(), f"the walk did not end within {DEADLINE} s"
        for path, value in case.expected().items():
            assert (mountpoint / path / "data").read_bytes() == value, f"{path} reads other values"
        assert _peak_memory(pid) < MEMORY + (256 << 20), "the daemon's peak memory"
    finally:
        zarrfs("umount", mountpoint, check=False)
    assert not is_mounted(str(mountpoint)), "still mounted"
    assert not problems, "\n".join([*case.done, "found:", *problems])
    assert "unexpected" not in log.read_text(), log.read_text()[-2000:]


@pytest.mark.mount
@seed(49)
@settings(max_examples=SAMPLE, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(plans())
def test_generated_stores_through_a_real_mount(tmp_path_factory, plan):
    directory = tmp_path_factory.getbasetemp() / f"fuzz-mount-{next(_cases)}"
    directory.mkdir()
    try:
        check_mounted(directory, plan)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
