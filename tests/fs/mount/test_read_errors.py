"""Bad data through a real mount (docs/errors.md): a node whose metadata cannot be understood is a
directory whose reads fail with EIO, a corrupt chunk read through `data` fails with EIO
rather than giving wrong bytes, each with a line in the log, and the daemon goes on
serving the nodes beside them."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

# one page per chunk, so that a good chunk's page never shares a read with a bad one
CHUNK = 1024
GOOD = np.arange(4 * CHUNK, dtype="<i4")
CORRUPT_CHUNK = 2  # the chunk spoiled in each corrupt array


def _edit(document: Path, change) -> None:
    doc = json.loads(document.read_text())
    change(doc)
    document.write_text(json.dumps(doc))


def write_hierarchy(root: Path) -> None:
    top = zarr.open_group(str(root), mode="w")
    for name in ("good", "ext", "codec", "transformer", "garbage", "crc", "v2garbage"):
        compressors = [zc.Crc32cCodec()] if name == "crc" else [zc.ZstdCodec()]
        if name == "v2garbage":
            array = zarr.create_array(str(root / name), shape=GOOD.shape, chunks=(CHUNK,), dtype="<i4", zarr_format=2)
        else:
            array = top.create_array(name, shape=GOOD.shape, chunks=(CHUNK,), dtype="<i4", compressors=compressors)
        array[:] = GOOD
    top.create_group("extgroup")
    (root / "badjson").mkdir()
    (root / "badjson" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array", ')
    _edit(root / "ext" / "zarr.json", lambda d: d.update(my_extension={"name": "x", "must_understand": True}))
    _edit(root / "extgroup" / "zarr.json", lambda d: d.update(my_extension={"name": "x", "must_understand": True}))
    _edit(root / "codec" / "zarr.json", lambda d: d["codecs"].append({"name": "no_such_codec"}))
    _edit(
        root / "transformer" / "zarr.json",
        lambda d: d.update(storage_transformers=[{"name": "no_such_transformer", "configuration": {}}]),
    )
    (root / "garbage" / "c" / str(CORRUPT_CHUNK)).write_bytes(os.urandom(700))
    (root / "v2garbage" / str(CORRUPT_CHUNK)).write_bytes(os.urandom(700))
    crc_chunk = root / "crc" / "c" / str(CORRUPT_CHUNK)
    spoiled = bytearray(crc_chunk.read_bytes())
    spoiled[100] ^= 0xFF
    crc_chunk.write_bytes(bytes(spoiled))


@pytest.fixture(scope="module")
def broken(tmp_path_factory, module_mount):
    root = tmp_path_factory.mktemp("errors") / "h.zarr"
    write_hierarchy(root)
    return module_mount(root)


def _fails_with(errno_: int, fn, *args) -> None:
    with pytest.raises(OSError) as info:
        fn(*args)
    assert info.value.errno == errno_, f"{fn.__name__}{args}: {info.value}"


def _assert_serving(m) -> None:
    assert (m / "good" / "data").read_bytes() == GOOD.tobytes()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("ext", "my_extension"),
        ("extgroup", "my_extension"),
        ("badjson", "JSON"),
        ("codec", "no_such_codec"),
        ("transformer", "no_such_transformer"),
    ],
)
def test_unreadable_node_is_a_directory_whose_reads_fail_with_eio(broken, name, reason):
    m = broken
    assert name in os.listdir(m.path)
    assert (m / name).is_dir()
    _fails_with(errno.EIO, os.listdir, m / name)
    _fails_with(errno.EIO, os.stat, m / name / "zarr.json")
    _fails_with(errno.EIO, (m / name / "data").read_bytes)
    lines = [line for line in m.log_text().splitlines() if f"/{name}" in line and reason.lower() in line.lower()]
    assert lines, f"no log line names /{name} and {reason!r}:\n{m.log_text()}"
    _assert_serving(m)


@pytest.mark.parametrize("name", ["garbage", "crc", "v2garbage"])
def test_corrupt_chunk_read_through_data_fails_with_eio(broken, name):
    m = broken
    data = m / name / "data"
    assert os.stat(data).st_size == GOOD.nbytes
    result = subprocess.run(["cat", str(data)], capture_output=True)
    assert result.returncode != 0 and b"Input/output error" in result.stderr, result
    fd = os.open(data, os.O_RDONLY)
    try:
        chunk_bytes = CHUNK * 4
        _fails_with(errno.EIO, os.pread, fd, 16, CORRUPT_CHUNK * chunk_bytes + 8)
        good = os.pread(fd, chunk_bytes, 0)  # the chunks beside it still read
        assert good == GOOD[:CHUNK].tobytes()
    finally:
        os.close(fd)
    _fails_with(errno.EIO, (m / name / "chunks" / str(CORRUPT_CHUNK)).read_bytes)
    assert (m / name / "chunks" / "1").read_bytes() == GOOD[CHUNK : 2 * CHUNK].tobytes()
    assert any(f"/{name}" in line and "EIO" in line for line in m.log_text().splitlines()), m.log_text()
    _assert_serving(m)


def test_errors_leave_no_traceback_and_the_daemon_serving(broken):
    m = broken
    for name in ("ext", "garbage", "crc"):
        subprocess.run(["cat", str(m / name / "data")], capture_output=True)
    _assert_serving(m)
    assert "Traceback" not in m.log_text()


def test_a_corrupt_chunk_read_by_cat_logs_one_line_naming_its_key(mount, tmp_path):
    """The kernel asks again for what failed (its readahead, then the page alone): still one
    failure to the reader, so one line, which names the chunk to look at."""
    root = tmp_path / "h.zarr"
    write_hierarchy(root)
    m = mount(root)
    result = subprocess.run(["cat", str(m / "garbage" / "data")], capture_output=True)
    assert result.returncode != 0 and b"Input/output error" in result.stderr, result
    lines = [line for line in m.log_text().splitlines() if "/garbage/data" in line and "EIO" in line]
    assert len(lines) == 1, m.log_text()
    assert f"garbage/c/{CORRUPT_CHUNK}: " in lines[0], lines[0]
