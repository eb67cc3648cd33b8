"""Read throughput of passthrough mode (`zarrfs mount --raw`) on S3 against s3fs directly.

    python bench/raw.py [--size-mib 256] [--random-reads 48] [--random-kib 256] [--repeat 2]
                        [--endpoint URL]

Starts a moto S3 server in its own process (or uses --endpoint, with credentials from the
usual AWS variables), uploads one object of --size-mib random bytes and mounts its
prefix with `zarrfs mount --raw`. Then reads it: sequentially in 1 MiB reads, and at
--random-reads random offsets --random-kib each, through the mount (kernel page cache
dropped before every run, readahead off for the random reads) and with s3fs directly
(its file object for the sequential read, one ranged get per random read; once with its
defaults, once tuned as zarrfs tunes it: max_concurrency=1). Prints MB/s,
best of --repeat, and the ratio mount / s3fs. `rclone mount` is measured too when rclone
is installed."""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the daemons this benchmark starts log into a directory of the run's own (not /var/log/zarrfs)
if "ZARRFS_LOG_DIR" not in os.environ:  # a directory made only where none was named
    os.environ["ZARRFS_LOG_DIR"] = tempfile.mkdtemp(prefix="zarrfs-bench-logs-")

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ZARRFS = [sys.executable, "-m", "zarrfs.cli"]
BUCKET = "zarrfs-bench"
KEY = "raw/object.bin"
READ = 1 << 20
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise SystemExit("moto_server did not start") from None
            time.sleep(0.1)


def best(repeat: int, run) -> float:
    """Fastest of `repeat` runs of run() -> seconds."""
    return min(run() for _ in range(repeat))


def sequential_file(path: Path, size: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read from the store, not the cache
        start = time.perf_counter()
        total = 0
        while chunk := os.read(fd, READ):
            total += len(chunk)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    assert total == size, (total, size)
    return elapsed


def random_file(path: Path, offsets: list[int], length: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no kernel readahead
        start = time.perf_counter()
        for offset in offsets:
            os.pread(fd, length, offset)
        return time.perf_counter() - start
    finally:
        os.close(fd)


def sequential_s3fs(fs, path: str, size: int) -> float:
    start = time.perf_counter()
    total = 0
    with fs.open(path, "rb") as f:
        while chunk := f.read(READ):
            total += len(chunk)
    elapsed = time.perf_counter() - start
    assert total == size
    return elapsed


def random_s3fs(fs, path: str, offsets: list[int], length: int) -> float:
    start = time.perf_counter()
    for offset in offsets:
        fs.cat_file(path, start=offset, end=offset + length)
    return time.perf_counter() - start


def mount_rclone(endpoint: str, mountpoint: Path) -> subprocess.Popen | None:
    rclone = shutil.which("rclone")
    if rclone is None:
        return None
    env = dict(
        os.environ,
        RCLONE_CONFIG_BENCH_TYPE="s3",
        RCLONE_CONFIG_BENCH_PROVIDER="Other",
        RCLONE_CONFIG_BENCH_ENDPOINT=endpoint,
        RCLONE_CONFIG_BENCH_ENV_AUTH="true",
    )
    process = subprocess.Popen(
        [rclone, "mount", f"bench:{BUCKET}/raw", str(mountpoint), "--read-only"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not os.path.ismount(mountpoint):
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            return None
        time.sleep(0.1)
    return process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--random-reads", type=int, default=48)
    parser.add_argument("--random-kib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--endpoint", help="an S3 endpoint to use instead of a moto server")
    args = parser.parse_args()

    for name, value in CREDENTIALS.items():
        os.environ.setdefault(name, value)
    server, endpoint = (None, args.endpoint) if args.endpoint else start_moto()
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True, use_listings_cache=False)
    size = args.size_mib << 20
    length = args.random_kib << 10
    path = f"{BUCKET}/{KEY}"
    work = Path(tempfile.mkdtemp(prefix="zarrfs-bench-"))
    mountpoint, rclone_point = work / "raw", work / "rclone"
    mountpoint.mkdir()
    rclone_point.mkdir()
    rclone = None
    try:
        if not fs.exists(BUCKET):
            fs.mkdir(BUCKET)
        value = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes()
        print(f"uploading {args.size_mib} MiB to {endpoint} ...", flush=True)
        fs.pipe(path, value)
        digest = hashlib.sha256(value).digest()
        del value
        rng = random.Random(1)
        offsets = [rng.randrange(size - length) for _ in range(args.random_reads)]

        subprocess.run(
            [
                *ZARRFS,
                "mount",
                "--raw",
                f"s3://{BUCKET}/raw",
                str(mountpoint),
                "--storage-option",
                f"endpoint_url={endpoint}",
                "--read-only",
            ],
            check=True,
            cwd=REPO,
        )
        target = mountpoint / "object.bin"
        with open(target, "rb") as f:
            assert hashlib.sha256(f.read()).digest() == digest, "the mount returned other bytes"

        results: dict[str, tuple[float, float]] = {}
        # s3fs as a user gets it, and as zarrfs configures it (no HEAD before each get)
        tuned = s3fs.S3FileSystem(
            endpoint_url=endpoint, skip_instance_cache=True, use_listings_cache=False, max_concurrency=1
        )
        for name, client in (("s3fs", fs), ("s3fs, tuned", tuned)):
            results[name] = (
                best(args.repeat, lambda: sequential_s3fs(client, path, size)),
                best(args.repeat, lambda: random_s3fs(client, path, offsets, length)),
            )
        results["zarrfs --raw"] = (
            best(args.repeat, lambda: sequential_file(target, size)),
            best(args.repeat, lambda: random_file(target, offsets, length)),
        )
        rclone = mount_rclone(endpoint, rclone_point)
        if rclone is not None:
            results["rclone mount"] = (
                best(args.repeat, lambda: sequential_file(rclone_point / "object.bin", size)),
                best(args.repeat, lambda: random_file(rclone_point / "object.bin", offsets, length)),
            )

        random_bytes = args.random_reads * length
        print(
            f"\nobject {args.size_mib} MiB; sequential: {READ >> 10} KiB reads; "
            f"random: {args.random_reads} reads of {args.random_kib} KiB; best of {args.repeat}"
        )
        print(f"{'':14} {'sequential MB/s':>16} {'random MB/s':>12} {'random reads/s':>15}")
        for name, (seq, rnd) in results.items():
            print(
                f"{name:14} {size / seq / 1e6:16.1f} {random_bytes / rnd / 1e6:12.1f} {args.random_reads / rnd:15.1f}"
            )
        ours = results["zarrfs --raw"]
        print()
        for name, (seq, rnd) in results.items():
            if name != "zarrfs --raw":
                print(f"ratio zarrfs --raw / {name}: sequential {seq / ours[0]:.2f}, random {rnd / ours[1]:.2f}")
        if rclone is None:
            print("rclone mount: not measured (rclone is not installed)")
        return 0
    finally:
        if os.path.ismount(mountpoint):
            subprocess.run([*ZARRFS, "umount", str(mountpoint)], cwd=REPO)
        if rclone is not None:
            subprocess.run(["fusermount3", "-u", str(rclone_point)])
            rclone.wait(timeout=30)
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
