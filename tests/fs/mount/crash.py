"""One crash of the daemon (SIGKILL, as the OOM killer or a reboot would) while a program
writes through the mount: chunk files, an array's zarr.json (and with it the consolidated
metadata), `.npy` copies that make arrays. The writer logs each write before it starts
and once its close returned; after the kill the store is checked as zarr-python and a
plain JSON parser see it. Used by tests/fs/mount/test_crash_consistency.py and bench/crash.py."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import zarr

from tests.conftest import is_mounted, pid_file, wait_for, zarrfs
from zarrfs.store.keys import TEMP_PREFIX

GRID = 4  # chunks of the array `a`, in each dimension
CHUNK = (4, 4)

_WRITER = r"""
import io, json, os, sys
import numpy as np
mnt, log = sys.argv[1], open(sys.argv[2], "a")
def note(line):
    log.write(line + "\n"); log.flush(); os.fsync(log.fileno())
v = int(sys.argv[3])
note("ready")
while True:
    v += 1
    kind = ("chunk", "chunk", "doc", "npy")[v % 4]
    try:
        if kind == "chunk":
            i, j = v % 4, (v // 4) % 4
            note(f"start chunk {i} {j} {v}")
            with open(f"{mnt}/a/chunks/{i}/{j}", "r+b") as f:
                f.write(np.full((4, 4), v, "<i4").tobytes()); f.flush(); os.fsync(f.fileno())
            note(f"done chunk {i} {j} {v}")
        elif kind == "doc":
            note(f"start doc {v}")
            doc = json.loads(open(f"{mnt}/a/zarr.json", "rb").read())
            doc["attributes"] = {"n": v}
            with open(f"{mnt}/a/zarr.json", "wb") as f:
                f.write(json.dumps(doc).encode())
            note(f"done doc {v}")
        else:
            note(f"start npy {v}")
            out = io.BytesIO(); np.save(out, np.full(8, v, "<i4"))
            with open(f"{mnt}/g/n{v}.npy", "wb") as f:
                f.write(out.getvalue())
            note(f"done npy {v}")
    except OSError as e:
        note(f"failed {kind} {v} {e.errno}")
        if e.errno in (107, 5, 2):  # ENOTCONN: the daemon is gone
            break
"""


def make_store(root: Path) -> None:
    group = zarr.open_group(str(root), mode="w")
    group.create_group("g")
    array = group.create_array("a", shape=(GRID * CHUNK[0], GRID * CHUNK[1]), chunks=CHUNK, dtype="<i4", fill_value=0)
    array[:] = 0
    zarr.consolidate_metadata(str(root))


def kill_during_writes(root: Path, work: Path, rng: random.Random, first: int) -> list[str]:
    """Mount `root`, write through it and SIGKILL the daemon after a random while; check
    the store. `first`: the writer's first value (each value written once in a run)."""
    mountpoint = work / "m"
    mountpoint.mkdir(parents=True, exist_ok=True)
    log = work / "writes.log"
    log.write_text("")
    zarrfs("mount", root, mountpoint, "--log-file", work / "zarrfs.log", "--metadata-ttl", "0")
    pid = int(Path(pid_file(str(mountpoint))).read_text())
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(mountpoint), str(log), str(first)])
    # killed once a random number of writes were logged as begun: mid-write, at a point
    # that differs from run to run (a condition polled, not a fixed sleep)
    begun = rng.randint(2, 40)
    wait_for(lambda: len(log.read_text().splitlines()) > begun or writer.poll() is not None)
    os.kill(pid, signal.SIGKILL)
    try:
        writer.wait(60)
    finally:
        writer.kill()
    zarrfs("umount", mountpoint, check=False)  # (a dead mount: cleaned up)
    assert not is_mounted(str(mountpoint))
    return check_store(root, log.read_text().splitlines())


def check_store(root: Path, lines: list[str]) -> list[str]:
    """What the store must hold after the kill, by what the writer logged."""
    problems: list[str] = []
    acknowledged: dict[str, int] = {}
    in_flight: dict[str, int] = {}
    npys = []
    for line in lines:
        if line == "ready":
            continue
        word, kind, *rest = line.split()
        what = kind if kind != "chunk" else f"chunk {rest[0]} {rest[1]}"
        value = int(rest[-1])
        if word == "start":
            in_flight[what] = value
        elif word == "done":
            acknowledged[what] = value
            if kind == "npy":
                npys.append(value)
    array = zarr.open_array(str(root / "a"), mode="r")
    for i in range(GRID):
        for j in range(GRID):
            chunk = array[i * CHUNK[0] : (i + 1) * CHUNK[0], j * CHUNK[1] : (j + 1) * CHUNK[1]]
            if len(set(chunk.ravel().tolist())) != 1:
                problems.append(f"chunk {i} {j} is torn: {chunk.ravel().tolist()}")
                continue
            got, name = int(chunk[0, 0]), f"chunk {i} {j}"
            if name in acknowledged and got not in (acknowledged[name], in_flight.get(name)):
                problems.append(f"{name} holds {got}, its last acknowledged write {acknowledged[name]}")
    documents = sorted(p for p in root.rglob("zarr.json"))
    for path in documents:
        try:
            json.loads(path.read_bytes())
        except ValueError as exc:
            problems.append(f"{path.relative_to(root)} is no JSON: {exc}")
    n = json.loads((root / "a" / "zarr.json").read_bytes()).get("attributes", {}).get("n")
    if "doc" in acknowledged and n not in (acknowledged["doc"], in_flight.get("doc")):
        problems.append(f"a's attributes say n={n}, the last acknowledged {acknowledged['doc']}")
    for value in npys:
        try:
            stored = zarr.open_array(str(root / "g" / f"n{value}"), mode="r")[...]
            if stored.tolist() != [value] * 8:
                problems.append(f"g/n{value} holds {stored.tolist()}")
        except Exception as exc:
            problems.append(f"g/n{value}, acknowledged, cannot be read: {exc}")
    consolidated = json.loads((root / "zarr.json").read_bytes()).get("consolidated_metadata") or {}
    problems.extend(
        f"consolidated metadata lists {node}, whose document is missing"
        for node in consolidated.get("metadata") or {}
        if not (root / node / "zarr.json").is_file()
    )
    return problems


def leftovers(root: Path) -> list[str]:
    """Temporary files of the local store's atomic writes left in the store."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(TEMP_PREFIX + "*"))
