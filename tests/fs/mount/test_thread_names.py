"""The daemon's threads carry their names in the kernel (/proc/PID/task/*/comm), so that
`top -H`, `ps -L` and the benchmarks' CPU accounting tell them apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import zarr


def test_the_daemons_threads_are_named_in_the_kernel(mount, tmp_path):
    root = tmp_path / "a.zarr"
    a = zarr.create_array(root, shape=(512, 512), chunks=(64, 512), dtype="int32")
    a[:] = np.arange(512 * 512, dtype="int32").reshape(512, 512)
    m = mount(root)
    assert (m / "data").read_bytes() == a[...].astype("<i4").tobytes()  # decoded on the codec threads
    names = {(task / "comm").read_text().strip() for task in Path(f"/proc/{m.pid}/task").iterdir()}
    assert any(name.startswith("zarrfs-codec") for name in names), names
    assert any(name.startswith("Trio thread") for name in names), names
