"""The `n5_default` codec through the format layer: N5 datasets tensorstore and z5py wrote
(edge blocks whole and truncated; tests/data/zarr34/n5/) read as tensorstore and zarr-n5
read them; values written back stored as blocks tensorstore reads, as tensorstore stores
them; hostile block headers refused without allocating past the chunk."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
import tracemalloc

import numcodecs
import numpy as np
import pytest
import tensorstore as ts

from tests.zarr34_corpus import N5_NAMES, N5_STORE, metadata, n5_expected
from zarrfs.format import Array, ChunkDecodeError, MetadataError
from zarrfs.format.errors import ChunkTooLargeError


def _header(path) -> tuple[int, tuple[int, ...]]:
    data = path.read_bytes()
    mode, ndim = struct.unpack_from(">HH", data)
    return mode, struct.unpack_from(f">{ndim}I", data, 4)


def _blocks(root, name):
    return sorted(p.relative_to(root / name) for p in (root / name).rglob("*") if p.is_file() and "json" not in p.name)


def _tensorstore_read(root, name) -> np.ndarray:
    return ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(root / name)}}).result().read().result()


def test_corpus_holds_whole_and_truncated_edge_blocks():
    assert len(N5_NAMES) >= 9
    for name in N5_NAMES:
        doc = metadata(name, N5_STORE)
        assert [c["name"] for c in doc["codecs"]] == ["n5_default"]
        assert doc["chunk_key_encoding"] == {"name": "v2", "configuration": {"separator": "/"}}
    chunk = tuple(metadata("z5_u16_raw", N5_STORE)["chunk_grid"]["configuration"]["chunk_shape"])
    assert _header(N5_STORE / "z5_u16_raw" / "2" / "2") == (0, (1, 1)) and chunk == (3, 2)
    assert _header(N5_STORE / "ts_u16_raw" / "2" / "2") == (0, (2, 3))


@pytest.mark.parametrize("name", N5_NAMES)
def test_corpus_reads_as_tensorstore_and_zarr_n5_read_it(open_hierarchy, name):
    node = open_hierarchy(N5_STORE, read_only=True).open_node(name)
    assert isinstance(node, Array)
    ours, theirs = node.read(), n5_expected(name)
    assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes()
    assert _tensorstore_read(N5_STORE, name).tobytes() == theirs.tobytes()  # the corpus is still what it read


def _body(path, doc) -> bytes:
    """A block's elements, its compressor undone."""
    data = path.read_bytes()
    ndim = struct.unpack_from(">HH", data)[1]
    body = data[4 + 4 * ndim :]
    inner = doc["codecs"][0]["configuration"]["codecs"]
    compressor = inner[2]["name"] if len(inner) > 2 else None
    if compressor is None:
        return body
    return bytes(
        {"gzip": gzip.decompress, "zstd": numcodecs.Zstd().decode, "blosc": numcodecs.Blosc().decode}[compressor](body)
    )


@pytest.mark.parametrize("name", N5_NAMES)
def test_values_written_are_stored_as_blocks_tensorstore_reads(open_hierarchy, tmp_path, name):
    copy = tmp_path / "s"
    shutil.copytree(N5_STORE, copy)
    for block in _blocks(copy, name):
        (copy / name / block).unlink()
    values = n5_expected(name)
    open_hierarchy(copy).open_node(name).write(Ellipsis, values)
    assert _tensorstore_read(copy, name).tobytes() == values.tobytes()
    assert open_hierarchy(copy, read_only=True).open_node(name).read().tobytes() == values.tobytes()
    assert _blocks(copy, name) == _blocks(N5_STORE, name)
    if name.startswith("ts_"):  # tensorstore stores whole edge blocks too: the same blocks
        doc = metadata(name, N5_STORE)
        for block in _blocks(copy, name):
            assert _header(copy / name / block) == _header(N5_STORE / name / block), block
            assert _body(copy / name / block, doc) == _body(N5_STORE / name / block, doc), block


def test_a_truncated_edge_block_rewritten_in_part_keeps_the_rest(open_hierarchy, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(N5_STORE, copy)
    values = n5_expected("z5_u16_raw").copy()  # N5 shape (7, 5), blocks (3, 2)
    values[6, 4] = 12345
    open_hierarchy(copy).open_node("z5_u16_raw").write((slice(6, 7), slice(4, 5)), values[6:7, 4:5])
    assert _tensorstore_read(copy, "z5_u16_raw").tobytes() == values.tobytes()


# ---------------------------------------------------------------- hostile blocks
def _hostile(tmp_path, name: str, block: str, data: bytes):
    copy = tmp_path / "s"
    shutil.copytree(N5_STORE, copy)
    (copy / name / block).write_bytes(data)
    return copy


def _u16_block(mode=0, dims=(3, 2), ndim=None, body=None) -> bytes:
    ndim = len(dims) if ndim is None else ndim
    body = np.arange(6, dtype=">u2").tobytes() if body is None else body
    return struct.pack(f">HH{len(dims)}I", mode, ndim, *dims) + body


@pytest.mark.parametrize(
    ("data", "error", "words"),
    [
        (_u16_block(mode=1), ChunkDecodeError, "varlength"),
        (_u16_block(mode=2), ChunkDecodeError, "object"),
        (_u16_block(mode=7), ChunkDecodeError, "default mode"),
        (_u16_block(ndim=3), ChunkDecodeError, "3 dimensions"),
        (b"\x00\x00\x00", ChunkDecodeError, "shorter than its header"),
        (struct.pack(">HHI", 0, 2, 3), ChunkDecodeError, "shorter than its header"),
        (_u16_block(body=b"\x00" * 11), ChunkDecodeError, "decodes to 11 bytes"),
        (_u16_block(dims=(3, 3), body=b""), ChunkTooLargeError, "more elements"),
        (_u16_block(dims=(0xFFFFFFFF, 0xFFFFFFFF), body=b""), ChunkTooLargeError, "more elements"),
    ],
    ids=["varlength", "object", "unknown-mode", "ndim", "3-bytes", "cut-header", "short-body", "larger", "huge"],
)
def test_hostile_header_is_refused(open_hierarchy, tmp_path, data, error, words):
    copy = _hostile(tmp_path, "z5_u16_raw", "0/0", data)
    node = open_hierarchy(copy, read_only=True).open_node("z5_u16_raw")
    tracemalloc.start()
    try:
        with pytest.raises(error, match=words):
            node.read((slice(0, 3), slice(0, 2)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("dims", [(4,), (0xFFFFFFFF,)])
def test_compressed_body_past_the_chunk_is_refused_unallocated(open_hierarchy, tmp_path, dims):
    # gzip bodies of a chunk of 4 uint8 inflating to 128 KiB, small enough to be read
    bomb = gzip.compress(bytes(128 << 10), compresslevel=9)
    data = struct.pack(">HHI", 0, 1, *dims) + bomb
    node = open_hierarchy(_hostile(tmp_path, "z5_u8_gzip", "0", data), read_only=True).open_node("z5_u8_gzip")
    tracemalloc.start()
    try:
        with pytest.raises(ChunkTooLargeError):
            node.read(slice(0, 4))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10


def test_block_longer_along_a_dimension_is_cut_to_the_chunk(open_hierarchy, tmp_path):
    # the registry: pad or truncate the block to the chunk (6 elements either way here)
    block = np.arange(6, dtype="u2").reshape(6, 1)
    data = _u16_block(dims=(6, 1), body=block.T.astype(">u2").tobytes())
    node = open_hierarchy(_hostile(tmp_path, "z5_u16_raw", "0/0", data), read_only=True).open_node("z5_u16_raw")
    assert node.read((slice(0, 3), slice(0, 2))).tolist() == [[0, 0], [1, 0], [2, 0]]


# ---------------------------------------------------------------- metadata
def _with_inner(tmp_path, inner: list):
    copy = tmp_path / "s"
    shutil.copytree(N5_STORE, copy)
    path = copy / "z5_u16_raw" / "zarr.json"
    doc = json.loads(path.read_text())
    doc["codecs"][0]["configuration"]["codecs"] = inner
    path.write_text(json.dumps(doc))
    return copy


TRANSPOSE = {"name": "transpose", "configuration": {"order": [1, 0]}}
BIG = {"name": "bytes", "configuration": {"endian": "big"}}


@pytest.mark.parametrize(
    ("inner", "words"),
    [
        ([{"name": "transpose", "configuration": {"order": [0, 1]}}, BIG], "reversing every dimension"),
        ([BIG], "2 or 3 codecs"),
        ([TRANSPOSE, {"name": "bytes", "configuration": {"endian": "little"}}], "big-endian"),
        ([TRANSPOSE, {"name": "bytes"}], "big-endian"),
        ([TRANSPOSE, BIG, {"name": "gzip"}, {"name": "zstd"}], "2 or 3 codecs"),
        ([TRANSPOSE, BIG, TRANSPOSE], "after the array-to-bytes codec"),
    ],
)
def test_nested_chain_other_than_the_registry_allows_is_refused(open_hierarchy, tmp_path, inner, words):
    with pytest.raises(MetadataError, match=words):
        open_hierarchy(_with_inner(tmp_path, inner), read_only=True).open_node("z5_u16_raw")
