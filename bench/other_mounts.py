"""The FUSE mounts that bench/remote.py times beside zarrfs: rclone mount and s3fs-fuse on
the bench's bucket, and bench/minimal_fs.py serving a tree (the FUSE ceiling). Each is a
process that serves a mountpoint until it is unmounted."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

# the daemons this benchmark starts log into a directory of the run's own (not /var/log/zarrfs)
if "ZARRFS_LOG_DIR" not in os.environ:  # a directory made only where none was named
    os.environ["ZARRFS_LOG_DIR"] = tempfile.mkdtemp(prefix="zarrfs-bench-logs-")


@contextlib.contextmanager
def serving(start: Callable[[Path], subprocess.Popen], timeout: float = 30) -> Iterator[Path]:
    """A fresh mountpoint, served by start(mountpoint) once it is mounted; unmounted after."""
    path = Path(tempfile.mkdtemp(prefix="other-remote-"))
    process = start(path)
    try:
        deadline = time.monotonic() + timeout
        while not os.path.ismount(path):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{process.args[0]} did not mount")
            time.sleep(0.01)
        yield path
    finally:
        subprocess.run(["fusermount3", "-u", str(path)], capture_output=True)
        process.wait(10)
        with contextlib.suppress(OSError):
            path.rmdir()


def rclone(url: str, bucket_path: str, path: Path, env: dict) -> subprocess.Popen:
    env = {
        **env,
        "RCLONE_CONFIG_BENCH_TYPE": "s3",
        "RCLONE_CONFIG_BENCH_PROVIDER": "Other",
        "RCLONE_CONFIG_BENCH_ENDPOINT": url,
        "RCLONE_CONFIG_BENCH_ACCESS_KEY_ID": "testing",
        "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY": "testing",
        "RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE": "true",
    }
    env.pop("AWS_CA_BUNDLE", None)  # rclone refuses a CA bundle with its own transport
    return subprocess.Popen(
        ["rclone", "mount", f"bench:{bucket_path}", str(path), "--read-only"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def s3fs(url: str, bucket_path: str, path: Path, env: dict) -> subprocess.Popen:
    bucket, _, prefix = bucket_path.partition("/")
    passwd = Path(tempfile.mkdtemp()) / "passwd"
    passwd.write_text("testing:testing\n")
    passwd.chmod(0o600)
    return subprocess.Popen(
        [
            "s3fs",
            f"{bucket}:/{prefix}",
            str(path),
            "-f",
            "-o",
            f"url={url}",
            "-o",
            "use_path_request_style",
            "-o",
            f"passwd_file={passwd}",
            "-o",
            "ro",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def minimal_tree(tree_json: Path, path: Path) -> subprocess.Popen:
    """bench/minimal_fs.py serving the tree in `tree_json` from dictionaries."""
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("minimal_fs.py")), str(path), "--tree", str(tree_json)]
    )
