"""s3fs against obstore as zarrfs's I/O stage uses them: many threads, each asking for one
object or one range at a time, behind the latency proxy of bench/remote.py.

    python bench/s3_clients.py [--threads 32] [--objects 64] [--runs 3] [--latency 0.02]

Scenarios (each client times every scenario --runs times, the clients interleaved; medians):

  whole   every 4 MiB object, whole (one GET each)
  ranged  1 MiB ranges, four per object (one ranged GET each)

Ratios are obstore's speed over s3fs's: above 1 means obstore is faster."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.remote import BUCKET, CREDENTIALS, Servers, s3fs_for

OBJECT = 4 << 20
RANGE = 1 << 20


def s3fs_reader(url: str, threads: int):
    import s3fs

    fs = s3fs.S3FileSystem(
        endpoint_url=url,
        key="testing",
        secret="testing",
        skip_instance_cache=True,
        use_listings_cache=False,
        max_concurrency=1,
        config_kwargs={"max_pool_connections": 2 * threads},
    )

    def read(key: str, start: int | None, end: int | None) -> bytes:
        return fs.cat_file(f"{BUCKET}/{key}", start=start, end=end)

    return read


def obstore_reader(url: str, threads: int):
    import obstore
    from obstore.store import S3Store

    store = S3Store(
        BUCKET,
        endpoint=url,
        access_key_id="testing",
        secret_access_key="testing",
        region="us-east-1",
        client_options={"allow_http": True},
    )

    def read(key: str, start: int | None, end: int | None) -> bytes:
        if start is None:
            return bytes(obstore.get(store, key).bytes())
        return bytes(obstore.get_range(store, key, start=start, end=end))

    return read


def run(read, pool: ThreadPoolExecutor, requests: list[tuple[str, int | None, int | None]]) -> float:
    start = time.perf_counter()
    sizes = list(pool.map(lambda r: len(read(*r)), requests))
    took = time.perf_counter() - start
    expected = [OBJECT if s is None else e - s for _, s, e in requests]
    assert sizes == expected, "short or wrong reads"
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--objects", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02)
    args = parser.parse_args()
    for name, value in CREDENTIALS.items():
        os.environ.setdefault(name, value)
    servers = Servers(args.latency)
    try:
        fs = s3fs_for(servers.direct)
        fs.mkdir(BUCKET)
        keys = [f"objects/{i}" for i in range(args.objects)]
        fs.pipe({f"{BUCKET}/{key}": os.urandom(OBJECT) for key in keys})
        scenarios = {
            "whole": [(key, None, None) for key in keys],
            "ranged": [(key, s, s + RANGE) for key in keys for s in range(0, OBJECT, RANGE)],
        }
        readers = {"s3fs": s3fs_reader(servers.url, args.threads), "obstore": obstore_reader(servers.url, args.threads)}
        with ThreadPoolExecutor(args.threads) as pool:
            for name, requests in scenarios.items():
                times: dict[str, list[float]] = {client: [] for client in readers}
                for _ in range(args.runs):
                    for client, read in readers.items():
                        times[client].append(run(read, pool, requests))
                s3fs_t, obstore_t = (statistics.median(times[c]) for c in ("s3fs", "obstore"))
                mib = sum((OBJECT if s is None else e - s) for _, s, e in requests) / (1 << 20)
                print(
                    f"{name:<7} {len(requests)} requests, {mib:.0f} MiB: s3fs {s3fs_t:.2f} s "
                    f"({mib / s3fs_t:.0f} MiB/s), obstore {obstore_t:.2f} s ({mib / obstore_t:.0f} MiB/s), "
                    f"obstore/s3fs speed {s3fs_t / obstore_t:.2f}x   runs {times}"
                )
                sys.stdout.flush()
    finally:
        servers.close()


if __name__ == "__main__":
    main()
