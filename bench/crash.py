"""Crash consistency, at length: the daemon SIGKILLed again and again while a program
writes chunk files, an array's zarr.json and .npy copies through the mount, as
tests/fs/mount/test_crash_consistency.py does a few times (tests/fs/mount/crash.py), on one local
store. Needs root and /dev/fuse.

    python bench/crash.py [--kills 200] [--seed 1]

Prints: kills, writes acknowledged before them (each checked in the store), problems
found (torn chunks or documents, acknowledged writes lost, consolidated metadata listing
a node whose document is missing: 0 is the goal), temporary files the killed daemons
left in the store (the next mount, made at the end, must remove them)."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    from tests.conftest import wait_for, zarrfs
    from tests.fs.mount.crash import kill_during_writes, leftovers, make_store

    work = Path(tempfile.mkdtemp(prefix="zarrfs-crash-"))
    root = work / "store.zarr"
    make_store(root)
    rng = random.Random(args.seed)
    problems, acknowledged, start = 0, 0, time.monotonic()
    for kill in range(args.kills):
        found = kill_during_writes(root, work / f"kill{kill}", rng, first=kill * 1_000_000)
        log = (work / f"kill{kill}" / "writes.log").read_text()
        acknowledged += log.count("\ndone ") + log.startswith("done ")
        problems += len(found)
        for line in found:
            print(f"kill {kill}: {line}")
    left = len(leftovers(root))
    (work / "next").mkdir()
    zarrfs("mount", root, work / "next")  # the next mount removes what the killed ones left
    wait_for(lambda: not leftovers(root))
    zarrfs("umount", work / "next")
    print(f"{args.kills} kills in {time.monotonic() - start:.0f} s, {acknowledged} writes acknowledged before them "
          f"and found in the store, {problems} problems, {left} temporary files left in the store, "
          f"removed by the next mount ({work})")  # fmt: skip


if __name__ == "__main__":
    main()
