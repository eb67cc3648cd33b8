"""Several programs reading different arrays of one mount at once each get their array's
bytes, and `zarrfs umount` afterwards leaves no daemon and no mount behind."""

from __future__ import annotations

import hashlib
import json
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
        array = group.create_array(
            f"a{i}", shape=values.shape, chunks=(16, 1000), dtype="float32", compressors=compressors[i]
        )
        array[:] = values
        expected[f"a{i}"] = hashlib.sha256(values.tobytes()).hexdigest()
    m = mount(root)
    readers = {
        name: subprocess.Popen(["sha256sum", str(m / name / "data")], stdout=subprocess.PIPE, text=True)
        for name in expected
    }
    for name, process in readers.items():
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        assert out.split()[0] == expected[name], name
    m.unmount()  # checks that the daemon exited cleanly
    assert not is_mounted(str(m.path))
    assert subprocess.run(["pgrep", "-f", f"zarrfs mount .* {m.path}"], capture_output=True).returncode == 1


def _stats(m) -> dict:
    return json.loads((m / ".zarrfs" / "stats").read_text())


def test_a_dd_through_an_array_larger_than_the_cache_keeps_other_arrays_cached(tmp_path, mount):
    """24 MiB through a 4 MiB decoded-chunk cache: `dd` and numpy get the array, the chunk
    rows it passed leave the cache as it goes, and a chunk of another array read before
    is still cached afterwards (held to the end, the pass would have pushed it out)."""
    root = tmp_path / "h.zarr"
    group = zarr.open_group(str(root), mode="w")
    values = np.random.default_rng(3).standard_normal((3072, 2048)).astype("float32")
    group.create_array("big", shape=values.shape, chunks=(64, 2048), dtype="float32", compressors=[zc.ZstdCodec()])[
        :
    ] = values
    group.create_array("small", shape=(64, 64), chunks=(64, 64), dtype="int32")[:] = np.arange(4096).reshape(64, 64)
    m = mount(root, "--cache-size", "4MiB")
    assert (m / "small" / "chunks" / "0" / "0").read_bytes() == np.arange(4096, dtype="<i4").tobytes()

    copy = tmp_path / "big.bin"
    subprocess.run(["dd", f"if={m / 'big' / 'data'}", f"of={copy}", "bs=1M", "status=none"], check=True)
    assert (
        hashlib.sha256(copy.read_bytes()).digest()
        == hashlib.sha256(zarr.open_array(str(root / "big"))[:].tobytes()).digest()
    )
    passed = _stats(m)
    assert passed["cache_passed"] > 0 and passed["cache_evictions"] == 0

    (m / "small" / "chunks" / "0" / "0").read_bytes()  # direct I/O: the daemon serves it
    after = _stats(m)
    assert after["fuse_read"] > passed["fuse_read"] and after["cache_misses"] == passed["cache_misses"]
    assert np.array_equal(np.load(m / "big" / "data.npy", mmap_mode="r"), values)  # paged in as numpy touches it
    m.unmount()  # checks that the daemon exited cleanly
