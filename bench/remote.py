"""zarrfs on S3 against the libraries and mounts a user would otherwise pick, behind a
proxy that adds a round trip to every request.

    python bench/remote.py [--size-mib 512] [--runs 3] [--latency 0.02] [--only dd,find,...]

A moto S3 server that serves ranged GETs properly (bench/moto_ranges.py) runs in its own
process, behind a latency proxy on 127.0.0.1 (bench/s3proxy.py, its own process too)
that adds --latency seconds to every request and counts them. Scenarios (each side run
cold, the sides interleaved, --runs times; medians):

  dd         `dd` of `data` (float32, 4 MiB zstd chunks) | tensorstore read() | zarr-python arr[:]
             (zarrfs runs as `zarrfs` on its default S3 client, obstore, and as `zarrfs-s3fs`
             with --s3-backend s3fs, in dd, dd-shard, random, random-shard, raw-dd, mount)
  dd-shard   the same array sharded (32 MiB shards, 1 MiB inner chunks)
  dd-cached  `dd` of `data` by a first mount with --cache-dir (cold) | a second mount on the
             same cache directory (its files dropped from the page cache) | a mount without it
  random     50 random chunk files | the same regions read one by one
  random-shard  50 random inner chunks of the sharded array
  find       `find` over 200 arrays in 20 groups, consolidated | zarr-python members() |
             the FUSE ceiling: the same tree (walked once on a zarrfs mount, untimed) served
             from dictionaries by bench/minimal_fs.py | a plain directory of that shape
             on local disk, in the page cache (the floor for any filesystem)
  find-never the same without consolidated metadata (`--consolidated never`)
  find-large `find -maxdepth 2` (its groups and arrays) of a hierarchy of 1,000 groups of 20
             arrays that its root's consolidated metadata alone describes (bench/consolidated.py,
             9.5 MB) | zarr-python members() with consolidated metadata
  raw-dd     `--raw` dd of a 256 MiB object | rclone mount, s3fs-fuse (when installed)
  raw-find   `--raw` find over the 200-array tree's keys | rclone mount, s3fs-fuse
  mount      `zarrfs mount` until ready | rclone mount until its root answers

Ratios are the other side's time over zarrfs's: below 1 means zarrfs is slower; a
`ratios over zarrfs-s3fs` line gives them over the s3fs side's time."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
import consolidated as consolidated_bench  # noqa: E402
import find as find_bench  # noqa: E402
import minimal_fs  # noqa: E402
import other_mounts  # noqa: E402
from accounting import ThreadClock, daemon_of  # noqa: E402

ZARRFS = [sys.executable, "-m", "zarrfs.cli"]
BUCKET = "zarrfs-remote-bench"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
ENV = {**os.environ, **CREDENTIALS, "PYTHONPATH": str(REPO)}
RAW_MIB = 256  # the --raw object's size
BENCH = "main (bench)"  # this process's first thread, which runs the libraries' reads
CLOCKS: list[ThreadClock] = []  # the CPU of the side run last, by thread (zarrfs: its daemon)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Servers:
    """moto (ranges served properly) and the latency proxy, each in its own process."""

    def __init__(self, latency: float) -> None:
        port = free_port()
        self.moto = subprocess.Popen(
            [sys.executable, str(REPO / "bench/moto_ranges.py"), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=ENV,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("moto did not start") from None
                time.sleep(0.1)
        self.direct = f"http://127.0.0.1:{port}"
        self.proxy = subprocess.Popen(
            [sys.executable, str(REPO / "bench/s3proxy.py"), self.direct, str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        self.url = self.proxy.stdout.readline().strip()

    def _ask(self, line: str) -> dict:
        self.proxy.stdin.write(line + "\n")
        self.proxy.stdin.flush()
        return json.loads(self.proxy.stdout.readline())

    def reset(self) -> None:
        self._ask("reset")

    def counts(self) -> dict:
        return self._ask("counts")

    def log(self) -> list:
        """The requests since the last reset: [kind, path, range] each."""
        return self._ask("log")

    def spans(self) -> list:
        """When each request since the last reset arrived and was answered: [start, end]."""
        return self._ask("spans")

    def close(self) -> None:
        self.proxy.kill()
        self.moto.kill()


def s3fs_for(url: str):
    import s3fs

    return s3fs.S3FileSystem(
        endpoint_url=url, key="testing", secret="testing", skip_instance_cache=True, use_listings_cache=False
    )


# ---------------------------------------------------------------------- data
def upload(servers: Servers, size_mib: int, work: Path, chosen: list[str]) -> dict:
    """What the `chosen` scenarios read (all of it when none is chosen)."""
    import zarr

    fs = s3fs_for(servers.direct)
    fs.mkdir(BUCKET)
    n = (size_mib << 20) // 4
    side = 1 << 10
    shape = (n // side, side)
    facts = {"shape": shape, "plain_chunk": (1 << 10, side), "inner_chunk": (256, side)}

    def wanted(*names: str) -> bool:
        return not chosen or any(name in chosen for name in names)

    if wanted("find", "find-never", "raw-find"):
        many = work / "many.zarr"
        find_bench.build(many)
        fs.put(str(many), f"{BUCKET}/many.zarr", recursive=True)
    if wanted("find-large"):
        consolidated_bench.build(work / "large", 1000, 20)  # the root's document alone
        fs.put(str(work / "large" / "many.zarr" / "zarr.json"), f"{BUCKET}/large.zarr/zarr.json")
    if wanted("raw-dd"):
        fs.pipe(f"{BUCKET}/raw/object.bin", os.urandom(RAW_MIB << 20))
    if not wanted("dd", "dd-shard", "dd-cached", "random", "random-shard", "mount"):
        return facts
    rng = np.random.default_rng(0)
    # smooth values with noise in the low bits: zstd gets about 2:1, as on real data
    values = (np.sin(np.arange(n, dtype="float32") / 1e4) + rng.random(n, dtype="float32") * 1e-3).reshape(shape)
    root = work / "h.zarr"
    g = zarr.open_group(str(root), mode="w")
    zstd = zarr.codecs.ZstdCodec(level=3)
    plain = g.create_array("plain", shape=shape, chunks=(1 << 10, side), dtype="float32", compressors=zstd)
    plain[...] = values
    sharded = g.create_array(
        "sharded", shape=shape, chunks=(256, side), shards=(8 << 10, side), dtype="float32", compressors=zstd
    )
    sharded[...] = values
    fs.put(str(root), f"{BUCKET}/h.zarr", recursive=True)
    return facts


# ---------------------------------------------------------------------- sides
class Mounted:
    def __init__(self, servers: Servers, source: str, *options: str) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="zarrfs-remote-"))
        subprocess.run(
            [
                *ZARRFS,
                "mount",
                source,
                str(self.path),
                "--read-only",
                "--storage-option",
                f"endpoint_url={servers.url}",
                *options,
            ],
            check=True,
            env=ENV,
            capture_output=True,
        )

    def close(self) -> None:
        subprocess.run([*ZARRFS, "umount", str(self.path)], env=ENV, capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


READERS: list[dict] = []  # a zarrfs side's decode-ahead readers (its /.zarrfs/stats), the last run's


def readers_of(path: Path) -> dict:
    """How many readers decode-ahead followed (one `dd` should be one) and how many of them
    replaced another, from the mount's counters; empty where it has none."""
    try:
        stats = json.loads((path / ".zarrfs" / "stats").read_text())
    except (OSError, ValueError):
        return {}
    return {k: stats[k] for k in ("ahead_readers", "ahead_readers_replaced", "store_requests") if k in stats}


def zarrfs_side(servers: Servers, source: str, action, *options: str):
    def run() -> float:
        mounted = Mounted(servers, source, *options)
        try:
            servers.reset()
            clock = ThreadClock(daemon_of(mounted.path)).start()
            seconds = timed(lambda: action(mounted.path))
            CLOCKS.append(clock.stop())
            READERS.append(readers_of(mounted.path))
            return seconds
        finally:
            mounted.close()

    return run


class CacheSessions:
    """The two sessions of dd-cached: the first mounts with a fresh --cache-dir, the second
    on the directory the first filled, whose files are dropped from the page cache first."""

    def __init__(self, servers: Servers, source: str, name: str) -> None:
        self.servers, self.source, self.name = servers, source, name
        self.directory: Path | None = None

    def first(self) -> float:
        self.directory = Path(tempfile.mkdtemp(prefix="zarrfs-disk-cache-"))
        return zarrfs_side(self.servers, self.source, lambda p: dd(p / self.name), "--cache-dir", str(self.directory))()

    def second(self) -> float:
        try:
            for file in self.directory.rglob("*@*"):
                fd = os.open(file, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
            return zarrfs_side(
                self.servers, self.source, lambda p: dd(p / self.name), "--cache-dir", str(self.directory)
            )()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


class SameTree:
    """The tree a zarrfs mount of `source` shows, taken once, untimed, by walking such a
    mount: `find` on it served by bench/minimal_fs.py (the FUSE ceiling), and on a plain
    directory of its shape (the page cache's floor)."""

    def __init__(self, servers: Servers, work: Path, source: str, *options: str) -> None:
        self.servers, self.source, self.options = servers, source, options
        self.work = Path(tempfile.mkdtemp(prefix="tree-", dir=work))
        self.json = self.work / "tree.json"

    def _taken(self) -> None:
        if not self.json.exists():
            mounted = Mounted(self.servers, self.source, *self.options)
            try:
                tree = minimal_fs.walk(mounted.path)
            finally:
                mounted.close()
            minimal_fs.build(tree, self.work / "plain")
            self.json.write_text(json.dumps(tree))

    def ceiling(self) -> float:
        self._taken()
        started: list[subprocess.Popen] = []

        def start(path: Path) -> subprocess.Popen:
            started.append(other_mounts.minimal_tree(self.json, path))
            return started[-1]

        with other_mounts.serving(start) as path:
            self.servers.reset()
            # its CPU too: the same FUSE requests as zarrfs's, answered from dictionaries
            clock = ThreadClock(started[-1].pid, "main (FUSE loop)").start()
            seconds = timed(lambda: find(path))
            CLOCKS.append(clock.stop())
            return seconds

    def plain(self) -> float:
        self._taken()
        self.servers.reset()
        return timed(lambda: find(self.work / "plain"))


def dd(path: Path) -> None:
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M", "status=none"], check=True)


def ts_array(servers: Servers, name: str):
    import tensorstore as ts

    return ts.open(
        {
            "driver": "zarr3",
            "kvstore": {
                "driver": "s3",
                "bucket": BUCKET,
                "path": f"h.zarr/{name}/",
                "endpoint": servers.url,
                "aws_region": "us-east-1",
            },
        },
        read=True,
    ).result()


def zarr_array(servers: Servers, name: str):
    import zarr

    return zarr.open_array(
        f"s3://{BUCKET}/h.zarr/{name}",
        mode="r",
        storage_options={"endpoint_url": servers.url, "key": "testing", "secret": "testing"},
    )


def library_side(servers: Servers, opener, name: str, action):
    def run() -> float:
        # opening (one metadata read) is timed, as zarrfs's side looks the array up and
        # opens it within its time; the library itself is imported before
        servers.reset()
        clock = ThreadClock(os.getpid(), BENCH).start()
        seconds = timed(lambda: action(opener(servers, name)))
        CLOCKS.append(clock.stop())
        return seconds

    return run


def regions(facts: dict, chunk: tuple[int, int], count: int = 50) -> list[tuple[int, int]]:
    grid = [s // c for s, c in zip(facts["shape"], chunk)]
    picks = random.Random(1).sample(range(grid[0] * grid[1]), min(count, grid[0] * grid[1]))
    return [divmod(p, grid[1]) for p in picks]


def read_files(paths: list[Path]) -> None:
    for path in paths:
        path.read_bytes()


# ---------------------------------------------------------------------- scenarios
def scenarios(servers: Servers, facts: dict, work: Path) -> dict:
    src = f"s3://{BUCKET}/h.zarr"
    many = f"s3://{BUCKET}/many.zarr"
    plain_regions = regions(facts, facts["plain_chunk"])
    inner_regions = regions(facts, facts["inner_chunk"])

    def library_regions(chunk, picks):
        def read(array) -> None:
            for i, j in picks:
                region = (slice(i * chunk[0], (i + 1) * chunk[0]), slice(j * chunk[1], (j + 1) * chunk[1]))
                if hasattr(array, "read"):
                    array[region].read().result()
                else:
                    array[region]

        return read

    def zarr_members(consolidated: bool, source: str = many):
        def run() -> float:
            import zarr

            servers.reset()
            clock = ThreadClock(os.getpid(), BENCH).start()
            start = time.perf_counter()
            group = zarr.open_group(
                source,
                mode="r",
                use_consolidated=consolidated,
                storage_options={"endpoint_url": servers.url, "key": "testing", "secret": "testing"},
            )
            list(group.members(max_depth=None))
            seconds = time.perf_counter() - start
            CLOCKS.append(clock.stop())
            return seconds

        return run

    def both_clients(source: str, action, *options: str) -> list:
        return [
            ("zarrfs", zarrfs_side(servers, source, action, *options)),
            ("zarrfs-s3fs", zarrfs_side(servers, source, action, *options, "--s3-backend", "s3fs")),
        ]

    cached = CacheSessions(servers, src, "plain/data")
    tree, tree_never = SameTree(servers, work, many), SameTree(servers, work, many, "--consolidated", "never")
    out = {
        "dd-cached": [
            ("zarrfs", cached.first),
            ("second", cached.second),
            ("no-cache", zarrfs_side(servers, src, lambda p: dd(p / "plain/data"))),
        ],
        "dd": [
            *both_clients(src, lambda p: dd(p / "plain/data")),
            ("tensorstore", library_side(servers, ts_array, "plain", lambda a: a.read().result())),
            ("zarr-python", library_side(servers, zarr_array, "plain", lambda a: a[...])),
        ],
        "dd-shard": [
            *both_clients(src, lambda p: dd(p / "sharded/data")),
            ("tensorstore", library_side(servers, ts_array, "sharded", lambda a: a.read().result())),
            ("zarr-python", library_side(servers, zarr_array, "sharded", lambda a: a[...])),
        ],
        "random": [
            *both_clients(src, lambda p: read_files([p / f"plain/chunks/{i}/{j}" for i, j in plain_regions])),
            (
                "tensorstore",
                library_side(servers, ts_array, "plain", library_regions(facts["plain_chunk"], plain_regions)),
            ),
            (
                "zarr-python",
                library_side(servers, zarr_array, "plain", library_regions(facts["plain_chunk"], plain_regions)),
            ),
        ],
        "random-shard": [
            *both_clients(src, lambda p: read_files([p / f"sharded/chunks/{i}/{j}" for i, j in inner_regions])),
            (
                "tensorstore",
                library_side(servers, ts_array, "sharded", library_regions(facts["inner_chunk"], inner_regions)),
            ),
            (
                "zarr-python",
                library_side(servers, zarr_array, "sharded", library_regions(facts["inner_chunk"], inner_regions)),
            ),
        ],
        "find": [
            ("zarrfs", zarrfs_side(servers, many, find)),
            ("zarr-python", zarr_members(True)),
            ("FUSE ceiling", tree.ceiling),
            ("plain dir", tree.plain),
        ],
        "find-never": [
            ("zarrfs", zarrfs_side(servers, many, find, "--consolidated", "never")),
            ("zarr-python", zarr_members(False)),
            ("FUSE ceiling", tree_never.ceiling),
            ("plain dir", tree_never.plain),
        ],
        "find-large": [
            ("zarrfs", zarrfs_side(servers, f"s3://{BUCKET}/large.zarr", lambda p: find(p, "-maxdepth", "2"))),
            ("zarr-python", zarr_members(True, f"s3://{BUCKET}/large.zarr")),
        ],
        "raw-dd": both_clients(f"s3://{BUCKET}/raw", lambda p: dd(p / "object.bin"), "--raw"),
        "raw-find": [("zarrfs", zarrfs_side(servers, many, find, "--raw"))],
        "mount": [
            ("zarrfs", mount_time(servers, src)),
            ("zarrfs-s3fs", mount_time(servers, src, "--s3-backend", "s3fs")),
        ],
    }
    for name, tool in (("rclone", other_mounts.rclone), ("s3fs-fuse", other_mounts.s3fs)):
        if shutil.which(name.split("-")[0]):
            out["raw-dd"].append((name, other_mount(servers, tool, "raw", lambda p: dd(p / "object.bin"))))
            out["raw-find"].append((name, other_mount(servers, tool, "many.zarr", find)))
    if shutil.which("rclone"):
        out["mount"].append(("rclone", rclone_mount_time(servers)))
    return out


def find(path: Path, *options: str) -> None:
    subprocess.run(["find", str(path), *options], check=True, stdout=subprocess.DEVNULL)


def mount_time(servers: Servers, source: str, *options: str):
    def run() -> float:
        path = Path(tempfile.mkdtemp(prefix="zarrfs-remote-"))
        servers.reset()
        start = time.perf_counter()
        subprocess.run(
            [
                *ZARRFS,
                "mount",
                source,
                str(path),
                "--read-only",
                "--storage-option",
                f"endpoint_url={servers.url}",
                *options,
            ],
            check=True,
            env=ENV,
            capture_output=True,
        )
        elapsed = time.perf_counter() - start
        subprocess.run([*ZARRFS, "umount", str(path)], env=ENV, capture_output=True)
        return elapsed

    return run


# ---------------------------------------------------------------------- other mounts
def other_mount(servers: Servers, tool, prefix: str, action):
    def run() -> float:
        with other_mounts.serving(lambda path: tool(servers.url, f"{BUCKET}/{prefix}", path, ENV)) as path:
            servers.reset()
            return timed(lambda: action(path))

    return run


def rclone_mount_time(servers: Servers):
    def run() -> float:
        servers.reset()
        start = time.perf_counter()
        with other_mounts.serving(lambda path: other_mounts.rclone(servers.url, f"{BUCKET}/h.zarr", path, ENV)) as path:
            os.listdir(path)
            return time.perf_counter() - start

    return run


# ---------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--only", default="")
    parser.add_argument("--zarrfs", type=Path, help="the zarrfs checkout to mount with (default: this one)")
    parser.add_argument("--spans", action="store_true", help="print each run's requests, when each was in flight")
    args = parser.parse_args()
    if args.zarrfs:
        ENV["PYTHONPATH"] = str(args.zarrfs.resolve())
    for name, value in CREDENTIALS.items():
        os.environ.setdefault(name, value)
    servers = Servers(args.latency)
    work = Path(tempfile.mkdtemp(prefix="zarrfs-remote-data-"))
    try:
        chosen = [s for s in args.only.split(",") if s]
        facts = upload(servers, args.size_mib, work, chosen)
        read_mib = {"dd": args.size_mib, "dd-shard": args.size_mib, "dd-cached": args.size_mib, "raw-dd": RAW_MIB}
        for name, sides in scenarios(servers, facts, work).items():
            if chosen and name not in chosen:
                continue
            times: dict[str, list[float]] = {side: [] for side, _ in sides}
            counts: dict[str, list[dict]] = {side: [] for side, _ in sides}
            clocks: dict[str, list[ThreadClock]] = {side: [] for side, _ in sides}
            for _ in range(args.runs):  # interleaved: each run, every side once
                for side, run in sides:
                    try:
                        CLOCKS.clear()
                        READERS.clear()
                        times[side].append(run())
                        counts[side].append({**servers.counts(), **{k: v for r in READERS for k, v in r.items()}})
                        if args.spans:
                            print_spans(name, side, servers)
                        clocks[side] += CLOCKS[-1:]
                    except Exception as exc:  # one side failing leaves the others' figures
                        print(f"  {name} / {side}: failed: {exc}", file=sys.stderr)
            report(name, times, counts, clocks, read_mib.get(name))
    finally:
        servers.close()
        shutil.rmtree(work, ignore_errors=True)


def print_spans(name: str, side: str, servers: Servers) -> None:
    """A run's requests in the order they arrived: when each was in flight (seconds after
    the run's start), its kind, key and range."""
    print(f"  {name} / {side}: requests (arrived-answered s, kind, key, range)")
    for (start, end), (kind, path, wanted) in zip(servers.spans(), servers.log()):
        print(f"    {start:7.3f}-{end:7.3f}  {kind:5} {path.split(BUCKET, 1)[-1]} {wanted}")


def report(name: str, times: dict, counts: dict, clocks: dict, mib: int | None) -> None:
    base = statistics.median(times["zarrfs"]) if times.get("zarrfs") else None
    print(f"{name}:")
    for side, values in times.items():
        if not values:
            print(f"  {side:<12} failed")
            continue
        t = statistics.median(values)
        ratio = (
            f"{t / base:.2f}x"
            if base and side != "zarrfs" and t / base >= 0.1
            else (f"{t / base:.3f}x" if base and side != "zarrfs" else "")
        )
        c = counts[side][len(counts[side]) // 2] if counts[side] else {}
        own = ("ahead_readers", "ahead_readers_replaced", "store_requests")
        requests = {k: v for k, v in c.items() if k not in ("max_in_flight", "mean_in_flight", "total", *own)}
        readers = (
            f"  readers {c['ahead_readers']} ({c.get('ahead_readers_replaced', 0)} replaced)" if own[0] in c else ""
        )
        print(
            f"  {side:<12} {t:7.3f} s  {ratio:>6}  requests {c.get('total', 0):5}  {requests}  "
            f"in flight mean {c.get('mean_in_flight', 0)} max {c.get('max_in_flight', 0)}{readers}"
        )
    print_cpu(clocks, mib)
    medians = {side: statistics.median(values) for side, values in times.items() if values}
    if "zarrfs-s3fs" in medians:
        own = medians["zarrfs-s3fs"]
        print(
            "  ratios over zarrfs-s3fs: "
            + ", ".join(f"{side} {t / own:.2f}x" for side, t in medians.items() if side != "zarrfs-s3fs")
        )
    sys.stdout.flush()


def print_cpu(clocks: dict, mib: int | None) -> None:
    """Each side's CPU by thread (the run of median CPU): per GiB read where the scenario
    reads a known size, else in seconds. zarrfs's is its daemon's, a library's this
    process's; moto and the proxy are not counted."""
    for side, runs in clocks.items():
        if not runs:
            continue
        clock = sorted(runs, key=lambda c: c.total)[len(runs) // 2]
        if mib:
            print(f"    CPU {side:<12} {clock.per_gib(mib << 20)}")
        else:
            kinds = sorted(clock.by_kind.items(), key=lambda item: -item[1])[:5]
            print(f"    CPU {side:<12} {clock.total:.2f} s in all: " + ", ".join(f"{k} {v:.2f}" for k, v in kinds))


if __name__ == "__main__":
    main()
