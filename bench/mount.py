"""How soon `zarrfs mount` of a local hierarchy is ready, against another checkout of
zarrfs (say, main) in the same run: the runs alternate A B A B …, each side cold-started
in a fresh interpreter; medians, and the ratio other ÷ this (above 1: this one is faster).

    python bench/mount.py [--other ../main] [--runs 10] [--source DIR]

Two figures per side:
  mount  wall seconds of `zarrfs mount SOURCE MOUNTPOINT` until it returns (the daemon
         has answered the kernel's first request); the unmount is not timed
  cpu    CPU seconds (user + system, all threads) that `zarrfs mount -f` has used when
         it tells the service manager READY=1 (NOTIFY_SOCKET): the work on the way to
         "ready", which a loaded machine stretches less than the wall time
and, for reference, `python -c pass` (the interpreter's own start-up) on this machine.
Python runs with bytecode caches (PYTHONPYCACHEPREFIX in a temporary directory), as an
installed package has them. SOURCE defaults to the demo hierarchy (`zarrfs demo`)."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def environment(checkout: Path, cache: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONPYCACHEPREFIX": str(cache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def zarrfs(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    # run from / : `python -m` puts the working directory before PYTHONPATH
    result = subprocess.run(
        [sys.executable, "-m", "zarrfs.cli", *args], env=env, capture_output=True, text=True, cwd="/"
    )
    if check and result.returncode != 0:
        raise SystemExit(f"zarrfs {' '.join(args)}: {result.stderr.strip()}")
    return result


def mount_seconds(env: dict, source: str, work: Path) -> float:
    mountpoint = Path(tempfile.mkdtemp(dir=work))
    start = time.perf_counter()
    zarrfs(env, "mount", source, str(mountpoint), "--log-file", str(work / "zarrfs.log"))
    elapsed = time.perf_counter() - start
    zarrfs(env, "umount", str(mountpoint))
    mountpoint.rmdir()
    return elapsed


def cpu_until_ready(env: dict, source: str, work: Path) -> float:
    mountpoint = Path(tempfile.mkdtemp(dir=work))
    address = str(work / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(60)
        daemon = subprocess.Popen(
            [sys.executable, "-m", "zarrfs.cli", "mount", "-f", source, str(mountpoint)],
            env={**env, "NOTIFY_SOCKET": address},
            stderr=subprocess.DEVNULL,
            cwd="/",
        )
        try:
            while sock.recv(256) != b"READY=1":
                pass
            with open(f"/proc/{daemon.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
        finally:
            zarrfs(env, "umount", str(mountpoint), check=False)
            daemon.wait(60)
    os.unlink(address)
    mountpoint.rmdir()
    return cpu


def python_start() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", type=Path, help="another zarrfs checkout to compare with")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--source", help="a local hierarchy (default: the demo hierarchy)")
    args = parser.parse_args()
    sides = {"this": REPO} | ({"other": args.other.resolve()} if args.other else {})
    with tempfile.TemporaryDirectory(prefix="zarrfs-mount-bench-") as tmp:
        work = Path(tmp)
        envs = {name: environment(path, work / f"pycache-{name}") for name, path in sides.items()}
        source = args.source or str(work / "demo.zarr")
        if not args.source:
            zarrfs(envs["this"], "demo", source)
        figures: dict[str, dict[str, list[float]]] = {name: {"mount": [], "cpu": []} for name in sides}
        starts = []
        for run in range(args.runs + 1):  # the first round warms the caches and is not counted
            order = list(sides) if run % 2 else list(sides)[::-1]
            for name in order:
                mount = mount_seconds(envs[name], source, work)
                cpu = cpu_until_ready(envs[name], source, work)
                if run:
                    figures[name]["mount"].append(mount)
                    figures[name]["cpu"].append(cpu)
            starts.append(python_start())
    print(f"python -c pass: {statistics.median(starts[1:]):.3f} s (median of {args.runs})")
    for figure in ("mount", "cpu"):
        this = figures["this"][figure]
        line = f"{figure:6s} this {statistics.median(this):.3f} s (min {min(this):.3f})"
        if "other" in figures:
            other = figures["other"][figure]
            ratios = [o / t for o, t in zip(other, this)]
            line += (
                f"   other {statistics.median(other):.3f} s (min {min(other):.3f})"
                f"   other/this: median of pairs {statistics.median(ratios):.2f}"
            )
        print(line)


if __name__ == "__main__":
    main()
