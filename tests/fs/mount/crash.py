"""Crashes of the daemon (SIGKILL, as the OOM killer or a reboot would) while a program
writes through the mount, on lanes that run at once, each a store of its own: a local
directory or a bucket of a moto server, mounted as a Zarr hierarchy (chunk files, an
array's zarr.json and with it the consolidated metadata, `.npy` copies that make arrays
(into a v3 group, and on a local store into a v2 dataset: with `.zattrs`),
arrays renamed with `mv`) or with `--raw` (keys of several parts, which S3 takes as
multipart uploads, small keys, keys renamed). A lane's writer is one program for all its
kill cycles; it logs each write before it starts and once its close returned. Each cycle
mounts through the command line, waits for the mount to clean what the last kill left
(temporary files, multipart uploads), starts the writer, SIGKILLs the daemon once a
random number of writes began and a random fraction of a second more, and checks the
store with a light reader (the bytes of the keys); every `FULL_EVERY`th cycle zarr-python
reads it too. Used by tests/fs/mount/test_crash_consistency.py and bench/crash.py."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import zarr

from tests.conftest import is_mounted, pid_file, wait_for, zarrfs
from tests.fs.mount.crash_checks import BIG_BYTES, KNOWN, check_decoded, check_raw
from zarrfs.store import pending_uploads
from zarrfs.store.keys import TEMP_PREFIX

GRID, CHUNK = 4, 4  # the array `a`: GRID x GRID chunks of CHUNK x CHUNK int32, stored uncompressed
BIG = BIG_BYTES // 8  # int64 values of a --raw big key: three parts of an upload
FULL_EVERY = 8  # cycles of a lane between two checks by zarr-python
# kills of each lane in the suite's run (200; ZARRFS_CRASH_KILLS another total, shared out
# alike): a moto cycle takes about three times a local one
_TOTAL = int(os.environ.get("ZARRFS_CRASH_KILLS", "200"))
KILLS = {"local": 3 * _TOTAL // 8, "local-raw": 3 * _TOTAL // 8, "moto": _TOTAL // 8, "moto-raw": _TOTAL // 8}

_WRITER = r"""
import io, json, os, sys
import numpy as np
raw, big = sys.argv[1] == "raw", int(sys.argv[2])
gone = (107, 5)  # ENOTCONN, EIO: the daemon is gone
for command in sys.stdin:
    mnt, path, v = command.split()
    v = int(v)
    log = open(path, "a")
    def note(line):
        log.write(line + "\n"); log.flush()
    def put(path, data, sync=False):
        with open(path, "wb") as f:
            f.write(data)
            if sync:
                f.flush(); os.fsync(f.fileno())
    movable = []
    if raw:
        for directory in ("big", "small"):
            os.makedirs(f"{mnt}/{directory}", exist_ok=True)
    while True:
        v += 1
        step = v % 6
        try:
            if raw and step in (0, 3):
                name = f"big/k{v % 2}"
                note(f"start big {name} {v}")
                put(f"{mnt}/{name}", np.full(big, v, "<i8").tobytes())
                note(f"done big {name} {v}")
            elif raw and step == 4 and movable:
                old = movable.pop(0); new = old.replace("/s", "/t")
                note(f"start mv {old}>{new} {v}")
                os.rename(f"{mnt}/{old}", f"{mnt}/{new}")
                note(f"done mv {old}>{new} {v}")
            elif raw:
                name = f"small/s{v}"
                note(f"start small {name} {v}")
                put(f"{mnt}/{name}", np.full(64, v, "<i8").tobytes())
                note(f"done small {name} {v}")
                movable.append(name)
            elif step in (0, 1, 5):
                name = f"a/chunks/{v % 4}/{(v // 4) % 4}"
                note(f"start chunk {name} {v}")
                with open(f"{mnt}/{name}", "r+b") as f:
                    f.write(np.full((4, 4), v, "<i4").tobytes()); f.flush(); os.fsync(f.fileno())
                note(f"done chunk {name} {v}")
            elif step == 2:
                note(f"start doc a {v}")
                doc = json.loads(open(f"{mnt}/a/zarr.json", "rb").read())
                doc["attributes"]["n"] = v
                put(f"{mnt}/a/zarr.json", json.dumps(doc).encode())
                note(f"done doc a {v}")
            elif step == 3:  # into the v3 group g, every other one into the v2 dataset d where there is one
                out = io.BytesIO(); np.save(out, np.full(8, v, "<i4"))
                group = "d" if v % 12 == 9 and os.path.isdir(f"{mnt}/d") else "g"
                note(f"start npy {group}/n{v} {v}")
                put(f"{mnt}/{group}/n{v}.npy", out.getvalue())
                note(f"done npy {group}/n{v} {v}")
                movable.append(f"{group}/n{v}")
            elif movable:
                old = movable.pop(0); new = old.replace("/n", "/m")
                note(f"start mv {old}>{new} {v}")
                os.rename(f"{mnt}/{old}", f"{mnt}/{new}")
                note(f"done mv {old}>{new} {v}")
        except OSError as e:
            note(f"failed {v} {e.errno}")
            if e.errno in gone:
                break
    log.close()
    print("stopped", flush=True)
"""


@dataclass
class Lane:
    """One store and the writer that writes into it through mount after mount."""

    name: str  # local, local-raw, moto, moto-raw
    work: Path
    endpoint: str | None = None  # the moto server's, for the moto lanes
    kills: int = 0
    acknowledged: int = 0
    problems: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)  # problems documented, not yet fixed
    uploads_left: int = 0  # multipart uploads a kill left, aborted by the next mount
    temporaries_left: int = 0  # temporary files a kill left, removed by the next mount
    full_checks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)  # mount, cleaned, writes, check

    @property
    def raw(self) -> bool:
        return self.name.endswith("-raw")

    @property
    def moto(self) -> bool:
        return self.name.startswith("moto")

    def source(self) -> list[str]:
        if not self.moto:
            return [str(self.work / "store")]
        return [f"s3://{self.bucket}/s.zarr", "--storage-option", f"endpoint_url={self.endpoint}"]

    @property
    def bucket(self) -> str:
        return f"crash-{self.name}-{os.getpid()}"

    def env(self) -> dict:
        return {**os.environ, "TMPDIR": str(self.work / "tmp"), "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(endpoint_url=self.endpoint, key="testing", secret="testing", skip_instance_cache=True)


def make_lane(name: str, work: Path, endpoint: str | None = None) -> Lane:
    """A lane with its store written: for a Zarr lane a group holding the array `a`
    (uncompressed, so that its chunks can be read as bytes) and a group `g`, with
    consolidated metadata, and on a local store a v2 group `d` as xarray writes a dataset
    (an array `t` naming its dimension, `_ARRAY_DIMENSIONS`: each array a `.npy` makes
    there names its own); for a --raw lane nothing. (Not on S3: the root's consolidated
    metadata, v3, lists no v2 node, so a mount of the bucket would not list `d`'s arrays
    until its first write, nor see `t`'s names for a `.npy` copied in before.)"""
    lane = Lane(name, work, endpoint)
    (work / "tmp").mkdir(parents=True)
    if lane.moto:
        lane.filesystem().mkdir(lane.bucket)
    if lane.raw:
        if not lane.moto:
            (work / "store").mkdir()
        return lane
    root, options = zarr_location(lane)
    group = zarr.open_group(root, mode="w", storage_options=options)
    group.create_group("g")
    a = group.create_array("a", shape=(GRID * CHUNK,) * 2, chunks=(CHUNK,) * 2, dtype="<i4", fill_value=0,
                           compressors=None)  # fmt: skip
    a[:] = 0
    zarr.consolidate_metadata(group.store)
    if lane.moto:
        return lane
    t = zarr.open_group(f"{root}/d", mode="w", zarr_format=2, storage_options=options).create_array(
        "t", shape=(8,), chunks=(8,), dtype="<i4"
    )
    t[...] = 1
    t.attrs["_ARRAY_DIMENSIONS"] = ["x"]
    return lane


def zarr_location(lane: Lane) -> tuple[str, dict | None]:
    if lane.moto:
        return f"s3://{lane.bucket}/s.zarr", {"endpoint_url": lane.endpoint, "key": "testing", "secret": "testing"}
    return str(lane.work / "store"), None


class Keys:
    """The light reader: a lane's store as keys and bytes, read beside the mount."""

    def __init__(self, lane: Lane) -> None:
        self.lane = lane
        self.fs = lane.filesystem() if lane.moto else None
        self.root = f"{lane.bucket}/s.zarr" if lane.moto else str(lane.work / "store")

    def get(self, key: str) -> bytes | None:
        try:
            if self.fs is not None:
                return self.fs.cat_file(f"{self.root}/{key}")
            return Path(self.root, key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def sample(self, key: str, part: int) -> tuple[int, bytes] | None:
        """The size of `key` and its first and last 8 bytes of each `part` bytes (what a
        value made of parts of different writes would show); None when missing."""
        try:
            if self.fs is not None:
                path = f"{self.root}/{key}"
                size = self.fs.info(path)["size"]
                ends = [(s, min(s + part, size)) for s in range(0, size, part)]
                return size, b"".join(
                    self.fs.cat_file(path, start=s, end=s + 8) + self.fs.cat_file(path, start=e - 8, end=e)
                    for s, e in ends
                )
            with open(Path(self.root, key), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                ends = [(s, min(s + part, size)) for s in range(0, size, part)]
                return size, b"".join(os.pread(f.fileno(), 8, s) + os.pread(f.fileno(), 8, e - 8) for s, e in ends)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def all(self) -> list[str]:
        if self.fs is not None:
            self.fs.invalidate_cache()
            return sorted(p[len(self.root) + 1 :] for p in self.fs.find(self.root))
        return sorted(str(p.relative_to(self.root)) for p in Path(self.root).rglob("*") if p.is_file())


def uploads(lane: Lane) -> list[str]:
    """Multipart uploads under way in a moto lane's bucket."""
    if not lane.moto:
        return []
    answer = lane.filesystem().call_s3("list_multipart_uploads", Bucket=lane.bucket)
    return [u["Key"] for u in answer.get("Uploads") or []]


def leftovers(lane: Lane) -> list[str]:
    """What killed mounts may leave and the next mount must clean: temporary files of
    the local store's atomic writes, multipart uploads, notes of uploads."""
    keys = [k for k in Keys(lane).all() if Path(k).name.startswith(TEMP_PREFIX)]
    notes = Path(lane.work / "tmp" / Path(pending_uploads.directory()).name)
    return (
        keys
        + [f"upload of {u}" for u in uploads(lane)]
        + [f"note {n.name}" for n in (notes.iterdir() if notes.is_dir() else ())]
    )


def storing(lane: Lane) -> bool:
    """Whether a big key is being stored: a multipart upload under way (S3), a temporary
    file of an atomic write (local)."""
    if lane.moto:
        return bool(uploads(lane))
    return any(p.name.startswith(TEMP_PREFIX) for p in (lane.work / "store" / "big").glob(TEMP_PREFIX + "*"))


def spooled(lane: Lane) -> list[str]:
    """Files in the lane's temporary directory other than the notes of uploads: spools are
    unnamed files, gone with the daemon."""
    return [p.name for p in (lane.work / "tmp").iterdir() if not p.name.startswith("zarrfs-uploads-")]


def cycle(lane: Lane, writer: subprocess.Popen, rng: random.Random) -> None:
    """One kill cycle of `lane`: mount, let it clean, write, SIGKILL, unmount, check."""
    n = lane.kills
    mountpoint, log = lane.work / f"m{n % 2}", lane.work / f"writes{n}.log"
    mountpoint.mkdir(exist_ok=True)
    log.write_text("")
    clock = time.monotonic()
    left = leftovers(lane)
    options = ["--raw"] if lane.raw else [] if lane.moto else ["--metadata-ttl", "0"]
    zarrfs("mount", *lane.source(), mountpoint, "--log-file", lane.work / "zarrfs.log", *options, env=lane.env())
    pid = int(Path(pid_file(str(mountpoint))).read_text())
    lane.seconds["mount"] = lane.seconds.get("mount", 0) + time.monotonic() - clock
    clock = time.monotonic()
    if left:  # the mount removes, in the background, what the last kill left
        lane.uploads_left += sum(x.startswith("upload of ") for x in left)
        lane.temporaries_left += sum(Path(x).name.startswith(TEMP_PREFIX) for x in left)
        try:
            wait_for(lambda: not leftovers(lane), timeout=60)
        except AssertionError:
            lane.problems.append(f"kill {n}: the next mount left {leftovers(lane)} of {left}")
    lane.seconds["cleaned"] = lane.seconds.get("cleaned", 0) + time.monotonic() - clock
    clock = time.monotonic()
    assert writer.stdin is not None and writer.stdout is not None
    writer.stdin.write(f"{mountpoint} {log} {n * 1_000_000}\n")
    writer.stdin.flush()
    # killed once a random number of writes were logged as begun, and a random fraction
    # of a second later: within a write, at a point that differs from cycle to cycle
    begun = rng.randint(1, 6 if lane.raw or lane.moto else 12)
    wait_for(lambda: log.read_text().count("\nstart ") + log.read_text().startswith("start ") >= begun, timeout=120)
    if lane.raw and n % 2:  # every other kill on --raw: once a big key is being stored
        with contextlib.suppress(AssertionError):
            wait_for(lambda: storing(lane), timeout=20, interval=0.01)
    else:
        time.sleep(rng.uniform(0, 0.2 if lane.raw else 0.05))
    os.kill(pid, signal.SIGKILL)
    if writer.stdout.readline() != "stopped\n":
        raise AssertionError(f"lane {lane.name}: the writer ended: {writer.poll()}")
    subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True)  # (a dead mount: cleaned up)
    assert not is_mounted(str(mountpoint))
    lane.seconds["writes"] = lane.seconds.get("writes", 0) + time.monotonic() - clock
    clock = time.monotonic()
    lines = log.read_text().splitlines()
    lane.acknowledged += sum(line.startswith("done ") for line in lines)
    check = check_raw if lane.raw else check_decoded
    full = n % FULL_EVERY == FULL_EVERY - 1
    found = check(Keys(lane), lines, zarr_location(lane) if full else None)
    lane.problems += [f"kill {n}: {p}" for p in found if not p.startswith(KNOWN)]
    lane.known += [f"kill {n}: {p[len(KNOWN) :]}" for p in found if p.startswith(KNOWN)]
    lane.full_checks += full
    lane.problems += [f"kill {n}: {name} left in the temporary directory" for name in spooled(lane)]
    lane.seconds["check"] = lane.seconds.get("check", 0) + time.monotonic() - clock
    lane.kills += 1


def run_lane(lane: Lane, kills: int, seed: int) -> None:
    """`kills` kill cycles of `lane`, then a last mount that must clean what the last left."""
    rng = random.Random(seed)
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, "raw" if lane.raw else "zarr", str(BIG)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(kills):
            cycle(lane, writer, rng)
    finally:
        writer.kill()
        writer.wait()
    last = lane.work / "last"
    last.mkdir()
    options = ["--raw"] if lane.raw else []
    zarrfs("mount", *lane.source(), last, "--log-file", lane.work / "zarrfs.log", *options, env=lane.env())
    try:
        wait_for(lambda: not leftovers(lane), timeout=60)
    except AssertionError:
        lane.problems.append(f"the last mount left {leftovers(lane)}")
    finally:
        zarrfs("umount", last)


def run_lanes(lanes: list[Lane], kills: dict[str, int], seed: int) -> None:
    """Run the lanes at once, `kills[lane.name]` cycles each."""
    failures: list[BaseException] = []

    def one(lane: Lane, i: int) -> None:
        try:
            run_lane(lane, kills[lane.name], seed + i)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(lane, i)) for i, lane in enumerate(lanes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A moto S3 server on 127.0.0.1, in a process of its own (it serves four mounts at
    once: in the test's process it would wait on the checks, and they on it)."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
        except OSError:
            return server.poll() is not None
        return True

    try:
        wait_for(up, timeout=60)
        assert server.poll() is None, "the moto server did not start"
        yield endpoint
    finally:
        server.kill()
        server.wait()
