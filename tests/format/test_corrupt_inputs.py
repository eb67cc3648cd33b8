"""Corrupt or unsupported inputs give a clear exception of the right kind, never a wrong
answer: damaged chunks and shards, bad checksums, invalid or unknown metadata."""

from __future__ import annotations

import gzip
import json
import struct
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from zarrfs.format import (
    ChecksumError,
    ChunkDecodeError,
    MetadataError,
    NodeNotFoundError,
    UnsupportedError,
)

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

VALUES = np.arange(64, dtype="<i4").reshape(8, 8)


def _zarr_array(root: Path, name: str = "a", **options) -> Path:
    options.setdefault("chunks", (4, 4))
    array = zarr.create_array(str(root / name), shape=VALUES.shape, dtype=VALUES.dtype, **options)
    array[...] = VALUES + 1
    return root / name


def _edit_document(path: Path, edit) -> None:
    name = "zarr.json" if (path / "zarr.json").exists() else ".zarray"
    doc = json.loads((path / name).read_text())
    edit(doc)
    (path / name).write_text(json.dumps(doc))


# ------------------------------------------------------------------ damaged chunks


@pytest.mark.parametrize(
    "compressors", [None, [zc.GzipCodec()], [zc.ZstdCodec()], [zc.BloscCodec()]], ids=["raw", "gzip", "zstd", "blosc"]
)
def test_truncated_chunk_is_a_chunk_decode_error(open_hierarchy, tmp_path, compressors):
    path = _zarr_array(tmp_path, compressors=compressors)
    chunk = path / "c" / "0" / "1"
    chunk.write_bytes(chunk.read_bytes()[:-5])
    array = open_hierarchy(tmp_path).open_node("a")
    with pytest.raises(ChunkDecodeError):
        array.read()
    assert np.array_equal(array.read((slice(4, 8), slice(0, 8))), VALUES[4:] + 1)  # other chunks still read


@pytest.mark.parametrize("compressor", ["zlib", "blosc", "lz4"])
def test_truncated_v2_chunk_is_a_chunk_decode_error(open_hierarchy, tmp_path, compressor):
    import numcodecs

    path = _zarr_array(tmp_path, zarr_format=2, compressors=numcodecs.get_codec({"id": compressor}))
    (path / "1.1").write_bytes((path / "1.1").read_bytes()[:-3])
    with pytest.raises(ChunkDecodeError):
        open_hierarchy(tmp_path).open_node("a").read()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_chunk_of_the_wrong_decoded_size_is_a_chunk_decode_error(open_hierarchy, tmp_path, zarr_format):
    import numcodecs

    if zarr_format == 3:
        path = _zarr_array(tmp_path, compressors=[zc.GzipCodec()])
        key = path / "c" / "1" / "0"
        key.write_bytes(gzip.compress(VALUES[:4, :3].tobytes()))  # 12 elements, not 16
    else:
        path = _zarr_array(tmp_path, zarr_format=2, compressors=numcodecs.Zlib())
        key = path / "1.0"
        key.write_bytes(numcodecs.Zlib().encode(VALUES[:4, :5].tobytes()))  # 20 elements, not 16
    with pytest.raises(ChunkDecodeError, match="expected"):
        open_hierarchy(tmp_path).open_node("a").read_chunks([(1, 0)])


def test_bad_crc32c_is_a_checksum_error(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path, compressors=[zc.Crc32cCodec()])
    chunk = path / "c" / "0" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[3] ^= 0x10
    chunk.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="crc32c"):
        open_hierarchy(tmp_path).open_node("a").read()


def test_bad_crc32c_in_a_shard_index_is_a_checksum_error(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path, chunks=(2, 2), shards=(4, 4), compressors=None)
    shard = path / "c" / "1" / "1"
    raw = bytearray(shard.read_bytes())
    raw[-10] ^= 0x01  # inside the index (the default index ends with its crc32c)
    shard.write_bytes(bytes(raw))
    with pytest.raises(ChecksumError):
        open_hierarchy(tmp_path).open_node("a").read((slice(4, 6), slice(4, 6)))


def _shard_with_index(path: Path, edit) -> None:
    """Rewrite the index of shard c/0/0 (index at the end, bytes + crc32c) with `edit`."""
    from crc32c import crc32c

    shard = path / "c" / "0" / "0"
    raw = shard.read_bytes()
    index_size = 2 * 2 * 16 + 4
    index = np.frombuffer(raw[-index_size:-4], dtype="<u8").reshape(2, 2, 2).copy()
    edit(index)
    body = index.tobytes()
    shard.write_bytes(raw[:-index_size] + body + struct.pack("<I", crc32c(body)))


@pytest.mark.parametrize("where", ["offset", "length"])
def test_shard_index_pointing_past_the_end_is_a_chunk_decode_error(open_hierarchy, tmp_path, where):
    path = _zarr_array(tmp_path, chunks=(2, 2), shards=(4, 4), compressors=None)
    size = (path / "c" / "0" / "0").stat().st_size

    def edit(index):
        if where == "offset":
            index[1, 1, 0] = size + 100
        else:
            index[1, 1, 1] = size

    _shard_with_index(path, edit)
    array = open_hierarchy(tmp_path).open_node("a")
    # a length past the end is also more than an inner chunk can need: refused unread
    with pytest.raises(ChunkDecodeError, match=r"past the end|more than the"):
        array.read_chunks([(1, 1)])
    with pytest.raises(ChunkDecodeError):
        array.read()


def test_shard_index_pointing_past_the_end_is_an_error_when_rewriting(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path, chunks=(2, 2), shards=(4, 4), compressors=None)
    size = (path / "c" / "0" / "0").stat().st_size
    _shard_with_index(path, lambda index: index.__setitem__((0, 1, 0), size))
    with pytest.raises(ChunkDecodeError, match="past the end"):
        open_hierarchy(tmp_path).open_node("a").write((0, 0), 5)


def test_shard_shorter_than_its_index_is_a_chunk_decode_error(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path, chunks=(2, 2), shards=(4, 4), compressors=None)
    (path / "c" / "0" / "0").write_bytes(b"\x01\x02\x03")
    with pytest.raises(ChunkDecodeError):
        open_hierarchy(tmp_path).open_node("a").read()


def test_corrupt_vlen_chunk_is_a_chunk_decode_error(open_hierarchy, tmp_path):
    array = zarr.create_array(str(tmp_path / "s"), shape=(4,), chunks=(4,), dtype=str, compressors=None)
    array[...] = ["a", "bb", "ccc", "dddd"]
    chunk = tmp_path / "s" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-2])
    with pytest.raises(ChunkDecodeError):
        open_hierarchy(tmp_path).open_node("s").read()


# ------------------------------------------------------------------ metadata


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("zarr.json", "{not json"),
        ("zarr.json", "[1, 2]"),
        ("zarr.json", '{"zarr_format": 3, "node_type": "array"}'),
        (".zarray", '{"zarr_format": 2,'),
        (".zattrs", "\xff\xfe"),
    ],
)
def test_invalid_metadata_document_is_a_metadata_error(open_hierarchy, tmp_path, name, text):
    zarr_format = 3 if name == "zarr.json" else 2
    path = _zarr_array(tmp_path, zarr_format=zarr_format)
    (path / name).write_bytes(text.encode("latin-1"))
    with pytest.raises(MetadataError, match=name):
        open_hierarchy(tmp_path).open_node("a")


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (lambda d: d.update(fill_value="not a number"), MetadataError),
        (lambda d: d.update(fill_value=2**40), MetadataError),
        (lambda d: d.update(shape=[8]), MetadataError),
        (lambda d: d.update(zarr_format=4), MetadataError),
        (lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[0, 4]), MetadataError),
        (lambda d: d.update(data_type="int128"), UnsupportedError),
        (lambda d: d.update(chunk_grid={"name": "rectilinear", "configuration": {}}), UnsupportedError),
        (lambda d: d.update(chunk_key_encoding={"name": "hashed"}), UnsupportedError),
        (lambda d: d["codecs"].append({"name": "snappy-frobnicate"}), UnsupportedError),
        (lambda d: d["codecs"].insert(0, {"name": "transpose", "configuration": {"order": [0, 1, 2]}}), MetadataError),
        (lambda d: d.update(codecs=[{"name": "gzip"}]), MetadataError),
        (lambda d: d.update(dimension_names=["x"]), MetadataError),
    ],
    ids=[
        "fill_type",
        "fill_range",
        "chunk_rank",
        "zarr_format",
        "zero_chunk",
        "data_type",
        "chunk_grid",
        "key_encoding",
        "codec",
        "transpose_rank",
        "no_array_to_bytes",
        "dimension_names",
    ],
)
def test_invalid_or_unknown_v3_metadata_cannot_be_opened(open_hierarchy, tmp_path, edit, error):
    path = _zarr_array(tmp_path)
    _edit_document(path, edit)
    with pytest.raises(error):
        open_hierarchy(tmp_path).open_node("a")


def test_unknown_codec_is_unsupported_with_its_name(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path)
    _edit_document(path, lambda d: d["codecs"].append({"name": "frobnicate", "configuration": {}}))
    with pytest.raises(UnsupportedError, match="frobnicate"):
        open_hierarchy(tmp_path).open_node("a")


@pytest.mark.parametrize("package", ["pcodec", "zfpy"])
def test_numcodecs_serializer_without_its_package_is_unsupported_naming_the_package(
    open_hierarchy, tmp_path, monkeypatch, package
):
    path = _zarr_array(tmp_path)
    _edit_document(path, lambda d: d.update(codecs=[{"name": f"numcodecs.{package}", "configuration": {}}]))
    monkeypatch.setitem(sys.modules, package, None)  # `import pcodec` fails as where it is not installed
    with pytest.raises(UnsupportedError, match=f"needs the Python package '{package}'"):
        open_hierarchy(tmp_path).open_node("a")


def test_unknown_v2_compressor_is_unsupported(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path, zarr_format=2)
    _edit_document(path, lambda d: d.update(compressor={"id": "frobnicate"}))
    with pytest.raises(UnsupportedError, match="frobnicate"):
        open_hierarchy(tmp_path).open_node("a")


@pytest.mark.parametrize("value", [{"must_understand": True, "x": 1}, 42, {"x": 1}])
def test_unknown_field_that_must_be_understood_cannot_be_opened(open_hierarchy, tmp_path, value):
    path = _zarr_array(tmp_path)
    _edit_document(path, lambda d: d.update(frobnicate=value))
    with pytest.raises(UnsupportedError, match="frobnicate"):
        open_hierarchy(tmp_path).open_node("a")


def test_unknown_field_with_must_understand_false_is_ignored(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path)
    _edit_document(path, lambda d: d.update(frobnicate={"must_understand": False, "x": 1}))
    assert np.array_equal(open_hierarchy(tmp_path).open_node("a").read(), VALUES + 1)


def test_unknown_field_in_a_group_cannot_be_opened(open_hierarchy, tmp_path):
    zarr.open_group(str(tmp_path / "g"), mode="w")
    _edit_document(tmp_path / "g", lambda d: d.update(extension={"must_understand": True}))
    with pytest.raises(UnsupportedError, match="extension"):
        open_hierarchy(tmp_path).open_node("g")


def test_extension_data_type_with_must_understand_cannot_be_opened(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path)
    _edit_document(path, lambda d: d.update(data_type={"name": "frobnicated_int", "must_understand": True}))
    with pytest.raises(UnsupportedError, match="frobnicated_int"):
        open_hierarchy(tmp_path).open_node("a")


def test_unknown_storage_transformer_cannot_be_opened(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path)
    _edit_document(path, lambda d: d.update(storage_transformers=[{"name": "frobnicate", "configuration": {}}]))
    with pytest.raises(UnsupportedError, match="storage transformer"):
        open_hierarchy(tmp_path).open_node("a")


def test_empty_storage_transformers_are_fine(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path)
    _edit_document(path, lambda d: d.update(storage_transformers=[]))
    assert np.array_equal(open_hierarchy(tmp_path).open_node("a").read(), VALUES + 1)


def test_sharding_inner_chunks_that_do_not_divide_the_shard_are_a_metadata_error(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path, chunks=(2, 2), shards=(4, 4))
    _edit_document(path, lambda d: d["codecs"][0]["configuration"].update(chunk_shape=[3, 2]))
    with pytest.raises(MetadataError, match="divide"):
        open_hierarchy(tmp_path).open_node("a")


def test_registry_data_type_zarrfs_does_not_know_is_unsupported_by_name(open_hierarchy, tmp_path):
    path = _zarr_array(tmp_path)
    _edit_document(path, lambda d: d.update(data_type="complex_float6_e3m2fn"))
    with pytest.raises(UnsupportedError, match="complex_float6_e3m2fn"):
        open_hierarchy(tmp_path).open_node("a")


def test_missing_node_is_node_not_found(open_hierarchy, tmp_path):
    _zarr_array(tmp_path)
    with pytest.raises(NodeNotFoundError):
        open_hierarchy(tmp_path).open_node("nothing/here")
