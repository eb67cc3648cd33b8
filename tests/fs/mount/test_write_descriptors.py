"""docs/semantics.md "Descriptors are shared": the way shells, dd, tee and forked programs write,
closing duplicate descriptors before, between and after their writes. A file open for
writing is judged at every close and dropped only at the last; each open is a
transaction of its own. Checked after unmount with zarr-python."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest
import zarr

from tests.fs.mount.write_fixtures import expected, run, store_snapshot

CHUNK = (4, 5)  # img: float32, so a chunk file holds 80 bytes


def chunk_bytes(value: float) -> bytes:
    return np.full(CHUNK, value, dtype="<f4").tobytes()


def stored_chunk(store, coords=(1, 1)) -> np.ndarray:
    r, c = coords
    return expected(store, "img")[r * 4 : (r + 1) * 4, c * 5 : (c + 1) * 5]


def test_cat_redirect_of_a_whole_chunk_is_stored(mount, store, tmp_path):
    (tmp_path / "c").write_bytes(chunk_bytes(7.5))
    m = mount(store)
    run("sh", "-c", f"cat {tmp_path / 'c'} > {m / 'img/chunks/1/1'}")
    assert (m / "img/chunks/1/1").read_bytes() == chunk_bytes(7.5)
    m.unmount()
    np.testing.assert_array_equal(stored_chunk(store), 7.5)


def test_cat_redirect_of_a_short_chunk_fails_and_leaves_the_chunk_whole(mount, store, tmp_path):
    before = store_snapshot(store)
    old = (stored_chunk(store)).astype("<f4").tobytes()
    (tmp_path / "short").write_bytes(b"\x01" * 20)
    m = mount(store)
    result = run("sh", "-c", f"cat {tmp_path / 'short'} > {m / 'img/chunks/1/1'}", check=False)
    assert result.returncode != 0 and "Invalid argument" in result.stderr
    assert (m / "img/chunks/1/1").read_bytes() == old  # never torn: old bytes, whole
    m.unmount()
    assert store_snapshot(store) == before
    assert "dropped at the last close" in m.log_text()


def test_two_cats_into_one_redirect_store_the_chunk_whole(mount, store, tmp_path):
    whole = chunk_bytes(3.25)
    (tmp_path / "a").write_bytes(whole[:40])
    (tmp_path / "b").write_bytes(whole[40:])
    m = mount(store)
    # the first cat's close judges half a chunk (EINVAL, kept); the second completes it
    run("sh", "-c", f"(cat {tmp_path / 'a'}; cat {tmp_path / 'b'}) > {m / 'img/chunks/1/1'}", check=False)
    m.unmount()
    np.testing.assert_array_equal(stored_chunk(store), 3.25)


def test_dd_with_small_blocks_truncates_then_stores_the_chunk(mount, store, tmp_path):
    (tmp_path / "c").write_bytes(chunk_bytes(-2.0))
    m = mount(store)
    run("dd", f"if={tmp_path / 'c'}", f"of={m / 'img/chunks/1/1'}", "bs=16", "status=none")
    m.unmount()
    np.testing.assert_array_equal(stored_chunk(store), -2.0)


def test_tee_into_a_chunk(mount, store, tmp_path):
    (tmp_path / "c").write_bytes(chunk_bytes(11.0))
    m = mount(store)
    run("sh", "-c", f"tee {m / 'img/chunks/1/1'} < {tmp_path / 'c'} > /dev/null")
    m.unmount()
    np.testing.assert_array_equal(stored_chunk(store), 11.0)


def test_appending_to_a_chunk_is_refused_and_changes_nothing(mount, store, tmp_path):
    before = store_snapshot(store)
    (tmp_path / "c").write_bytes(chunk_bytes(1.0))
    m = mount(store)
    result = run("sh", "-c", f"cat {tmp_path / 'c'} >> {m / 'img/chunks/1/1'}", check=False)
    assert result.returncode != 0 and "too large" in result.stderr.lower()
    m.unmount()
    assert store_snapshot(store) == before


def test_open_r_plus_b_partial_write_of_a_chunk(mount, store):
    before = stored_chunk(store).copy()
    m = mount(store)
    with open(m / "img/chunks/1/1", "r+b") as f:
        f.seek(8)
        f.write(np.float32(-9.5).tobytes())
        f.seek(0)
        assert f.read(12)[8:] == np.float32(-9.5).tobytes()  # this open sees its own write
    m.unmount()
    before.reshape(-1)[2] = -9.5
    np.testing.assert_array_equal(stored_chunk(store), before)


def test_one_writers_truncation_never_reaches_another_writers_chunk(mount, store):
    m = mount(store)
    path = m / "img/chunks/1/1"
    first = os.open(path, os.O_WRONLY | os.O_TRUNC)
    second = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(second, chunk_bytes(5.0))
    os.write(first, b"\x00" * 8)
    os.close(second)  # complete: stored, whatever the other open holds
    with pytest.raises(OSError) as info:
        os.close(first)  # its own copy is 8 bytes: refused, dropped
    assert info.value.errno == errno.EINVAL
    assert path.read_bytes() == chunk_bytes(5.0)
    m.unmount()
    np.testing.assert_array_equal(stored_chunk(store), 5.0)


def test_readers_see_the_stored_chunk_while_a_writer_is_halfway(mount, store):
    m = mount(store)
    path = m / "img/chunks/1/1"
    old = path.read_bytes()
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, chunk_bytes(6.0)[:40])
    assert path.read_bytes() == old
    assert path.stat().st_size == len(old)
    os.write(fd, chunk_bytes(6.0)[40:])
    os.close(fd)
    assert path.read_bytes() == chunk_bytes(6.0)
    m.unmount()


def test_a_descriptor_shared_with_a_child_process_stores_at_each_complete_close(mount, store):
    m = mount(store)
    fd = os.open(m / "img/chunks/1/1", os.O_WRONLY | os.O_TRUNC)
    pid = os.fork()
    if pid == 0:  # the child writes the chunk and closes its copy: stored then
        os.write(fd, chunk_bytes(8.0))
        try:
            os.close(fd)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert (m / "img/chunks/1/1").read_bytes() == chunk_bytes(8.0)
    os.close(fd)  # the parent's close: nothing new, nothing to refuse
    m.unmount()
    np.testing.assert_array_equal(stored_chunk(store), 8.0)


def test_echo_of_a_valid_document_into_zarr_json_is_stored(mount, store, tmp_path):
    doc = json.loads((store / "img/zarr.json").read_text())
    doc["attributes"] = {"units": "K"}
    (tmp_path / "new.json").write_text(json.dumps(doc))
    m = mount(store)
    run(
        "sh",
        "-c",
        f"echo '{json.dumps({'zarr_format': 3, 'node_type': 'group', 'attributes': {'a': 1}})}' > {m / 'zarr.json'}",
    )
    run("sh", "-c", f"cat {tmp_path / 'new.json'} > {m / 'img/zarr.json'}")
    m.unmount()
    assert dict(zarr.open_group(store, mode="r").attrs) == {"a": 1}
    assert dict(zarr.open_array(store / "img", mode="r").attrs) == {"units": "K"}


@pytest.mark.parametrize("content", ["{not json", "[" * 100_000 + "]" * 100_000])
def test_echo_of_invalid_json_into_zarr_json_fails_and_keeps_the_document(mount, store, tmp_path, content):
    before = store_snapshot(store)
    (tmp_path / "bad.json").write_text(content)
    m = mount(store)
    result = run("sh", "-c", f"cat {tmp_path / 'bad.json'} > {m / 'img/zarr.json'}", check=False)
    assert result.returncode != 0 and "Invalid argument" in result.stderr
    m.unmount()
    assert store_snapshot(store) == before
    assert "EINVAL" in m.log_text()


@pytest.mark.parametrize("name", ["...", "...."])
def test_names_of_periods_only_are_invalid(mount, store, name):
    before = store_snapshot(store)
    m = mount(store)
    with pytest.raises(OSError) as info:
        (m / name).mkdir()
    assert info.value.errno == errno.EINVAL
    with pytest.raises(OSError) as info:
        os.rename(m / "img", m / name)
    assert info.value.errno == errno.EINVAL
    m.unmount()
    assert store_snapshot(store) == before


def test_numpy_tofile_into_data_rewrites_the_array(mount, store):
    values = np.random.default_rng(4).random((10, 12)).astype("<f4")
    m = mount(store)
    values.tofile(m / "img/data")
    m.unmount()
    np.testing.assert_array_equal(expected(store, "img"), values)
