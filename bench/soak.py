"""Minutes of mixed load on one mount, with faults injected, then a check that nothing
acknowledged was lost and no reader saw a torn chunk.

    python bench/soak.py [--seconds 60] [--writers 2] [--readers 3] [--phases local,s3]
                         [--churn 6] [--window 20] [--arrays-every 8] [--sample 30]
                         [--baseline 600] [--samples FILE] [--no-faults]
                         [--daemon-wrapper "heaptrack -o FILE"]

Each phase mounts a hierarchy of two arrays through the command line: `local` a local
directory, `s3` a bucket on a moto server started here, reached through a fault proxy on
127.0.0.1 (tests/faults.py) that freezes the endpoint for 2 s, then resets every
connection for 1 s, every 10 s (`--no-faults`: the proxy passes everything through, to
tell what the churn itself does from what its failed requests do). Writers replace whole
chunks (each value used once) and log which closes succeeded; readers read chunk files and data.npy and count chunks that
are not one value (torn), apart from those where a write of that chunk was under way during
the read (the kernel reads data.npy page by page: allowed, docs/reliability.md); an attribute is rewritten with setfattr all along. After unmount,
zarr-python reads the store: each chunk must hold its last acknowledged write, or a
later write whose close failed (kept and stored at unmount, docs/semantics.md).

Alongside, in both phases at once: `--churn` programs make and remove nodes without end
(groups with mkdir and rmdir, one node in `--arrays-every` an array copied in as .npy and
removed with rm -r, one array in five renamed first: the daemon sees a new name for each;
each program keeps its last `--window` nodes), another writer changes an array `c`
in the store itself, beneath the mount (zarr-python, not through it), which the readers
read too; every `--sample` seconds the daemon's resident memory, open descriptors and
threads (from /proc) and the table sizes of `zarrfs stats` are written to `--samples`.
Prints one line per phase: writes acknowledged / failed, reads, torn reads, acknowledged
writes lost, nodes made, daemon peak memory, and each sampled figure at the end as a
ratio of its value once `--baseline` seconds had passed (the goal: within 5%) with its
highest value after it. `--daemon-wrapper` runs each daemon in the foreground under a
program that takes a command line (a native-heap profiler: `heaptrack -o FILE`)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.faults import FaultProxy  # noqa: E402

ZARRFS = [str(Path(sys.executable).parent / "zarrfs")]
SHAPE, CHUNKS, GRID = (32, 32), (8, 8), (4, 4)

_WRITER = """
import json, os, sys, time
import numpy as np
mnt, wid, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = np.random.default_rng(wid)
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    n += 1
    name, r, c = str(rng.choice(["a", "b"])), int(rng.integers(4)), int(rng.integers(4))
    value = wid * 10_000_000 + n
    ok, began = True, time.monotonic()
    try:
        fd = os.open(f"{mnt}/{name}/chunks/{r}/{c}", os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, np.full((8, 8), value, "<f8").tobytes())
        finally:
            os.close(fd)
    except OSError as exc:
        ok = exc.errno
    print(json.dumps([name, r, c, value, ok, time.monotonic(), began]), flush=True)
"""

_READER = """
import io, json, os, sys, time
import numpy as np
mnt, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(seed)
end, reads, torn, failed, torn_c = time.monotonic() + seconds, 0, 0, 0, 0
while time.monotonic() < end:
    name = str(rng.choice(["a", "b", "c"]))
    try:
        began = time.monotonic()
        if rng.integers(2):
            r, c = int(rng.integers(4)), int(rng.integers(4))
            raw = open(f"{mnt}/{name}/chunks/{r}/{c}", "rb").read()
            chunks = {(r, c): np.frombuffer(raw, "<f8")}
        else:
            values = np.load(io.BytesIO(open(f"{mnt}/{name}/data.npy", "rb").read()))
            chunks = {(r, c): values[r * 8:r * 8 + 8, c * 8:c * 8 + 8] for r in range(4) for c in range(4)}
        ended = time.monotonic()
        bad = [(rc, ch) for rc, ch in chunks.items() if ch.size != 64 or not (ch == ch.flat[0]).all()]
        for (r, c), ch in bad:  # (for the checker: which chunk, the values seen, and when)
            print(json.dumps([name, r, c, len(chunks) > 1, int(ch.size), sorted({float(v) for v in ch.flat}),
                              began, ended]), flush=True)
        bad = len(bad)
        if name == "c":  # (written beneath the mount: the other writer's own writes may be seen half made)
            torn_c += bad
        else:
            torn += bad
        reads += 1
    except (OSError, ValueError):
        failed += 1
print(json.dumps([reads, torn, failed, torn_c]))
"""


_CHURN = """
import io, os, shutil, sys, time
import numpy as np
mnt, seconds, cid, window, every = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
top = f"{mnt}/churn{cid}"
end, made, failed, live, n = time.monotonic() + seconds, 0, 0, [], 0
while time.monotonic() < end:  # (the endpoint may be failing just then)
    try:
        os.makedirs(top, exist_ok=True)
        break
    except OSError:
        failed += 1
        time.sleep(1)
while time.monotonic() < end:
    n += 1
    try:
        if n % every:  # (a group is made and erased in a few store calls, an array in tens)
            os.mkdir(f"{top}/g{n}")
            live.append(f"{top}/g{n}")
        else:
            out = io.BytesIO(); np.save(out, np.full((4, 4), n, "<i2"))
            with open(f"{top}/a{n}.npy", "wb") as f:
                f.write(out.getvalue())
            if n % (5 * every) == 0:  # a node renamed: a new name for the daemon to track
                os.rename(f"{top}/a{n}", f"{top}/r{n}")
                live.append(f"{top}/r{n}")
            else:
                live.append(f"{top}/a{n}")
        made += 1
        while len(live) > window:
            old = live.pop(0)
            if os.path.basename(old).startswith("g"):
                os.rmdir(old)
            else:
                shutil.rmtree(old)
    except OSError:
        failed += 1
print(made, failed)
"""

_OTHER_WRITER = """
import json, sys, time
import numpy as np, zarr
path, seconds, options = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3]) or None
array = zarr.open_array(path, mode="r+", storage_options=options)
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    n += 1
    r, c = n % 4, (n // 4) % 4
    array[r * 8 : r * 8 + 8, c * 8 : c * 8 + 8] = n
    time.sleep(0.2)
print(n)
"""


def _sample(mnt: Path, started: float) -> dict:
    """The daemon's resident memory, descriptors and threads, and its tables' sizes."""
    from zarrfs.cli import pid_file

    pid = int(Path(pid_file(str(mnt))).read_text())
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    sample = {
        "t": round(time.monotonic() - started, 1),
        "rss_kib": int(status["VmRSS"].split()[0]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "threads": int(status["Threads"]),
    }
    stats = json.loads((mnt / ".zarrfs/stats").read_text())
    sample.update({key: stats[key] for key in ("nodes_tracked", "cache_bytes", "dirty_bytes") if key in stats})
    return sample


def _drift(samples: list[dict], baseline: float) -> dict:
    """Each figure at the end as a ratio of its value at `baseline` seconds, and its
    highest after it."""
    after = [s for s in samples if s["t"] >= baseline]
    if len(after) < 2:
        return {}
    first, last = after[0], after[-1]
    return {
        key: {
            "at_baseline": first[key],
            "end": last[key],
            "ratio": round(last[key] / max(first[key], 1), 3),
            "max": max(s[key] for s in after),
        }
        for key in first
        if key != "t"
    }


def run_phase(name: str, source: str, store_path: str, args, env: dict, faults=None, storage_options=None,
              mount_options=()) -> dict:  # fmt: skip
    mnt = Path(tempfile.mkdtemp(prefix="zarrfs-soak-"))
    started = time.monotonic()
    log = mnt.parent / (mnt.name + ".log")
    mount = [*ZARRFS, "mount", source, str(mnt), "--log-file", str(log), "--timeout", "5", *mount_options]
    wrapped = None
    if args.daemon_wrapper:
        wrapped = subprocess.Popen([*args.daemon_wrapper.split(), sys.executable, *mount, "--foreground"], env=env)
        while not (mnt / ".zarrfs/stats").exists():  # (the mount is ready)
            if wrapped.poll() is not None:
                raise SystemExit(f"the daemon under {args.daemon_wrapper!r} exited: {wrapped.returncode}")
            time.sleep(0.5)
    else:
        subprocess.run(mount, check=True, env=env)
    py = [sys.executable, "-c"]
    writers = [
        subprocess.Popen([*py, _WRITER, str(mnt), str(w + 1), str(args.seconds)], stdout=subprocess.PIPE, text=True)
        for w in range(args.writers)
    ]
    readers = [
        subprocess.Popen([*py, _READER, str(mnt), str(args.seconds), str(r)], stdout=subprocess.PIPE, text=True)
        for r in range(args.readers)
    ]
    churn = [
        subprocess.Popen(
            [*py, _CHURN, str(mnt), str(args.seconds), str(c), str(args.window), str(args.arrays_every)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for c in range(args.churn)
    ]
    other = subprocess.Popen(
        [*py, _OTHER_WRITER, store_path + "/c", str(args.seconds), json.dumps(storage_options)],
        stdout=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()
    samples: list[dict] = []

    def sampler() -> None:
        while not stop.wait(args.sample):
            try:
                samples.append(_sample(mnt, started))
            except (OSError, ValueError, KeyError) as exc:
                samples.append({"t": round(time.monotonic() - started, 1), "error": str(exc)})
                continue
            if args.samples:
                with open(args.samples, "a") as f:
                    f.write(json.dumps({"phase": name, **samples[-1]}) + "\n")

    helpers = [threading.Thread(target=sampler, daemon=True)]

    def attributes() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            subprocess.run(["setfattr", "-n", "user.zarr.n", "-v", str(n), str(mnt / "a")], capture_output=True)
            time.sleep(0.2)

    helpers.append(threading.Thread(target=attributes, daemon=True))
    if faults is not None:
        helpers.append(threading.Thread(target=faults, args=(stop,), daemon=True))
    for helper in helpers:
        helper.start()
    written = [json.loads(line) for w in writers for line in w.communicate()[0].splitlines()]
    reads = failed_reads = torn_c = 0
    torn: list[list] = []
    for r in readers:
        *seen, last = [json.loads(line) for line in r.communicate()[0].splitlines()]
        reads, failed_reads, torn_c = reads + last[0], failed_reads + last[2], torn_c + last[3]
        torn += [t for t in seen if t[0] != "c"]
    stale = [t for t in torn if _stale(t, written)]
    made = failed_nodes = 0
    for c in churn:
        a, b = map(int, c.communicate()[0].split() or (0, 0))  # (nothing: the program failed)
        made, failed_nodes = made + a, failed_nodes + b
    other_writes = int(other.communicate()[0] or 0)
    stop.set()
    for helper in helpers:  # a setfattr still in the mount made its unmount fail (EBUSY)
        helper.join()
    stats = json.loads((mnt / ".zarrfs/stats").read_text())
    subprocess.run([*ZARRFS, "umount", str(mnt), "--timeout", "120"], check=True)
    if wrapped is not None:
        wrapped.wait()
    lost, raced, lost_seen = _lost(store_path, written, storage_options)
    os.rmdir(mnt)
    return {
        "phase": name,
        "writes_acknowledged": sum(1 for w in written if w[4] is True),
        "writes_failed": sum(1 for w in written if w[4] is not True),
        "reads": reads,
        "reads_failed": failed_reads,
        "torn_reads": len(stale),
        "torn_reads_by_a_write_under_way": len(torn) - len(stale),
        "torn_stale_seen": stale[:3],
        "torn_reads_of_the_other_writers_array": torn_c,
        "acknowledged_lost": lost,
        "acknowledged_raced": raced,
        "lost_seen": lost_seen,
        "nodes_made": made,
        "nodes_made_per_second": round(made / args.seconds, 1),
        "node_changes_failed": failed_nodes,
        "other_writer_writes": other_writes,
        "sampled": _drift([s for s in samples if "error" not in s], args.baseline),
        "samples_failed": sum(1 for s in samples if "error" in s),
        "peak_rss_MiB": round(stats["peak_rss_bytes"] / 2**20),
        "errors": stats.get("errors", 0),
        "log_tracebacks": log.read_text().count("Traceback"),
    }


def _stale(torn: list, written: list) -> bool:
    """Whether a chunk read torn (two or more values) holds a value that a write acknowledged
    before the read began had replaced, or one never written: a reader may see a chunk half
    replaced only by writes under way while it reads (docs/reliability.md)."""
    name, r, c, _, size, values, began, ended = torn
    writes = sorted((w for w in written if w[:3] == [name, r, c]), key=lambda w: w[5])
    done = [w for w in writes if w[5] < began]
    acked = [i for i, w in enumerate(done) if w[4] is True]
    # before the read: the last acknowledged value and any failed write after it (kept
    # by the mount); during it: every write begun before it ended
    allowed = {float("ab".index(name))} if not acked else set()
    allowed |= {float(w[3]) for w in done[acked[-1] if acked else 0 :]}
    allowed |= {float(w[3]) for w in writes if w[5] >= began and w[6] <= ended}
    return size != 64 or not set(values) <= allowed


def _lost(store_path: str, written: list, storage_options) -> tuple[int, int, list]:
    """Chunks whose stored value is neither their last acknowledged write nor a later write
    whose close failed (lost), apart from those holding an acknowledged write that overlapped
    the last one in time (raced: two writers' closes of one chunk under way at once may
    reach the store in either order); and the first few of both, for the log."""
    import zarr

    lost, raced, seen = 0, 0, []
    for name in "ab":
        array = zarr.open_array(store_path + "/" + name, mode="r", storage_options=storage_options)[...]
        for r in range(4):
            for c in range(4):
                writes = sorted((w for w in written if w[:3] == [name, r, c]), key=lambda w: w[5])
                acked = [i for i, w in enumerate(writes) if w[4] is True]
                if not acked:
                    continue
                last = writes[acked[-1]]
                allowed = {last[3]} | {w[3] for w in writes[acked[-1] + 1 :]}
                stored = array[r * 8, c * 8]
                if stored in allowed:
                    continue
                overlapping = {w[3] for w in writes[: acked[-1]] if w[5] > last[6]}  # ended after it began
                raced += stored in overlapping
                lost += stored not in overlapping
                if len(seen) < 5:
                    held = [w for w in writes if w[3] == stored]
                    seen.append({"chunk": [name, r, c], "stored": float(stored), "its_write": held, "last_acked": last})
    return lost, raced, seen


def _write_store(root: str, storage_options=None) -> None:
    import zarr

    group = zarr.open_group(root, mode="w", storage_options=storage_options)
    for i, name in enumerate("abc"):
        group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype="<f8", fill_value=-1)[...] = i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--phases", default="local,s3")
    parser.add_argument("--churn", type=int, default=6, help="programs making and removing nodes, per phase")
    parser.add_argument(
        "--window", type=int, default=20, help="nodes a churn program keeps before it removes the oldest"
    )
    parser.add_argument(
        "--arrays-every", type=int, default=8, help="a churn program's nodes: one array in so many, the rest groups"
    )
    parser.add_argument("--sample", type=float, default=30, help="seconds between samples of the daemon")
    parser.add_argument("--baseline", type=float, default=600, help="seconds after which figures are compared")
    parser.add_argument("--samples", help="a file to append each sample to (JSON lines)")
    parser.add_argument("--no-faults", action="store_true", help="S3: the proxy injects no fault")
    parser.add_argument("--daemon-wrapper", help="a command line to run each daemon under, in the foreground")
    args = parser.parse_args()
    args.baseline = min(args.baseline, args.seconds / 6)
    results: list[dict] = []
    phases: list[threading.Thread] = []
    if "local" in args.phases:
        root = tempfile.mkdtemp(prefix="zarrfs-soak-store-") + "/s.zarr"
        _write_store(root)
        phases.append(
            threading.Thread(target=lambda: results.append(run_phase("local", root, root, args, dict(os.environ))))
        )
    if "s3" in args.phases:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        import s3fs

        s3fs.S3FileSystem(endpoint_url=endpoint).mkdir("soak")
        options = {"endpoint_url": endpoint}
        _write_store("s3://soak/s.zarr", options)
        url = urlparse(endpoint)
        proxy = FaultProxy(url.hostname, url.port)

        def faults(stop: threading.Event) -> None:
            while not stop.wait(8):
                proxy.freeze()
                time.sleep(2)
                proxy.thaw()
                proxy.reset = True
                time.sleep(1)
                proxy.reset = False

        mount_options = ["--storage-option", f"endpoint_url={proxy.endpoint}"]
        phases.append(
            threading.Thread(
                target=lambda: results.append(
                    run_phase(
                        "s3" if args.no_faults else "s3 with faults",
                        "s3://soak/s.zarr",
                        "s3://soak/s.zarr",
                        args,
                        dict(os.environ),
                        None if args.no_faults else faults,
                        options,
                        mount_options,
                    )
                )
            )
        )
    for phase in phases:  # (at once: an hour's run is an hour)
        phase.start()
    for phase in phases:
        phase.join()
    if "s3" in args.phases:
        proxy.close()
        server.stop()
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
