"""Many programs at once through one mount (docs/semantics.md): writers replacing whole chunks while
readers read chunk files, `data` and `data.npy`; and `fsync` reaching the disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import zarr

from tests.conftest import wait_for

SHAPE, CHUNKS = (8, 12), (4, 4)
GRID = (2, 3)
SECONDS = 4.0

# A writer replaces whole chunks of both arrays, each with one value that no other write
# uses, and prints what it wrote and when each close began and ended.
_WRITER = """
import json, os, sys, time
import numpy as np
mnt, wid, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = np.random.default_rng(wid)
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    n += 1
    name, r, c = str(rng.choice(["a", "b"])), int(rng.integers(2)), int(rng.integers(3))
    value = wid * 1_000_000 + n
    fd = os.open(f"{mnt}/{name}/chunks/{r}/{c}", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, np.full((4, 4), value, "<f8").tobytes())
    began = time.monotonic()
    os.close(fd)  # raises if the complete chunk is refused
    print(json.dumps([name, r, c, value, began, time.monotonic()]), flush=True)
"""

# A reader checks that every chunk it sees holds one value, whole, in every view.
_READER = """
import io, os, sys, time
import numpy as np
mnt, seconds = sys.argv[1], float(sys.argv[2])
rng = np.random.default_rng(int(sys.argv[3]))
end, bad, reads = time.monotonic() + seconds, [], 0
def check(what, chunk):
    if chunk.size != 16 or not (chunk == chunk.flat[0]).all():
        bad.append(f"{what}: {chunk.tolist()}")
while time.monotonic() < end:
    name = str(rng.choice(["a", "b"]))
    kind = rng.integers(3)
    if kind == 0:
        r, c = int(rng.integers(2)), int(rng.integers(3))
        raw = open(f"{mnt}/{name}/chunks/{r}/{c}", "rb").read()
        check(f"{name}/chunks/{r}/{c} ({len(raw)} bytes)", np.frombuffer(raw, "<f8"))
    else:
        path = f"{mnt}/{name}/data" + (".npy" if kind == 2 else "")
        raw = open(path, "rb").read()
        values = np.load(io.BytesIO(raw)) if kind == 2 else np.frombuffer(raw, "<f8")
        if values.size != 96:
            bad.append(f"{path}: {values.size} values")
            continue
        values = values.reshape(8, 12)
        for r in range(2):
            for c in range(3):
                check(f"{path} chunk {r},{c}", values[r * 4:r * 4 + 4, c * 4:c * 4 + 4])
    reads += 1
print(reads)
for line in bad[:20]:
    print(line)
sys.exit(1 if bad else 0)
"""


def _store(tmp_path):
    root = tmp_path / "store.zarr"
    group = zarr.open_group(root, mode="w")
    for i, name in enumerate("ab"):
        array = group.create_array(name, shape=SHAPE, chunks=CHUNKS, dtype="float64", fill_value=-1.0)
        values = np.empty(SHAPE)
        for r in range(2):
            for c in range(3):
                values[r * 4 : r * 4 + 4, c * 4 : c * 4 + 4] = 100 * i + 10 * r + c
        array[:] = values
    return root


def test_readers_never_see_a_torn_chunk_and_the_last_complete_write_wins(mount, tmp_path):
    root = _store(tmp_path)
    m = mount(root)
    python = [sys.executable, "-c"]
    writers = [
        subprocess.Popen(
            [*python, _WRITER, str(m.path), str(w), str(SECONDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in (1, 2)
    ]
    readers = [
        subprocess.Popen(
            [*python, _READER, str(m.path), str(SECONDS), str(r)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(4)
    ]
    written = []
    for w in writers:
        out, err = w.communicate(timeout=60)
        assert w.returncode == 0, f"a complete write was refused:\n{err}"
        written += [json.loads(line) for line in out.splitlines()]
    for r in readers:
        out, err = r.communicate(timeout=60)
        assert r.returncode == 0, f"a reader saw a torn chunk:\n{out}{err}"
        assert int(out.split()[0]) > 10  # it did read
    assert len(written) > 20
    m.unmount()
    for name in "ab":
        stored = zarr.open_array(root / name, mode="r")[...]
        for r in range(2):
            for c in range(3):
                writes = sorted((w for w in written if w[:3] == [name, r, c]), key=lambda w: w[5])
                if not writes:
                    continue
                value = stored[r * 4, c * 4]
                assert (stored[r * 4 : r * 4 + 4, c * 4 : c * 4 + 4] == value).all()
                # the last close to finish wins, unless an overlapping close finished just before
                candidates = {w[3] for w in writes if w[5] >= writes[-1][4]}
                assert value in candidates, (name, r, c, value, writes[-3:])


def test_fsync_through_the_mount_reaches_the_file_and_its_directory(mount, store, tmp_path):
    m = mount(store)
    trace = tmp_path / "trace"
    strace = subprocess.Popen(
        [
            "strace",
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2",
            "-o",
            str(trace),
            "-p",
            str(m.pid),
        ],
        stderr=subprocess.PIPE,
    )
    try:
        # strace writes nothing until a traced call: make one (a stat is not traced)
        wait_for(
            lambda: (
                os.path.exists(f"/proc/{m.pid}/status") and "TracerPid:\t0" not in open(f"/proc/{m.pid}/status").read()
            )
        )
        fd = os.open(m / "img/chunks/1/1", os.O_WRONLY)
        try:
            os.write(fd, np.full((4, 5), 4.5, "<f4").tobytes())
            os.fsync(fd)
            calls = trace.read_text()
        finally:
            os.close(fd)
    finally:
        strace.send_signal(signal.SIGINT)
        strace.wait(timeout=10)
    chunk_dir = str(store / "img/c/1")
    lines = calls.splitlines()
    file_sync = [
        i
        for i, line in enumerate(lines)
        if line.split()[1].startswith(("fsync(", "fdatasync(")) and f"<{chunk_dir}/.zarrfs-tmp-" in line
    ]
    renames = [
        i
        for i, line in enumerate(lines)
        if "rename" in line and chunk_dir in line and (f"{chunk_dir}/1" in line or line.rstrip().endswith('"1") = 0'))
    ]
    dir_sync = [i for i, line in enumerate(lines) if line.split()[1].startswith("fsync(") and f"<{chunk_dir}>" in line]
    assert file_sync and renames and dir_sync, calls
    assert file_sync[0] < renames[0] < dir_sync[-1], calls
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(store / "img", mode="r")[4:8, 5:10], 4.5)
