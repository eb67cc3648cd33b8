"""The same reads and writes against memory:// and S3 (moto): what zarr-python writes there
we read, what we write there zarr-python reads, shards are read by byte range."""

from __future__ import annotations

import uuid
import warnings

import numpy as np
import pytest
from format_oracle import assert_same_values, sample_values

from zarrfs.format import Array

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402
import zarr.storage  # noqa: E402


@pytest.fixture(params=["memory", "s3"])
def remote(request, open_hierarchy):
    """(url, storage options) of an empty location in memory:// or on the moto S3 server."""
    if request.param == "memory":
        url = f"memory://zarrfs-format-{uuid.uuid4().hex}"
        yield url, {}
        import fsspec

        fsspec.filesystem("memory").rm(url, recursive=True)
    else:
        bucket = request.getfixturevalue("s3_bucket")
        yield f"s3://{bucket}/data.zarr", request.getfixturevalue("s3_storage_options")


def _zarr_python_writes(url, options):
    root = zarr.open_group(url, mode="w", storage_options=options or None, attributes={"where": "remote"})
    values = {
        "plain": sample_values(np.dtype("<f8"), (9, 7), 1),
        "sharded": sample_values(np.dtype("<i4"), (16, 12), 2),
        "strings": sample_values("str", (7,), 3),
    }
    root.create_array("plain", shape=(9, 7), chunks=(4, 3), dtype="<f8", compressors=[zc.GzipCodec()])[...] = values[
        "plain"
    ]
    root.create_array("g/sharded", shape=(16, 12), chunks=(4, 4), shards=(8, 12), dtype="<i4")[...] = values["sharded"]
    root.create_array("strings", shape=(7,), chunks=(3,), dtype=str)[...] = values["strings"]
    v2 = zarr.open_group(url + "/v2", mode="w", zarr_format=2, storage_options=options or None)
    v2.create_array("be", shape=(5, 4), chunks=(2, 3), dtype=">u2", order="F")[...] = np.arange(20).reshape(5, 4)
    return values


def test_arrays_zarr_python_writes_remotely_read_the_same(remote, open_hierarchy):
    url, options = remote
    values = _zarr_python_writes(url, options)
    h = open_hierarchy(url, storage_options=options)
    assert h.children("") == ["g", "plain", "strings", "v2"]
    assert h.open_node("").attributes == {"where": "remote"}
    assert_same_values(h.open_node("plain").read(), values["plain"], "plain")
    assert_same_values(h.open_node("g/sharded").read(), values["sharded"], "sharded")
    assert_same_values(h.open_node("g/sharded").read((slice(5, 11), 3)), values["sharded"][5:11, 3], "sharded region")
    assert_same_values(h.open_node("strings").read(), values["strings"], "strings")
    assert_same_values(h.open_node("v2/be").read(), np.arange(20, dtype=">u2").reshape(5, 4), "v2")


def test_arrays_we_write_remotely_read_the_same_in_zarr_python(remote, open_hierarchy):
    url, options = remote
    h = open_hierarchy(url, storage_options=options)
    h.create_group("grp", {"made": "by zarrfs"})
    shard = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [2, 3],
            "codecs": [
                {"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "zstd", "configuration": {"level": 0, "checksum": False}},
            ],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "start",
        },
    }
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [8, 9],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 9]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": "NaN",
        "codecs": [shard],
        "attributes": {"a": 1},
    }
    array = h.create_array("grp/arr", doc)
    expected = np.full((8, 9), np.nan, dtype="f4")
    values = sample_values(np.dtype("f4"), (8, 9), 5)
    array.write((slice(1, 7), slice(2, 8)), values[1:7, 2:8])
    expected[1:7, 2:8] = values[1:7, 2:8]
    array.write_chunks({(3, 2): np.full((2, 3), np.nan, "f4")})  # inner chunk back to fill
    expected[6:8, 6:9] = np.nan

    theirs = zarr.open_array(url + "/grp/arr", mode="r", storage_options=options or None)
    assert_same_values(theirs[...], expected, "zarr-python reading our remote write")
    assert dict(theirs.attrs) == {"a": 1}
    assert dict(zarr.open_group(url + "/grp", mode="r", storage_options=options or None).attrs) == {"made": "by zarrfs"}


def test_chunk_written_to_fill_is_erased_remotely(remote, open_hierarchy):
    url, options = remote
    h = open_hierarchy(url, storage_options=options)
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "int8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes"}],
    }
    array = h.create_array("a", doc)
    array.write((), [1, 2, 3, 4])
    assert h.store.list_prefix("a/c/") == ["a/c/0", "a/c/1"]
    array.write((slice(2, 4),), 0)
    assert h.store.list_prefix("a/c/") == ["a/c/0"]
    assert_same_values(
        zarr.open_array(url + "/a", storage_options=options or None)[...], np.array([1, 2, 0, 0], "i1"), "after erase"
    )


def test_s3_hierarchy_uses_consolidated_metadata(request, open_hierarchy):
    bucket = request.getfixturevalue("s3_bucket")
    options = request.getfixturevalue("s3_storage_options")
    url = f"s3://{bucket}/c.zarr"
    _zarr_python_writes(url, options)
    zarr.consolidate_metadata(zarr.storage.FsspecStore.from_url(url, storage_options=options))
    zarr.create_array(url + "/late", shape=(2,), dtype="i1", storage_options=options)
    consolidated = zarr.open_group(url, mode="r", use_consolidated=True, storage_options=options)
    h = open_hierarchy(url, storage_options=options)
    assert h.remote
    assert h.children("") == sorted(consolidated.keys()) == ["g", "plain", "strings"]  # not `late`, nor v2 `v2`
    assert isinstance(h.open_node("g/sharded"), Array)
    assert open_hierarchy(url, storage_options=options, consolidated="never").children("") == [
        "g",
        "late",
        "plain",
        "strings",
        "v2",
    ]


def test_damaged_shards_are_errors_remotely(remote, open_hierarchy):
    """Byte ranges past the end (S3 answers 416) and shards shorter than their index
    are corrupt data, never fill values."""
    import struct

    from crc32c import crc32c

    from zarrfs.format import ChunkDecodeError

    url, options = remote
    h = open_hierarchy(url, storage_options=options)
    shard = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [2],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
            "index_location": "end",
        },
    }
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [8],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [shard],
    }
    array = h.create_array("s", doc)
    array.write((), np.arange(1, 9, dtype="i4"))
    raw = h.store.get("s/c/0")
    index = np.frombuffer(raw[-36:-4], dtype="<u8").copy().reshape(2, 2)
    index[1, 0] = len(raw) + 1000  # the second inner chunk starts past the end
    body = index.tobytes()
    h.store.set("s/c/0", raw[:-36] + body + struct.pack("<I", crc32c(body)))
    h.store.set("s/c/1", b"\x00\x01")  # shorter than its index
    reader = open_hierarchy(url, storage_options=options).open_node("s")
    assert_same_values(reader.read((slice(0, 2),)), np.array([1, 2], "i4"), "the intact inner chunk")
    with pytest.raises(ChunkDecodeError, match="past the end"):
        reader.read((slice(2, 4),))
    with pytest.raises(ChunkDecodeError):
        reader.read((slice(4, 8),))


def test_nodes_are_created_moved_and_erased_remotely(remote, open_hierarchy):
    url, options = remote
    values = _zarr_python_writes(url, options)
    h = open_hierarchy(url, storage_options=options, consolidated="never")
    h.create_group("my group", {"spaces": True})
    h.move_node("g", "my group/moved g")
    assert h.children("") == ["my group", "plain", "strings", "v2"]
    assert h.children("my group") == ["moved g"]
    assert_same_values(
        zarr.open_array(url + "/my group/moved g/sharded", mode="r", storage_options=options or None)[...],
        values["sharded"],
        "moved array read by zarr-python",
    )
    h.erase_node("my group")
    assert h.children("") == ["plain", "strings", "v2"]
    assert h.store.list_prefix("my group/") == []
