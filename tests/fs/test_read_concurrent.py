"""Several programs reading different arrays of one mount at once each get their array's
bytes, and `zarrfs umount` afterwards leaves no daemon and no mount behind."""

from __future__ import annotations

import hashlib
import subprocess
import warnings

import numpy as np

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

from zarrfs.cli import is_mounted  # noqa: E402

READERS = 4


def test_four_processes_read_different_arrays_concurrently(tmp_path, mount):
    root = tmp_path / "h.zarr"
    group = zarr.open_group(str(root), mode="w")
    expected = {}
    rng = np.random.default_rng(7)
    compressors = [[zc.ZstdCodec()], [zc.BloscCodec(cname="lz4")], [zc.GzipCodec(level=1)], None]
    for i in range(READERS):
        values = rng.standard_normal((384, 1000)).astype("float32")  # 1.5 MB, 24 chunks
        array = group.create_array(f"a{i}", shape=values.shape, chunks=(16, 1000), dtype="float32",
                                   compressors=compressors[i])
        array[:] = values
        expected[f"a{i}"] = hashlib.sha256(values.tobytes()).hexdigest()
    m = mount(root)
    readers = {name: subprocess.Popen(["sha256sum", str(m / name / "data")], stdout=subprocess.PIPE, text=True)
               for name in expected}
    for name, process in readers.items():
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        assert out.split()[0] == expected[name], name
    m.unmount()  # checks that the daemon exited cleanly
    assert not is_mounted(str(m.path))
    assert subprocess.run(["pgrep", "-f", f"zarrfs mount .* {m.path}"], capture_output=True).returncode == 1
