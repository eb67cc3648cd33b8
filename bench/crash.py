"""Crash consistency, at length: the daemon SIGKILLed again and again while a program
writes through the mount, on the four stores of tests/fs/mount/test_crash_consistency.py at
once (tests/fs/mount/crash.py: a local directory and a moto bucket, each as a Zarr hierarchy
and with --raw), for as many kills as asked. Needs root and /dev/fuse.

    python bench/crash.py [--kills 200] [--seed 1] [--lanes local,local-raw,moto,moto-raw]

Prints per store: kills, writes acknowledged before them (each checked in the store),
problems found (torn chunks, documents, nodes or keys, acknowledged writes lost,
consolidated metadata listing a node whose document is missing, what a next mount did
not clean: 0 is the goal), temporary files and multipart uploads the kills left (each
removed by the next mount), checks by zarr-python, and where a kill cycle's time goes."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

# the daemons this benchmark starts log into a directory of the run's own (not /var/log/zarrfs)
if "ZARRFS_LOG_DIR" not in os.environ:  # a directory made only where none was named
    os.environ["ZARRFS_LOG_DIR"] = tempfile.mkdtemp(prefix="zarrfs-bench-logs-")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="in all, shared by the stores as in the suite")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lanes", default="local,local-raw,moto,moto-raw")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    from tests.fs.mount.crash import KILLS, make_lane, moto_server, run_lanes

    names = args.lanes.split(",")
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    work = Path(tempfile.mkdtemp(prefix="zarrfs-crash-"))
    start = time.monotonic()
    with moto_server() as endpoint:
        lanes = [make_lane(name, work / name, endpoint if name.startswith("moto") else None) for name in names]
        share = sum(KILLS[name] for name in names)  # (shared as the suite's run shares its 200)
        run_lanes(lanes, {name: -(-args.kills * KILLS[name] // share) for name in names}, args.seed)
    seconds = time.monotonic() - start
    for lane in lanes:
        for line in lane.problems:
            print(f"{lane.name}: {line}")
        for line in lane.known:
            print(f"{lane.name}: known, documented: {line}")
        spent = ", ".join(f"{what} {s / lane.kills:.2f} s" for what, s in lane.seconds.items())
        print(f"{lane.name}: {lane.kills} kills, {lane.acknowledged} writes acknowledged before them, "
              f"{len(lane.problems)} problems, {len(lane.known)} known ones, {lane.temporaries_left} temporary files and {lane.uploads_left} "
              f"multipart uploads left (removed by the next mount), {lane.full_checks} checks by zarr-python; "
              f"per cycle: {spent}")  # fmt: skip
    kills = sum(lane.kills for lane in lanes)
    print(f"all: {kills} kills in {seconds:.0f} s, {sum(len(lane.problems) for lane in lanes)} problems ({work})")


if __name__ == "__main__":
    main()
