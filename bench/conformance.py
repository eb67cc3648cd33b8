"""POSIX conformance of zarrfs mounts: pjdfstest and fsx (the unmodified suites in
tests/suites) against `--raw` of a local store, `--raw` of S3 (a moto server in this
process), and the decoded tree (`data` files, fsx -L). Prints pjdfstest's passes by
directory and fsx's operations; docs/conformance.md records a run.

    python bench/conformance.py [--targets raw-local,raw-s3,decoded] [--suites DIR]
                                [--pjdfstest-dirs chmod,utimensat] [--fsx-ops 20000]

Run as root (pjdfstest changes owners and runs calls as other users; mounts are made
with `-o allow_other`, without which the kernel lets no other user in). The suites are
built into --suites (default: a temporary directory) by tests/suites/build.sh, which
installs autoconf, automake, libtool, gcc and make where they are missing. Needs `prove`
(perl). Each target's store and mount live in a temporary directory, removed after."""

from __future__ import annotations

import argparse
import logging
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITES = REPO / "tests" / "suites"
ZARRFS = [sys.executable, "-m", "zarrfs.cli"]
TARGETS = ("raw-local", "raw-s3", "decoded")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
# fsx runs on --raw files: (name, options) — mapped reads and writes on and off, closes
# and reopens, O_DIRECT (which FUSE answers through the daemon)
FSX_RAW = (("mmap", []), ("no-mmap", ["-R", "-W"]), ("close-reopen", ["-c", "40"]), ("direct", ["-Z", "-R", "-W"]))
# the decoded tree's `data` files of these (shape, chunks, dtype): fsx -L (size fixed)
FSX_DECODED = (((4096,), (1000,), "uint8"), ((300, 200), (64, 48), "int16"), ((50, 40, 30), (7, 11, 5), "float32"))


def zarrfs(*args: str, env: dict | None = None) -> None:
    done = subprocess.run([*ZARRFS, *args], capture_output=True, text=True, cwd=REPO, env=env)
    if done.returncode != 0:
        raise SystemExit(f"zarrfs {' '.join(args)}: {done.stderr.strip()}")


@contextmanager
def mounted(source: str, mountpoint: Path, *options: str, env: dict | None = None) -> Iterator[Path]:
    mountpoint.mkdir(parents=True, exist_ok=True)
    zarrfs(
        "mount",
        source,
        str(mountpoint),
        "-o",
        "allow_other",
        "--log-file",
        str(mountpoint.parent / "zarrfs.log"),
        *options,
        env=env,
    )
    try:
        yield mountpoint
    finally:
        zarrfs("umount", str(mountpoint), env=env)


def build(suites: Path) -> tuple[Path, Path]:
    done = subprocess.run(["bash", str(SUITES / "build.sh"), str(suites)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building the suites failed:\n{done.stderr}")
    pjdfstest, fsx = done.stdout.split()
    return Path(pjdfstest), Path(fsx)


# calls that make what a key/value store cannot hold: symlinks, FIFOs, devices, sockets,
# hard links (copies here)
SPECIAL_CALLS = {
    "symlink",
    "symlinkat",
    "mkfifo",
    "mkfifoat",
    "mknod",
    "mknodat",
    "bind",
    "bindat",
    "connect",
    "connectat",
    "link",
    "linkat",
    "lchown",
    "lchmod",
    "readlink",
    "readlinkat",
}
_SPECIAL_TYPES = re.compile(r"\b(fifo|block|char|socket|symlink)\b")
_NOT_OK = re.compile(r"not ok \d+(?: - tried '(.*)', expected (\S+), got (\S+))?")


def _nlink_differs(call: str, args: list[str], expected: str, got: str) -> bool:
    """Whether a stat's link count is what failed: hard links are copies here (nlink 1)."""
    if call not in ("stat", "lstat", "fstat") or len(args) < 2 or "nlink" not in args[1].split(","):
        return False
    at = args[1].split(",").index("nlink")
    want, have = expected.split(","), got.split(",")
    return len(want) > at and len(have) > at and want[at] != have[at]


def causes(verbose: str) -> Counter:
    """pjdfstest's failures in `prove -v` output by cause: `special` (a call that makes a
    symlink, FIFO, device, socket or hard link, a call on a name such a call was to make or
    on the directory it was to make it in, on a symlink's target (changed through the link),
    a link count above 1, or a check that follows one; the other names of such a call
    follow too), or the failing call and errno.
    `# TODO` failures are not failures (prove counts them as passed)."""
    found: Counter = Counter()
    special: set[str] = set()
    after_special = False
    for line in verbose.splitlines():
        if line.endswith(".t ..") or (".t .." in line[:200] and line.startswith("/")):
            special, after_special = set(), False
        match = _NOT_OK.match(line)
        if not match or "# TODO" in line:
            continue
        command, expected, got = match.groups()
        if command is None:  # a check without a message: it follows the call before
            found["special" if after_special else "unexplained check"] += 1
            continue
        words = command.split()
        while words and words[0] in ("-u", "-g", "-U"):
            words = words[2:]
        call, args = (words[0], words[1:]) if words else ("", [])
        names = {part for arg in args for part in arg.split("/")}
        if call in SPECIAL_CALLS:
            # symlink and link name two paths (the target changes through a symlink);
            # the others one, whose directory stays empty
            paths = args[:2] if call in ("symlink", "link") else args[:1]
            special.update(part for path in paths for part in path.split("/") if part not in ("", ".", ".."))
            found["special"] += 1
            after_special = True
        elif (
            got == "ENOSYS"
            or names & special
            or _SPECIAL_TYPES.search(expected)
            or "AT_SYMLINK_NOFOLLOW" in args
            or _nlink_differs(call, args, expected, got)
        ):
            # the names this call was to make or move follow too (namegen's, not its numbers)
            special.update(name for name in names if name.startswith("pjdfstest_"))
            found["special"] += 1
            after_special = True
        else:
            found[f"{call}: expected {expected[:24]}, got {got[:24]}"] += 1
            after_special = False
    return found


def pjdfstest(binary: Path, directory: Path, only: list[str] | None) -> dict[str, tuple[int, int, Counter]]:
    """(passed, tests, failures by cause) of each of pjdfstest's directories, run in `directory`."""
    tests = binary.parent / "tests"
    results = {}
    for group in sorted(p.name for p in tests.iterdir() if p.is_dir()):
        if only and group not in only:
            continue
        work = directory / group
        work.mkdir()
        done = subprocess.run(["prove", "-v", "-r", str(tests / group)], cwd=work, capture_output=True, text=True)
        total = re.search(r"Files=\d+, Tests=(\d+)", done.stdout)
        failed = sum(int(n) for n in re.findall(r"\(Wstat: \d+ Tests: \d+ Failed: (\d+)\)", done.stdout))
        # a script that dies runs fewer tests than it planned: the rest count as failed
        missing = sum(
            int(planned) - int(ran)
            for planned, ran in re.findall(r"Bad plan\.\s+You planned (\d+) tests but ran (\d+)", done.stdout)
        )
        count = int(total.group(1)) if total else 0
        results[group] = (count - failed, count + missing, causes(done.stdout))
        print(f"    {group:<10} {count - failed:>5} of {count + missing}", flush=True)
    return results


def fsx(binary: Path, path: Path, logs: Path, ops: int, seed: int, *options: str) -> int:
    """The operations fsx ran on `path` without a mismatch (it stops at the first); its
    logs go to `logs`."""
    done = subprocess.run(
        [str(binary), "-q", "-N", str(ops), "-S", str(seed), "-P", str(logs), *options, str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"fsx {' '.join(options)} {path}: MISMATCH (exit {done.returncode})")
    found = re.search(r"All (\d+) operations completed A-OK", done.stdout)
    return int(found.group(1)) if found else ops


def run_raw(name: str, source: str, pjd: Path, fsx_bin: Path, args, tmp: Path, env: dict | None = None) -> dict:
    print(f"== {name}: zarrfs mount --raw {source}", flush=True)
    results: dict = {"pjdfstest": {}, "fsx": 0}
    with mounted(source, tmp / "mnt", "--raw", env=env) as mnt:
        if not args.no_pjdfstest:
            work = mnt / "pjdfstest"
            work.mkdir()
            started = time.monotonic()
            results["pjdfstest"] = pjdfstest(pjd, work, args.pjdfstest_dirs)
            passed = sum(r[0] for r in results["pjdfstest"].values())
            total = sum(r[1] for r in results["pjdfstest"].values())
            print(
                f"  pjdfstest: {passed} of {total} ({time.monotonic() - started:.0f} s); failures by cause:", flush=True
            )
            failures = sum((r[2] for r in results["pjdfstest"].values()), Counter())
            for cause, n in failures.most_common():
                print(f"    {n:>5}  {cause}", flush=True)
        for i, (label, options) in enumerate(FSX_RAW):
            ops = fsx(fsx_bin, mnt / f"fsx-{label}", tmp, args.fsx_ops, i + 1, *options)
            results["fsx"] += ops
            print(f"  fsx {label}: {ops} operations, no mismatch", flush=True)
    return results


def run_decoded(fsx_bin: Path, args, tmp: Path) -> dict:
    import numpy as np
    import zarr

    print("== decoded: zarrfs mount (the decoded tree), fsx -L on data files", flush=True)
    root = tmp / "store.zarr"
    group = zarr.open_group(root, mode="w")
    for i, (shape, chunks, dtype) in enumerate(FSX_DECODED):
        array = group.create_array(f"a{i}", shape=shape, chunks=chunks, dtype=dtype, fill_value=0)
        array[...] = np.random.default_rng(i).integers(0, 100, size=shape).astype(dtype)
    results = {"pjdfstest": {}, "fsx": 0}
    with mounted(str(root), tmp / "mnt") as mnt:
        for i, (shape, chunks, dtype) in enumerate(FSX_DECODED):
            size = (mnt / f"a{i}" / "data").stat().st_size
            ops = fsx(fsx_bin, mnt / f"a{i}" / "data", tmp, args.fsx_ops // 2, i + 1, "-L", "-o", str(min(3000, size)))
            results["fsx"] += ops
            print(f"  fsx -L a{i} {shape} chunks {chunks} {dtype}: {ops} operations, no mismatch", flush=True)
    return results


@contextmanager
def moto_bucket() -> Iterator[tuple[str, str]]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    os.environ.update(CREDENTIALS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="conformance")
        yield endpoint, "conformance"
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--suites", type=Path, help="where the suites are (or are built); default: a temporary one")
    parser.add_argument("--pjdfstest-dirs", type=lambda s: s.split(","), help="only these of pjdfstest's directories")
    parser.add_argument("--no-pjdfstest", action="store_true")
    parser.add_argument("--fsx-ops", type=int, default=20_000, help="operations per fsx run (decoded: half)")
    args = parser.parse_args()
    targets = args.targets.split(",")
    if os.geteuid() != 0:
        raise SystemExit("run as root: pjdfstest changes owners and acts as other users")
    for tool in ("prove", "fusermount3"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed")
    print(f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} CPUs, Linux {platform.release()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="zarrfs-conformance-") as scratch:
        suites = args.suites or Path(scratch) / "suites"
        pjd, fsx_bin = build(suites)
        summary = {}
        for target in targets:
            tmp = Path(tempfile.mkdtemp(prefix=f"{target}-", dir=scratch))
            if target == "raw-local":
                (tmp / "store").mkdir()
                summary[target] = run_raw(target, str(tmp / "store"), pjd, fsx_bin, args, tmp)
            elif target == "raw-s3":
                with moto_bucket() as (endpoint, bucket):
                    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint}
                    summary[target] = run_raw(target, f"s3://{bucket}/raw", pjd, fsx_bin, args, tmp, env)
            elif target == "decoded":
                summary[target] = run_decoded(fsx_bin, args, tmp)
            else:
                raise SystemExit(f"unknown target {target!r} (known: {', '.join(TARGETS)})")
    print("== summary")
    for target, result in summary.items():
        passed = sum(r[0] for r in result["pjdfstest"].values())
        total = sum(r[1] for r in result["pjdfstest"].values())
        print(f"  {target:<10} pjdfstest {passed} of {total}; fsx {result['fsx']} operations, no mismatch")
    print(f"  fsx in all: {sum(r['fsx'] for r in summary.values())} operations")


if __name__ == "__main__":
    main()
