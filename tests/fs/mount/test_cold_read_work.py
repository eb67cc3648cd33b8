"""The work a cold pass through `data` does in the daemon, counted rather than timed: each
stored chunk is decoded once (decode-ahead and the reads it serves never decode one twice),
those decoded into a band through memory reused from chunk to chunk."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

ROWS, COLUMNS, CHUNKS = 1024, 4096, (256, 512)  # bands of 4 MiB


def _written(root: Path, codec) -> np.ndarray:
    values = np.random.default_rng(0).normal(0, 1, (ROWS, COLUMNS)).astype("<f4").round(2)
    zarr.create_array(str(root / "a"), shape=values.shape, chunks=CHUNKS, dtype="<f4", compressors=[codec])[...] = (
        values
    )
    return values


@pytest.mark.parametrize(
    "codec",
    [zc.ZstdCodec(level=1), zc.BloscCodec(cname="lz4", shuffle="shuffle", typesize=4)],
    ids=["zstd", "blosc-lz4"],
)
def test_a_cold_pass_decodes_each_chunk_once_into_reused_memory(tmp_path, mount, codec):
    values = _written(tmp_path / "s", codec)
    m = mount(tmp_path / "s", "--read-only", "--cache-size", "256MiB")
    with open(m / "a/data", "rb") as f:  # as dd reads: 1 MiB at a time, start to end
        data = b"".join(iter(lambda: f.read(1 << 20), b""))
    assert data == values.tobytes()
    stats = json.loads((m / ".zarrfs/stats").read_text())
    chunks = (ROWS // CHUNKS[0]) * (COLUMNS // CHUNKS[1])
    assert stats.get("chunks_decoded") == chunks, stats
    assert stats.get("bands_made", 0) == ROWS // CHUNKS[0], stats  # the pass was served from bands
    # those decoded ahead into their bands went through memory each codec thread reuses
    # (no fresh buffer per chunk); the first row's were decoded by the first read, its own
    assert stats.get("decoded_into_reused_memory", 0) >= chunks - COLUMNS // CHUNKS[1], stats
