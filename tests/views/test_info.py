"""The `info` file: what it says about arrays and groups written by zarr-python, checked
against the arrays themselves and the store's own listing."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import pytest

from zarrfs.format import Hierarchy
from zarrfs.store import StoreUnavailableError, open_store
from zarrfs.views.info import ATTRIBUTES_LIMIT, render_info

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

GEO_PROJ = "f010a634-3525-416e-9320-8f44b5bc352c"
CONVENTIONS = {
    "zarr_conventions_version": "0.1.0",
    "zarr_conventions_metadata": {
        GEO_PROJ: {"version": "0.2.1", "name": "geo:proj", "configuration": {"code": "epsg:4326"}},
    },
}


def info_of(root: Path, path: str) -> str:
    return render_info(Hierarchy(open_store(str(root))).open_node(path), path)


def fields(info: str) -> dict[str, str]:
    """The `label: value` lines of an info text."""
    return dict(re.findall(r"^(\w[\w ]*):[ ]+(\S.*)$", info, re.MULTILINE))


def stored_objects(array_dir: Path) -> tuple[int, int]:
    """(count, bytes) of the chunk (or shard) files the store holds for an array."""
    count = size = 0
    for directory, _, files in os.walk(array_dir):
        for name in files:
            if name not in ("zarr.json", ".zarray", ".zattrs"):
                count += 1
                size += os.path.getsize(os.path.join(directory, name))
    return count, size


def document_codec_names(array_dir: Path) -> list[str]:
    codecs = json.loads((array_dir / "zarr.json").read_text())["codecs"]
    names = []
    while codecs:
        codec = codecs.pop(0)
        names.append(codec["name"])
        config = codec.get("configuration", {})
        codecs += config.get("codecs", []) + config.get("index_codecs", [])
    return names


def test_v3_array_info_shows_shape_type_fill_codecs_dimensions_and_stored_chunks(tmp_path):
    a = zarr.create_array(
        tmp_path / "temp",
        shape=(10, 20),
        chunks=(4, 8),
        dtype="float32",
        fill_value=np.nan,
        compressors=zc.ZstdCodec(level=3),
        dimension_names=["y", "x"],
        attributes={"units": "K"},
    )
    a[:4, :] = 1.5  # 3 of the 9 chunks
    info = info_of(tmp_path, "temp")
    f = fields(info)
    count, size = stored_objects(tmp_path / "temp")

    assert f["path"] == "/temp"
    assert f["format"] == "Zarr v3"
    assert f["shape"] == str(a.shape)
    assert f["chunk shape"] == str(a.chunks)
    assert f["chunk grid"] == f"{a.cdata_shape}, {a.nchunks} chunks"
    assert f["data type"] == np.dtype(a.dtype).name
    assert f["fill value"] == "NaN"
    assert f["dimension names"] == json.dumps(list(a.metadata.dimension_names))
    for name in document_codec_names(tmp_path / "temp"):
        assert name in f["codecs"]
    assert f["chunks stored"] == f"{count} / {a.nchunks}" and count == a.nchunks_initialized
    assert f["bytes stored"].startswith(f"{size:,} bytes")
    assert '"units": "K"' in info


def test_sharded_array_info_shows_shard_and_inner_chunk_shapes_and_counts_shards(tmp_path):
    a = zarr.create_array(
        tmp_path / "stack",
        shape=(8, 64, 64),
        shards=(4, 32, 32),
        chunks=(1, 16, 16),
        dtype="uint16",
        fill_value=0,
    )
    a[:4, :40, :] = 7  # touches shards (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1)
    f = fields(info_of(tmp_path, "stack"))
    count, size = stored_objects(tmp_path / "stack")

    assert f["shard shape"] == str(a.shards)
    assert f["inner chunk shape"] == str(a.chunks)
    shard_grid = tuple(-(-s // n) for s, n in zip(a.shape, a.shards))
    nshards = int(np.prod(shard_grid))
    assert f["chunk grid"] == f"{a.cdata_shape}, {a.nchunks} inner chunks in {shard_grid}, {nshards} shards"
    for name in document_codec_names(tmp_path / "stack"):
        assert name in f["codecs"]
    assert f["codecs"].startswith("sharding_indexed(chunk_shape=[1, 16, 16]")
    assert f["shards stored"] == f"{count} / {nshards}" and count == 4
    assert f["bytes stored"].startswith(f"{size:,} bytes")


def test_v2_array_info_shows_numpy_type_memory_order_and_compressor(tmp_path):
    a = zarr.create_array(
        tmp_path / "old",
        shape=(5, 6),
        chunks=(2, 3),
        dtype=">i2",
        order="F",
        zarr_format=2,
        fill_value=-1,
        compressors=numcodecs.Zstd(level=1),
    )
    a[:] = np.arange(30).reshape(5, 6)
    f = fields(info_of(tmp_path, "old"))
    zarray = json.loads((tmp_path / "old" / ".zarray").read_text())

    assert f["format"] == "Zarr v2"
    assert f["data type"] == ">i2 (int16, big-endian)"
    assert f["memory order"] == "F"
    assert f["fill value"] == "-1"
    assert zarray["compressor"] == {"id": "zstd", "level": 1}
    assert f["codecs"] == "zstd(level=1)"
    assert f["chunks stored"] == f"{stored_objects(tmp_path / 'old')[0]} / 6"


def test_v2_blosc_compressor_is_shown_with_its_settings(tmp_path):
    a = zarr.create_array(
        tmp_path / "b",
        shape=(10,),
        chunks=(5,),
        dtype="<f8",
        zarr_format=2,
        compressors=numcodecs.Blosc(cname="lz4", clevel=7, shuffle=numcodecs.Blosc.BITSHUFFLE),
    )
    a[:] = 1.0
    f = fields(info_of(tmp_path, "b"))
    assert f["codecs"] == "blosc(cname=lz4, clevel=7, shuffle=2, blocksize=0)"
    assert f["data type"] == "<f8 (float64, little-endian)"


@pytest.mark.parametrize(
    ("data_type", "fill_json", "shown"),
    [
        ("float32", "0x7fc00001", "NaN (0x7fc00001)"),
        ("float64", "-Infinity", "-Infinity"),
        ("float32", 0.1, "0.1"),
        ("float64", -0.0, "-0.0"),
        ("complex64", [1.5, "NaN"], "[1.5, NaN]"),
        ("int16", -7, "-7"),
        ("bool", True, "true"),
        ("string", "n/a", "'n/a'"),
    ],
)
def test_fill_value_is_printed_readably(tmp_path, data_type, fill_json, shown):
    codecs = (
        [{"name": "vlen-utf8"}] if data_type == "string" else [{"name": "bytes", "configuration": {"endian": "little"}}]
    )
    document = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": fill_json,
        "codecs": codecs,
    }
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(document))
    zarr.open_array(tmp_path / "a", mode="r")  # the oracle accepts the document
    assert fields(info_of(tmp_path, "a"))["fill value"] == shown


def test_vlen_string_array_info(tmp_path):
    a = zarr.create_array(tmp_path / "labels", shape=(5,), chunks=(2,), dtype=str)
    a[:] = ["a", "b", "c", "d", "e"]
    f = fields(info_of(tmp_path, "labels"))
    assert f["data type"].startswith("string")
    assert "vlen-utf8" in f["codecs"]
    assert f["fill value"] == repr(a.fill_value)
    assert f["chunks stored"] == f"{stored_objects(tmp_path / 'labels')[0]} / 3"
    assert "data size" not in f


def test_zero_dimensional_array_has_one_chunk(tmp_path):
    a = zarr.create_array(tmp_path / "s", shape=(), dtype="int32", fill_value=0)
    a[()] = 5
    f = fields(info_of(tmp_path, "s"))
    assert f["shape"] == "()"
    assert f["chunk grid"] == "(), 1 chunk"
    assert f["chunks stored"] == "1 / 1"


def test_conventions_are_listed_by_name_version_and_uuid(tmp_path):
    zarr.create_group(tmp_path, attributes=CONVENTIONS)
    info = info_of(tmp_path, "")
    assert f"  geo:proj 0.2.1 ({GEO_PROJ})" in info.splitlines()
    assert "malformed" not in info


def test_malformed_convention_is_reported_and_the_rest_still_shown(tmp_path):
    metadata = dict(CONVENTIONS["zarr_conventions_metadata"])
    metadata["not-a-uuid"] = {"version": "0.1.0", "configuration": {}}
    metadata["0396f4cd-47fa-4b09-8c79-9072d90ceed3"] = {"name": "broken", "configuration": {}}
    a = zarr.create_array(
        tmp_path / "a",
        shape=(3,),
        dtype="uint8",
        attributes={"zarr_conventions_version": "0.1.0", "zarr_conventions_metadata": metadata},
    )
    lines = info_of(tmp_path, "a").splitlines()
    assert f"  geo:proj 0.2.1 ({GEO_PROJ})" in lines
    malformed = [line for line in lines if line.startswith("  malformed:")]
    assert len(malformed) == 2
    assert any("not-a-uuid" in line for line in malformed)
    assert any("0396f4cd-47fa-4b09-8c79-9072d90ceed3" in line and "version" in line for line in malformed)
    assert a.attrs["zarr_conventions_version"] == "0.1.0"


def test_group_info_shows_format_and_attributes(tmp_path):
    zarr.create_group(tmp_path / "g", zarr_format=2, attributes={"title": "legacy"})
    info = info_of(tmp_path, "g")
    f = fields(info)
    assert f["node type"] == "group"
    assert f["format"] == "Zarr v2"
    assert '"title": "legacy"' in info


def test_implicit_group_is_noted(tmp_path):
    zarr.create_array(tmp_path / "x" / "y", shape=(2,), dtype="uint8")
    f = fields(info_of(tmp_path, "x"))
    assert f["node type"] == "group"
    assert f["format"].startswith("implicit group")


def test_huge_attributes_are_cut_with_a_pointer_to_the_document(tmp_path):
    big = {f"key{i:04d}": "x" * 40 for i in range(500)}
    zarr.create_group(tmp_path, attributes=big)
    info = info_of(tmp_path, "")
    attributes = info[info.index("attributes:") :]
    assert len(attributes.encode()) < ATTRIBUTES_LIMIT + 1024
    assert re.search(r"\.\.\. \d+ more bytes; the whole document is in zarr.json", attributes)
    assert '"key0000"' in attributes and '"key0499"' not in attributes


def test_store_failure_while_counting_chunks_shows_unknown(tmp_path, monkeypatch):
    zarr.create_array(tmp_path / "a", shape=(4,), chunks=(2,), dtype="uint8")
    array = Hierarchy(open_store(str(tmp_path))).open_node("a")

    def unreachable():
        raise StoreUnavailableError("connection refused", "a/")

    monkeypatch.setattr(array, "stored_chunks", unreachable)
    f = fields(render_info(array, "a"))
    assert f["chunks stored"] == "unknown"
    assert f["bytes stored"] == "unknown"


def test_info_is_deterministic_printable_text_ending_in_newline(tmp_path):
    zarr.create_group(
        tmp_path, attributes={"name": "caf\u00e9", "evil": "\x1b[2J\u202e", "lone": "\ud800", **CONVENTIONS}
    )
    first, second = info_of(tmp_path, ""), info_of(tmp_path, "")
    assert first == second
    assert first.endswith("\n")
    first.encode("utf-8")  # no lone surrogates
    assert all(c.isprintable() or c == "\n" for c in first)
    assert "caf\u00e9" in first
    assert "\\u001b[2J\\u202e" in first
