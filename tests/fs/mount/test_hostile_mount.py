"""A hostile store through a real mount (docs/errors.md): links out of the store, a FIFO and a
link to /dev/zero as chunk keys, and a zstd bomb. Nothing outside the store is served,
removed or changed; every bad chunk answers at once (fill value or EIO); the daemon's
memory does not grow with the bomb; the daemon unmounts cleanly. Data by zarr-python."""

from __future__ import annotations

import errno
import os
import subprocess
import threading
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import pytest

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

from tests.conftest import tree_snapshot  # noqa: E402

CHUNK = 1024  # int32: 4 KiB chunks
GOOD = np.arange(5 * CHUNK, dtype="<i4") + 1
SECRET = np.full(CHUNK, 0x5EC2E7, dtype="<i4")
LINKED, FIFO, ZERO, BOMB = 1, 2, 3, 4  # the chunks of `arr` that are spoiled


def write_hostile_store(base: Path) -> tuple[Path, Path]:
    """(store root, a directory beside it that the store's links lead to)."""
    root, outside = base / "h.zarr", base / "outside"
    secret = zarr.create_array(
        str(outside / "secret_arr"), shape=(CHUNK,), chunks=(CHUNK,), dtype="<i4", compressors=[zc.ZstdCodec()]
    )
    secret[...] = SECRET
    (outside / "secret.txt").write_text("secret")
    top = zarr.open_group(str(root), mode="w")
    arr = top.create_array("arr", shape=GOOD.shape, chunks=(CHUNK,), dtype="<i4", compressors=[zc.ZstdCodec()])
    arr[...] = GOOD
    top.create_group("grp").create_array("inner", shape=(CHUNK,), chunks=(CHUNK,), dtype="<i4")[...] = 7
    chunks = root / "arr" / "c"
    for index in (LINKED, FIFO, ZERO):
        (chunks / str(index)).unlink()
    os.symlink(outside / "secret_arr" / "c" / "0", chunks / str(LINKED))
    os.mkfifo(chunks / str(FIFO))
    os.symlink("/dev/zero", chunks / str(ZERO))
    (chunks / str(BOMB)).write_bytes(bytes(numcodecs.Zstd(level=1).encode(np.zeros(1 << 30, "u1"))))
    os.symlink(outside, root / "link_dir")
    os.symlink(outside / "secret_arr", root / "linked_arr")
    os.symlink(outside, root / "grp" / "sub_link")
    return root, outside


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, module_mount):
    root, outside = write_hostile_store(tmp_path_factory.mktemp("hostile"))
    before = tree_snapshot(root), tree_snapshot(outside)
    yield module_mount(root, "--read-only"), root, outside
    assert (tree_snapshot(root), tree_snapshot(outside)) == before, "a read changed the store or the outside"


def _fails_with(errno_: int, fn, *args) -> None:
    with pytest.raises(OSError) as info:
        fn(*args)
    assert info.value.errno == errno_, f"{fn.__name__}{args}: {info.value}"


def _read_promptly(path: Path, timeout: float = 10.0) -> bytes | OSError:
    """The file's bytes, or the error reading it gave; fails if it takes past `timeout`."""
    result: list[bytes | OSError] = []

    def read() -> None:
        try:
            result.append(path.read_bytes())
        except OSError as exc:
            result.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    assert result, f"reading {path} did not answer within {timeout}s"
    return result[0]


def test_links_out_of_the_store_are_not_shown(hostile):
    m, _, _ = hostile
    assert sorted(os.listdir(m.path)) == ["arr", "grp", "zarr.json"]
    assert sorted(os.listdir(m / "grp")) == ["inner", "zarr.json"]
    for name in ("link_dir", "linked_arr", "link_dir/secret_arr", "link_dir/secret_arr/data", "grp/sub_link"):
        _fails_with(errno.ENOENT, os.stat, m / name)


def test_a_chunk_linked_out_of_the_store_reads_as_the_fill_value(hostile):
    m, _, _ = hostile
    assert (m / "arr" / "chunks" / str(LINKED)).read_bytes() == bytes(CHUNK * 4)
    assert (m / "arr" / "chunks" / "0").read_bytes() == GOOD[:CHUNK].tobytes()
    with open(m / "arr" / "data", "rb") as data:
        data.seek(LINKED * CHUNK * 4)
        assert data.read(CHUNK * 4) == bytes(CHUNK * 4)


@pytest.mark.parametrize("chunk", [FIFO, ZERO], ids=["fifo", "dev-zero"])
def test_a_fifo_or_dev_zero_chunk_answers_at_once_as_the_fill_value(hostile, chunk):
    m, _, _ = hostile
    assert _read_promptly(m / "arr" / "chunks" / str(chunk)) == bytes(CHUNK * 4)
    assert (m / "arr" / "chunks" / "0").read_bytes() == GOOD[:CHUNK].tobytes()


def test_a_zstd_bomb_is_eio_and_the_daemon_does_not_grow(hostile):
    m, _, _ = hostile
    status = Path(f"/proc/{m.pid}/status")

    def peak_kib() -> int:
        line = next(line for line in status.read_text().splitlines() if line.startswith("VmHWM:"))
        return int(line.split()[1])

    (m / "arr" / "chunks" / "0").read_bytes()
    before = peak_kib()
    error = _read_promptly(m / "arr" / "chunks" / str(BOMB))
    assert isinstance(error, OSError) and error.errno == errno.EIO, error
    result = subprocess.run(["cat", str(m / "arr" / "data")], capture_output=True, timeout=30)
    assert result.returncode != 0 and b"Input/output error" in result.stderr
    assert peak_kib() - before < 16 << 10, "the daemon's peak memory grew by more than 16 MiB"
    assert any("/arr" in line and "larger than its chunk can need" in line for line in m.log_text().splitlines())


def test_rm_r_and_rmdir_never_reach_outside_the_store(mount, tmp_path):
    root, outside = write_hostile_store(tmp_path)
    before_outside = tree_snapshot(outside)
    m = mount(root)
    for path in ("link_dir/secret_arr", "linked_arr", "grp/sub_link"):
        _fails_with(errno.ENOENT, os.rmdir, m / path)
    for path in ("link_dir", "linked_arr", "link_dir/secret_arr"):
        assert subprocess.run(["rm", "-r", str(m / path)], capture_output=True).returncode != 0
    subprocess.run(["rm", "-r", str(m / "arr"), str(m / "grp")], check=True, capture_output=True)
    assert sorted(os.listdir(m.path)) == ["zarr.json"]
    m.unmount()
    assert tree_snapshot(outside) == before_outside
    # the store's own keys went; the links and the FIFO were neither followed nor removed
    left = tree_snapshot(root)
    assert left["link_dir"] == f"-> {outside}" and left["arr/c/2"] == "special"
    assert not [key for key, value in left.items() if isinstance(value, bytes) and key != "zarr.json"]
