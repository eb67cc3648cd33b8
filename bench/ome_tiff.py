"""Sequential read throughput of an OME-Zarr image's `image.ome.tif` against `data` of its
first level, through the same kind of mount (a fresh one per read: cold decoded-chunk
cache and page cache), and the daemon's peak resident memory after each read.

The image: NGFF 0.4 (Zarr v2), (c, z, y, x) uint16 of --gib GiB at the first level
(default 2: the OME-TIFF is then a BigTIFF), chunks (1, 1, 1024, 1024), zstd, two more
levels halved in Y and X, written by zarr-python as the spec lays it out. `dd bs=1M`
reads the whole of each file; the ratio is of bytes per second (target >= 0.8).

    .venv/bin/python bench/ome_tiff.py [--dir /tmp/zarrfs-bench] [--gib 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
from accounting import daemon_of

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
from numcodecs import Zstd  # noqa: E402

ZARRFS = [sys.executable, "-m", "zarrfs.cli"]
CHUNK = 1024
GiB = 1 << 30


def write_image(directory: Path, gib: float) -> Path:
    """The benchmark image (written once, reused by later runs of the same size)."""
    c, z, x = 2, 16, 4096
    y = max(CHUNK, int(gib * GiB) // (c * z * x * 2) // CHUNK * CHUNK)
    path = directory / f"ome-{c}x{z}x{y}x{x}.zarr"
    if (path / ".complete").exists():
        return path
    print(f"writing {path} ...", flush=True)
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    rng = np.random.default_rng(0)
    datasets = []
    for k in range(3):
        f = 2**k
        shape = (c, z, y // f, x // f)
        a = root.create_array(
            f"{k}", shape=shape, chunks=(1, 1, CHUNK, CHUNK), dtype="uint16", compressors=Zstd(level=1), overwrite=True
        )
        ramp = np.arange(shape[3], dtype=np.uint16)[None, :] * 7
        for ci in range(c):
            for zi in range(z):
                noise = rng.integers(0, 64, (shape[2], shape[3]), dtype=np.uint16)
                a[ci, zi] = ramp + noise + np.uint16(1000 * ci + 10 * zi)
        datasets.append(
            {
                "path": f"{k}",
                "coordinateTransformations": [{"type": "scale", "scale": [1.0, 2.0, 0.325 * f, 0.325 * f]}],
            }
        )
    root.attrs.update(
        {
            "multiscales": [
                {
                    "version": "0.4",
                    "name": "bench",
                    "axes": [
                        {"name": "c", "type": "channel"},
                        {"name": "z", "type": "space", "unit": "micrometer"},
                        {"name": "y", "type": "space", "unit": "micrometer"},
                        {"name": "x", "type": "space", "unit": "micrometer"},
                    ],
                    "datasets": datasets,
                }
            ],
            "omero": {"channels": [{"label": "A", "color": "FF0000"}, {"label": "B", "color": "00FF00"}]},
        }
    )
    (path / ".complete").touch()
    return path


def timed_read(source: Path, work: Path, name: str) -> tuple[float, int, int]:
    """(seconds, bytes, daemon's peak RSS in bytes) of `dd` over `name` in a fresh mount."""
    mountpoint = Path(tempfile.mkdtemp(dir=work))
    subprocess.run(
        [*ZARRFS, "mount", str(source), str(mountpoint), "--read-only", "--log-file", str(work / "zarrfs.log")],
        check=True,
        cwd="/",
    )
    try:
        pid = daemon_of(mountpoint)
        target = mountpoint / name
        start = time.perf_counter()
        subprocess.run(["dd", f"if={target}", "of=/dev/null", "bs=1M"], check=True, capture_output=True)
        seconds = time.perf_counter() - start
        peak = next(
            int(line.split()[1]) * 1024
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("VmHWM:")
        )
        return seconds, target.stat().st_size, peak
    finally:
        subprocess.run([*ZARRFS, "umount", str(mountpoint)], check=True, cwd="/")
        mountpoint.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/zarrfs-bench"))
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    source = write_image(args.dir, args.gib)
    rates: dict[str, list[float]] = {"0/data": [], "image.ome.tif": []}
    for _ in range(args.rounds):
        for name, named in rates.items():  # alternated, so that both meet the same machine
            seconds, size, peak = timed_read(source, args.dir, name)
            named.append(size / seconds)
            print(
                f"{name:14s} {size / GiB:6.2f} GiB in {seconds:6.2f} s = {size / seconds / (1 << 20):7.1f} MiB/s,"
                f" daemon peak RSS {peak / (1 << 20):6.0f} MiB",
                flush=True,
            )
    best = {name: max(r) for name, r in rates.items()}
    print(
        f"image.ome.tif / data of level 0 (best of {args.rounds}, bytes per second): "
        f"{best['image.ome.tif'] / best['0/data']:.2f} (target >= 0.8)"
    )


if __name__ == "__main__":
    main()
