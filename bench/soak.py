"""Minutes of mixed load on one mount, with faults injected, then a check that nothing
acknowledged was lost and no reader saw a torn chunk.

    python bench/soak.py [--seconds 60] [--writers 2] [--readers 3] [--phases local,s3]

Each phase mounts a hierarchy of two arrays through the command line: `local` a local
directory, `s3` a bucket on a moto server started here, reached through a fault proxy on
127.0.0.1 (tests/faults.py) that freezes the endpoint for 2 s, then resets every
connection for 1 s, every 10 s. Writers replace whole chunks (each value used once) and
log which closes succeeded; readers read chunk files and data.npy and count chunks that
are not one value; an attribute is rewritten with setfattr all along. After unmount,
zarr-python reads the store: each chunk must hold its last acknowledged write, or a
later write whose close failed (kept and stored at unmount, docs/semantics.md). Prints one line per
phase: writes acknowledged / failed, reads, torn reads, acknowledged writes lost, daemon
peak memory."""

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
    ok = True
    try:
        fd = os.open(f"{mnt}/{name}/chunks/{r}/{c}", os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, np.full((8, 8), value, "<f8").tobytes())
        finally:
            os.close(fd)
    except OSError as exc:
        ok = exc.errno
    print(json.dumps([name, r, c, value, ok, time.monotonic()]), flush=True)
"""

_READER = """
import io, os, sys, time
import numpy as np
mnt, seconds, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(seed)
end, reads, torn, failed = time.monotonic() + seconds, 0, 0, 0
while time.monotonic() < end:
    name = str(rng.choice(["a", "b"]))
    try:
        if rng.integers(2):
            raw = open(f"{mnt}/{name}/chunks/{rng.integers(4)}/{rng.integers(4)}", "rb").read()
            chunks = [np.frombuffer(raw, "<f8")]
        else:
            values = np.load(io.BytesIO(open(f"{mnt}/{name}/data.npy", "rb").read()))
            chunks = [values[r:r + 8, c:c + 8] for r in range(0, 32, 8) for c in range(0, 32, 8)]
        torn += sum(1 for ch in chunks if ch.size != 64 or not (ch == ch.flat[0]).all())
        reads += 1
    except OSError:
        failed += 1
print(reads, torn, failed)
"""


def run_phase(name: str, source: str, store_path: str, args, env: dict, faults=None, storage_options=None) -> dict:
    mnt = Path(tempfile.mkdtemp(prefix="zarrfs-soak-"))
    log = mnt.parent / (mnt.name + ".log")
    subprocess.run(
        [*ZARRFS, "mount", source, str(mnt), "--log-file", str(log), "--timeout", "5", *args.mount_options],
        check=True,
        env=env,
    )
    py = [sys.executable, "-c"]
    writers = [
        subprocess.Popen([*py, _WRITER, str(mnt), str(w + 1), str(args.seconds)], stdout=subprocess.PIPE, text=True)
        for w in range(args.writers)
    ]
    readers = [
        subprocess.Popen([*py, _READER, str(mnt), str(args.seconds), str(r)], stdout=subprocess.PIPE, text=True)
        for r in range(args.readers)
    ]
    stop = threading.Event()

    def attributes() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            subprocess.run(["setfattr", "-n", "user.zarr.n", "-v", str(n), str(mnt / "a")], capture_output=True)
            time.sleep(0.2)

    threading.Thread(target=attributes, daemon=True).start()
    if faults is not None:
        threading.Thread(target=faults, args=(stop,), daemon=True).start()
    written = [json.loads(line) for w in writers for line in w.communicate()[0].splitlines()]
    reads = torn = failed_reads = 0
    for r in readers:
        a, b, c = map(int, r.communicate()[0].split())
        reads, torn, failed_reads = reads + a, torn + b, failed_reads + c
    stop.set()
    stats = json.loads((mnt / ".zarrfs/stats").read_text())
    subprocess.run([*ZARRFS, "umount", str(mnt), "--timeout", "120"], check=True)
    lost = _lost(store_path, written, storage_options)
    os.rmdir(mnt)
    return {
        "phase": name,
        "writes_acknowledged": sum(1 for w in written if w[4] is True),
        "writes_failed": sum(1 for w in written if w[4] is not True),
        "reads": reads,
        "reads_failed": failed_reads,
        "torn_reads": torn,
        "acknowledged_lost": lost,
        "peak_rss_MiB": round(stats["peak_rss_bytes"] / 2**20),
        "errors": stats.get("errors", 0),
        "log_tracebacks": log.read_text().count("Traceback"),
    }


def _lost(store_path: str, written: list, storage_options) -> int:
    """Chunks whose stored value is neither their last acknowledged write nor a later write
    whose close failed."""
    import zarr

    lost = 0
    for name in "ab":
        array = zarr.open_array(store_path + "/" + name, mode="r", storage_options=storage_options)[...]
        for r in range(4):
            for c in range(4):
                writes = sorted((w for w in written if w[:3] == [name, r, c]), key=lambda w: w[5])
                acked = [i for i, w in enumerate(writes) if w[4] is True]
                if not acked:
                    continue
                allowed = {writes[acked[-1]][3]} | {w[3] for w in writes[acked[-1] + 1 :]}
                lost += array[r * 8, c * 8] not in allowed
    return lost


def _write_store(root: str, storage_options=None) -> None:
    import zarr

    group = zarr.open_group(root, mode="w", storage_options=storage_options)
    for i, name in enumerate("ab"):
        group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype="<f8", fill_value=-1)[...] = i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--phases", default="local,s3")
    args = parser.parse_args()
    args.mount_options = []
    results = []
    if "local" in args.phases:
        root = tempfile.mkdtemp(prefix="zarrfs-soak-store-") + "/s.zarr"
        _write_store(root)
        results.append(run_phase("local", root, root, args, dict(os.environ)))
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

        args.mount_options = ["--storage-option", f"endpoint_url={proxy.endpoint}"]
        results.append(
            run_phase("s3 with faults", "s3://soak/s.zarr", "s3://soak/s.zarr", args, dict(os.environ), faults, options)
        )
        proxy.close()
        server.stop()
    for result in results:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
