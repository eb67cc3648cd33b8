"""N5 datasets with the `n5_default` codec (tensorstore's and z5py's blocks, edge blocks
whole and truncated; tests/data/zarr34/n5/) mounted: `data`, `data.npy`, chunk files and
`info` as tensorstore and zarr-n5 read them; a hostile block header an EIO with its log
line; values written through `data` read back by tensorstore's n5 driver."""

from __future__ import annotations

import errno
import os
import shutil
import struct

import numpy as np
import pytest
import tensorstore as ts

from tests.zarr34_corpus import N5_NAMES, N5_STORE, metadata, n5_expected, n5_expected_chunks


@pytest.fixture(scope="module")
def corpus(module_mount):
    return module_mount(N5_STORE, "--read-only")


def _little(values: np.ndarray) -> bytes:
    return values.astype(values.dtype.newbyteorder("<")).tobytes()


def _tensorstore_read(root, name) -> np.ndarray:
    return ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(root / name)}}).result().read().result()


@pytest.mark.parametrize("name", N5_NAMES)
def test_data_is_what_tensorstore_and_zarr_n5_read(corpus, name):
    assert (corpus / name / "data").read_bytes() == _little(n5_expected(name))
    assert np.array_equal(np.load(corpus / name / "data.npy"), n5_expected(name))


@pytest.mark.parametrize("name", N5_NAMES)
def test_chunk_files_are_the_blocks_padded_with_the_fill_value(corpus, name):
    chunks = list(n5_expected_chunks(name))
    assert sorted(os.listdir(corpus / name / "chunks")) == sorted({str(c[0]) for c, _ in chunks})
    for coords, chunk in chunks:
        path = corpus / name / "chunks" / os.path.join(*map(str, coords))
        assert path.read_bytes() == _little(chunk), coords


def test_info_names_the_codec_and_its_chain(corpus):
    info = (corpus / "z5_i32_zstd" / "info").read_text()
    for name in ("n5_default", "transpose", "bytes", "zstd"):
        assert name in info, info


def test_hostile_block_header_is_eio_with_one_log_line(mount, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(N5_STORE, copy)
    # a block claiming 2**32-1 x 2**32-1 elements in a dataset of blocks of 3 x 2
    (copy / "z5_u16_raw" / "0" / "0").write_bytes(struct.pack(">HH2I", 0, 2, 0xFFFFFFFF, 0xFFFFFFFF))
    m = mount(copy, "--read-only")
    with pytest.raises(OSError) as info:
        (m / "z5_u16_raw" / "chunks" / "0" / "0").read_bytes()
    assert info.value.errno == errno.EIO
    lines = [line for line in m.log_text().splitlines() if "z5_u16_raw" in line and "N5 block header" in line]
    assert lines, m.log_text()
    # the other blocks still read
    assert (m / "z5_u16_raw" / "chunks" / "1" / "1").read_bytes() == _little(
        dict(n5_expected_chunks("z5_u16_raw"))[(1, 1)]
    )


@pytest.mark.parametrize("name", ["ts_f32_gzip", "z5_i32_zstd", "z5_u16_raw", "ts_f64_blosc"])
def test_values_written_through_data_are_read_back_by_tensorstore(mount, tmp_path, name):
    copy = tmp_path / "s"
    shutil.copytree(N5_STORE, copy)
    before = n5_expected(name)
    values = (before[::-1] + 7).astype(before.dtype)  # every block changes, edge blocks too
    m = mount(copy)
    with open(m / name / "data", "r+b") as f:
        f.write(_little(values))
    assert (m / name / "data").read_bytes() == _little(values)
    m.unmount()
    assert _tensorstore_read(copy, name).tobytes() == values.tobytes()
    assert metadata(name, copy) == metadata(name, N5_STORE)


def test_part_of_a_truncated_edge_block_written_through_data(mount, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(N5_STORE, copy)
    values = n5_expected("z5_u16_raw").copy()  # N5 shape (7, 5), blocks (3, 2): block 2/2 is 1 x 1
    values[6, 3:5] = [4321, 1234]
    m = mount(copy)
    with open(m / "z5_u16_raw" / "data", "r+b") as f:
        f.seek((6 * 5 + 3) * 2)
        f.write(_little(values[6, 3:5]))
    m.unmount()
    assert _tensorstore_read(copy, "z5_u16_raw").tobytes() == values.tobytes()


def test_edge_chunk_file_written_whole_is_read_back_by_tensorstore(mount, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(N5_STORE, copy)
    values = n5_expected("z5_i32_zstd").copy()  # N5 shape (4, 5, 3), blocks (3, 2, 2)
    chunk = np.arange(12, dtype="<i4").reshape(3, 2, 2) - 6
    m = mount(copy)
    (m / "z5_i32_zstd" / "chunks" / "1" / "2" / "1").write_bytes(chunk.tobytes())
    m.unmount()
    values[3:4, 4:5, 2:3] = chunk[:1, :1, :1]  # the part of the chunk inside the array
    assert _tensorstore_read(copy, "z5_i32_zstd").tobytes() == values.tobytes()
