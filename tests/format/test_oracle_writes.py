"""What our format layer writes, zarr-python (and tensorstore) read: arrays and groups we
create, region writes and whole-chunk writes, fill-value chunks erased, and shard
rewrites that touch only the shards they must."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from format_oracle import LOW_PRECISION, SUBBYTE_INTS, as_plain_numpy, assert_same_values, sample_values

from zarrfs.format import Array, Group
from zarrfs.format.documents import array_document_v3
from zarrfs.format.dtypes import parse_v3_data_type, v3_data_type_of
from zarrfs.format.fill_values import fill_array, fill_value_to_json

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}


def v3_document(data_type, shape, chunks, codecs, fill_value=0, **extra) -> dict:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": codecs,
        "attributes": {"title": "written by zarrfs", "n": [1, 2]},
        **extra,
    }


ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": True}}


def _TIME(name: str, unit: str, scale: int = 1) -> dict:
    return {"name": name, "configuration": {"unit": unit, "scale_factor": scale}}


def _LENGTH(name: str, length: int) -> dict:
    return {"name": name, "configuration": {"length_bytes": length}}


def _shard(inner, codecs=(LE,), index_codecs=(LE, {"name": "crc32c"}), location="end") -> dict:
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(inner),
            "codecs": list(codecs),
            "index_codecs": list(index_codecs),
            "index_location": location,
        },
    }


V3_WRITES = {
    # name: (data_type, shape, chunks, codecs, fill_value)
    **{
        f"{t}.bytes_le": (t, (9, 7), (4, 3), [LE], [0, 0] if t.startswith("complex") else 0)
        for t in [
            "bool",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
            "float16",
            "float32",
            "float64",
            "complex64",
            "complex128",
        ]
    },
    **{
        f"{t}.bytes_be_zstd": (
            t,
            (9, 7),
            (4, 3),
            [BE, {"name": "zstd", "configuration": {"level": 1, "checksum": False}}],
            [0, 0] if t.startswith("complex") else 0,
        )
        for t in ["int16", "uint64", "float32", "complex128"]
    },
    "float32.fill_nan": ("float32", (10, 4), (3, 3), [LE], "NaN"),
    "float32.fill_nan_payload": ("float32", (10, 4), (3, 3), [LE], "0x7fc00001"),
    "float64.fill_neg_inf": ("float64", (10, 4), (3, 3), [LE], "-Infinity"),
    "float16.fill_hex": ("float16", (10, 4), (3, 3), [LE], "0x3c00"),
    "complex64.fill_pair": ("complex64", (10, 4), (3, 3), [LE], ["NaN", 2.5]),
    "uint64.fill_max": ("uint64", (10, 4), (3, 3), [LE], 2**64 - 1),
    "bool.fill_true": ("bool", (10, 4), (3, 3), [LE], True),
    "int16.transpose": (
        "int16",
        (9, 7, 5),
        (4, 3, 2),
        [{"name": "transpose", "configuration": {"order": [2, 0, 1]}}, LE],
        0,
    ),
    "float64.gzip": ("float64", (30, 7), (8, 4), [LE, {"name": "gzip", "configuration": {"level": 1}}], 0),
    "float32.blosc_shuffle": (
        "float32",
        (30, 7),
        (8, 4),
        [
            LE,
            {
                "name": "blosc",
                "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0},
            },
        ],
        0,
    ),
    "int32.blosc_bitshuffle": (
        "int32",
        (30, 7),
        (8, 4),
        [
            LE,
            {
                "name": "blosc",
                "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0},
            },
        ],
        0,
    ),
    "uint8.blosc_noshuffle": (
        "uint8",
        (30, 7),
        (8, 4),
        [
            LE,
            {
                "name": "blosc",
                "configuration": {"cname": "zlib", "clevel": 1, "shuffle": "noshuffle", "typesize": 1, "blocksize": 0},
            },
        ],
        0,
    ),
    "int64.crc32c": (
        "int64",
        (30, 7),
        (8, 4),
        [LE, {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}],
        0,
    ),
    "int16.shard_end": ("int16", (20, 18), (8, 9), [_shard((4, 3))], 0),
    "float32.shard_start_gzip": (
        "float32",
        (20, 18),
        (8, 9),
        [_shard((2, 9), [LE, {"name": "gzip", "configuration": {"level": 1}}], [BE], "start")],
        0,
    ),
    "uint16.shard_transpose_inner": (
        "uint16",
        (16, 12),
        (8, 12),
        [_shard((4, 6), [{"name": "transpose", "configuration": {"order": [1, 0]}}, BE])],
        7,
    ),
    "int32.shard_nested": ("int32", (16, 16), (8, 8), [_shard((4, 4), [_shard((2, 2))])], 0),
    "int32.shard_then_crc32c": ("int32", (16, 16), (8, 8), [_shard((4, 4)), {"name": "crc32c"}], 0),
    "int32.numcodecs_delta": (
        "int32",
        (40,),
        (16,),
        [
            {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}},
            LE,
            {"name": "numcodecs.zlib", "configuration": {"level": 1}},
        ],
        0,
    ),
    "bool.numcodecs_packbits": (
        "bool",
        (40,),
        (13,),
        [{"name": "numcodecs.packbits", "configuration": {}}, {"name": "bytes"}],
        False,
    ),
    "string.vlen_utf8": (
        "string",
        (11, 3),
        (4, 2),
        [{"name": "vlen-utf8"}, {"name": "zstd", "configuration": {"level": 0, "checksum": False}}],
        "",
    ),
    "string.fill": ("string", (11,), (4,), [{"name": "vlen-utf8"}], "fill é"),
    "bytes.vlen_bytes": ("bytes", (11, 3), (4, 2), [{"name": "vlen-bytes"}], ""),
    "string.sharded": ("string", (12, 6), (4, 6), [_shard((2, 3), [{"name": "vlen-utf8"}])], ""),
    "int32.scalar": ("int32", (), (), [LE], 5),
    # extension data types zarr-python reads
    "datetime64_s.nat_fill": (_TIME("numpy.datetime64", "s"), (9, 7), (4, 3), [LE, ZSTD], "NaT"),
    "timedelta64_10ms.big": (_TIME("numpy.timedelta64", "ms", 10), (9, 7), (4, 3), [BE], 0),
    "fixed_utf32.big_fill": (_LENGTH("fixed_length_utf32", 16), (9, 7), (4, 3), [BE, ZSTD], "zé"),
    "null_terminated_bytes.fill": (_LENGTH("null_terminated_bytes", 5), (9, 7), (4, 3), [{"name": "bytes"}], "YWI="),
    "raw_bytes.fill": (_LENGTH("raw_bytes", 3), (9, 7), (4, 3), [{"name": "bytes"}], "AQID"),
    "structured": (
        {
            "name": "structured",
            "configuration": {
                "fields": [
                    ["a", "int16"],
                    ["t", _TIME("numpy.datetime64", "D")],
                    ["s", _LENGTH("null_terminated_bytes", 2)],
                ]
            },
        },
        (9, 7),
        (4, 3),
        [LE, ZSTD],
        "AAAAAAAAAAAAAAAA",
    ),
    "uint16.numcodecs_jenkins_lookup3": (
        "uint16",
        (40,),
        (16,),
        [LE, {"name": "numcodecs.jenkins_lookup3", "configuration": {}}],
        0,
    ),
    "int32.numcodecs_crc32c": ("int32", (40,), (16,), [LE, {"name": "numcodecs.crc32c", "configuration": {}}], 0),
    "int32.zero_length": ("int32", (0, 4), (2, 2), [LE], 0),
}


def _region_writes(shape: tuple[int, ...], seed: int) -> list[tuple[slice, ...]]:
    """A few unaligned regions, the last of them the whole first row."""
    rng = np.random.default_rng(seed)
    regions = []
    for _ in range(3):
        region = []
        for n in shape:
            start = int(rng.integers(0, max(n, 1)))
            region.append(slice(start, int(rng.integers(start, n + 1)) if n else 0))
        regions.append(tuple(region))
    return regions


def _exercise(array: Array, dtype, seed: int) -> np.ndarray:
    """Region writes, whole-chunk writes and a chunk written back to fill; returns the
    values the array must now hold."""
    expected = fill_array(array.shape, array.dtype, array.fill_value)
    values = as_plain_numpy(sample_values(dtype, array.shape, seed))
    for region in _region_writes(array.shape, seed):
        array.write(region, values[region])
        expected[region] = values[region]
    if not array.shape or 0 in array.shape:
        array.write((), values[()] if not array.shape else values)
        return values
    grid = array.chunk_grid
    last = tuple(n - 1 for n in grid.grid_shape)
    chunks = {}
    for coords in {(0,) * len(last), last}:
        chunk = as_plain_numpy(sample_values(dtype, array.chunk_shape, seed + sum(coords)))
        chunks[coords] = chunk
        region = grid.chunk_region(coords)
        expected[region] = chunk[tuple(slice(0, r.stop - r.start) for r in region)]
    array.write_chunks(chunks)
    # the middle chunk written back to fill
    middle = tuple(n // 2 for n in grid.grid_shape)
    array.write_chunks({middle: fill_array(array.chunk_shape, array.dtype, array.fill_value)})
    expected[grid.chunk_region(middle)] = array.fill_value
    return expected


def _sample_dtype(data_type):
    """What sample_values takes for a v3 data type."""
    if isinstance(data_type, str) and data_type in ("string", "bytes"):
        return {"string": "str", "bytes": "bytes"}[data_type]
    if isinstance(data_type, str) and (data_type in LOW_PRECISION or data_type in SUBBYTE_INTS):
        return data_type
    return parse_v3_data_type(data_type).numpy


@pytest.mark.parametrize("name", list(V3_WRITES))
def test_v3_array_we_write_reads_the_same_in_zarr_python(open_hierarchy, tmp_path, name):
    data_type, shape, chunks, codecs, fill_value = V3_WRITES[name]
    hierarchy = open_hierarchy(tmp_path)
    hierarchy.create_group("group", {"about": "parent"})
    array = hierarchy.create_array("group/array", v3_document(data_type, shape, chunks, codecs, fill_value))
    expected = _exercise(array, _sample_dtype(data_type), seed=len(name))

    theirs = zarr.open_array(str(tmp_path / "group" / "array"), mode="r")
    assert_same_values(theirs[...], expected, f"zarr-python reading {name}")
    assert dict(theirs.attrs) == {"title": "written by zarrfs", "n": [1, 2]}
    assert_same_values(np.asarray(array.fill_value), np.asarray(theirs.fill_value), f"{name} fill value")
    # and we read back what we wrote, through the same array (its cache) and a fresh hierarchy
    assert_same_values(array.read(), expected, f"reading back {name} through the cache")
    assert_same_values(open_hierarchy(tmp_path).open_node("group/array").read(), expected, f"reading back {name}")
    assert dict(zarr.open_group(str(tmp_path / "group"), mode="r").attrs) == {"about": "parent"}


@pytest.mark.parametrize(
    "name",
    [
        "int16.shard_end",
        "float32.shard_start_gzip",
        "int64.crc32c",
        "int16.transpose",
        "uint64.fill_max",
        "float32.fill_nan",
    ],
)
def test_v3_array_we_write_reads_the_same_in_tensorstore(open_hierarchy, tmp_path, name):
    import tensorstore as ts

    data_type, shape, chunks, codecs, fill_value = V3_WRITES[name]
    array = open_hierarchy(tmp_path).create_array("a", v3_document(data_type, shape, chunks, codecs, fill_value))
    expected = _exercise(array, _sample_dtype(data_type), seed=len(name))
    theirs = ts.open(
        {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "a")}}, open=True
    ).result()
    assert_same_values(theirs.read().result(), expected, f"tensorstore reading {name}")


TS_WRITES = {
    # name: (data_type, codecs, fill_value), shape (9, 7), chunks (4, 3)
    "bfloat16": ("bfloat16", [LE, ZSTD], "NaN"),
    "bfloat16.big": ("bfloat16", [BE], -2.5),
    "float8_e4m3fn.fill": ("float8_e4m3fn", [{"name": "bytes"}], 1.5),
    "float8_e5m2.gzip": (
        "float8_e5m2",
        [{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 1}}],
        "-Infinity",
    ),
    "float4_e2m1fn.fill": ("float4_e2m1fn", [{"name": "bytes"}], -3.0),
    "int4.fill": ("int4", [{"name": "bytes"}], -3),
    "int2.sharded": ("int2", [_shard((2, 3), [{"name": "bytes"}], [LE])], 1),
}


@pytest.mark.parametrize("name", list(TS_WRITES))
def test_types_numpy_lacks_we_write_read_the_same_in_tensorstore(open_hierarchy, tmp_path, name):
    import tensorstore as ts

    data_type, codecs, fill_value = TS_WRITES[name]
    array = open_hierarchy(tmp_path).create_array("a", v3_document(data_type, (9, 7), (4, 3), codecs, fill_value))
    expected = _exercise(array, data_type, seed=len(name))
    theirs = ts.open(
        {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "a")}}, open=True
    ).result()
    assert_same_values(as_plain_numpy(theirs.read().result()), expected, f"tensorstore reading {name}")
    assert_same_values(as_plain_numpy(theirs.fill_value), np.asarray(array.fill_value), f"{name} fill value")


NUMPY_NATIVE = [
    "datetime64[ns]",
    ">M8[D]",
    "timedelta64[10s]",
    "<U5",
    ">U3",
    "S3",
    "V4",
    [("a", ">i4"), ("p", [("x", "<f4"), ("t", "<M8[s]")]), ("s", "S2"), ("u", "<U2")],
]


@pytest.mark.parametrize("dtype", NUMPY_NATIVE, ids=str)
def test_array_created_for_a_numpy_dtype_reads_in_zarr_python(open_hierarchy, tmp_path, dtype):
    """What `cp x.npy` into a group does in the format layer: the v3 data type and fill
    value for the file's dtype, zarr-python's spelling."""
    dtype = np.dtype(dtype)
    data_type = parse_v3_data_type(v3_data_type_of(dtype))
    document = array_document_v3(
        (9, 7), (4, 3), data_type.json, fill_value_to_json(np.zeros((), dtype)[()], data_type), [LE, ZSTD]
    )
    array = open_hierarchy(tmp_path).create_array("x", document)
    values = sample_values(dtype, (9, 7), seed=3)
    array.write((), values)
    theirs = zarr.open_array(str(tmp_path / "x"), mode="r")
    assert theirs.dtype == dtype.newbyteorder("<")
    assert_same_values(theirs[...], values, str(dtype))


V2_WRITES = {
    # name: .zarray fields
    "<i4.zlib": {"dtype": "<i4", "compressor": {"id": "zlib", "level": 1}},
    ">f8.blosc_order_F": {
        "dtype": ">f8",
        "order": "F",
        "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 2, "blocksize": 0},
    },
    ">i2.delta_shuffle": {
        "dtype": ">i2",
        "filters": [{"id": "delta", "dtype": ">i2"}, {"id": "shuffle", "elementsize": 2}],
        "compressor": {"id": "zstd", "level": 1},
    },
    "<f4.fill_null": {"dtype": "<f4", "fill_value": None},
    "<M8[D].fill_null": {"dtype": "<M8[D]", "fill_value": None, "compressor": {"id": "zlib", "level": 1}},
    "<f4.fill_nan": {"dtype": "<f4", "fill_value": "NaN"},
    "|b1.fill_true": {"dtype": "|b1", "fill_value": True, "compressor": {"id": "lz4", "acceleration": 1}},
    ">c16.order_F": {"dtype": ">c16", "order": "F", "fill_value": [1.0, -2.0]},
    "|S5": {"dtype": "|S5", "fill_value": "YWI="},
    "<U4.order_F": {"dtype": "<U4", "order": "F", "fill_value": "zé"},
    ">U3": {"dtype": ">U3", "fill_value": ""},
    "|O.vlen_utf8": {"dtype": "|O", "filters": [{"id": "vlen-utf8"}], "fill_value": ""},
    "|O.vlen_bytes": {"dtype": "|O", "filters": [{"id": "vlen-bytes"}], "fill_value": None},
    "<u8.slash": {"dtype": "<u8", "dimension_separator": "/", "compressor": {"id": "bz2", "level": 1}},
    # times with no compressor: the chunk is stored as numpy's bytes of its elements
    "<M8[s]": {"dtype": "<M8[s]"},
    ">m8[ms]": {"dtype": ">m8[ms]"},
    "structured_time": {"dtype": [("a", "<i2"), ("t", "<M8[D]")], "fill_value": None},
}


@pytest.mark.parametrize("name", list(V2_WRITES))
def test_v2_array_we_write_reads_the_same_in_zarr_python(open_hierarchy, tmp_path, name):
    fields = {
        "zarr_format": 2,
        "shape": [9, 7],
        "chunks": [4, 3],
        "fill_value": 0,
        "order": "C",
        "filters": None,
        "compressor": None,
        **V2_WRITES[name],
    }
    hierarchy = open_hierarchy(tmp_path)
    hierarchy.create_group("g", {"v": 2}, zarr_format=2)
    hierarchy.store.set("g/a/.zarray", json.dumps(fields).encode())
    hierarchy.store.set("g/a/.zattrs", json.dumps({"units": "m"}).encode())
    array = hierarchy.open_node("g/a")
    dtype = np.dtype(fields["dtype"])
    sample = ("str" if fields["filters"][0]["id"] == "vlen-utf8" else "bytes") if dtype.kind == "O" else dtype
    expected = _exercise(array, sample, seed=len(name))
    theirs = zarr.open_array(str(tmp_path / "g" / "a"), mode="r")
    assert_same_values(theirs[...], expected, f"zarr-python reading {name}")
    assert dict(theirs.attrs) == {"units": "m"}
    assert dict(zarr.open_group(str(tmp_path / "g"), mode="r").attrs) == {"v": 2}


def test_chunk_written_to_fill_value_is_erased_from_the_store(open_hierarchy, tmp_path):
    hierarchy = open_hierarchy(tmp_path)
    array = hierarchy.create_array("a", v3_document("float32", (4, 4), (2, 2), [LE], "NaN"))
    array.write((slice(0, 2), slice(0, 2)), 1.0)
    assert hierarchy.store.get("a/c/0/0") is not None
    array.write((slice(0, 2), slice(0, 2)), np.nan)
    assert hierarchy.store.get("a/c/0/0") is None
    assert zarr.open_array(str(tmp_path / "a"), mode="r").nchunks_initialized == 0


def test_chunk_that_differs_from_fill_only_in_bits_is_stored(open_hierarchy, tmp_path):
    """-0.0 is not the fill value 0.0, nor a NaN payload the fill value NaN: storing
    nothing would read back the wrong bits."""
    hierarchy = open_hierarchy(tmp_path)
    zero = hierarchy.create_array("zero", v3_document("float64", (2,), (2,), [LE], 0.0))
    zero.write_chunks({(0,): np.array([-0.0, -0.0])})
    assert hierarchy.store.get("zero/c/0") is not None
    assert_same_values(zarr.open_array(str(tmp_path / "zero"))[...], np.array([-0.0, -0.0]), "negative zeros")
    nan = hierarchy.create_array("nan", v3_document("float32", (2,), (2,), [LE], "NaN"))
    payload = np.array([0x7FC00001, 0x7FC00001], dtype="<u4").view("<f4")
    nan.write_chunks({(0,): payload})
    assert_same_values(zarr.open_array(str(tmp_path / "nan"))[...], payload, "NaN payloads")


def test_sharded_write_erases_an_emptied_shard_and_inner_chunks(open_hierarchy, tmp_path):
    hierarchy = open_hierarchy(tmp_path)
    array = hierarchy.create_array("s", v3_document("int16", (8, 8), (4, 4), [_shard((2, 2))], 0))
    array.write((slice(0, 4), slice(0, 4)), 3)
    full = len(hierarchy.store.get("s/c/0/0"))
    array.write((slice(0, 2), slice(0, 2)), 0)
    assert len(hierarchy.store.get("s/c/0/0")) == full - 2 * 2 * 2  # one inner chunk fewer
    array.write((slice(0, 4), slice(0, 4)), 0)
    assert hierarchy.store.get("s/c/0/0") is None
    assert_same_values(zarr.open_array(str(tmp_path / "s"))[...], np.zeros((8, 8), "i2"), "emptied shard")


def test_sharded_rewrite_touches_only_the_affected_shard(open_hierarchy, tmp_path):
    hierarchy = open_hierarchy(tmp_path)
    array = hierarchy.create_array("s", v3_document("int32", (16, 16), (8, 8), [_shard((4, 4))], 0))
    values = np.arange(256, dtype="i4").reshape(16, 16) + 1
    array.write((), values)
    before = {key: hierarchy.store.get(key) for key in hierarchy.store.list_prefix("s/c/")}
    written = []
    store_set_values = hierarchy.store.set_values
    hierarchy.store.set_values = lambda items: (written.extend(items), store_set_values(items))
    array.write((slice(9, 11), slice(1, 3)), -1)  # inside shard (1, 0), inner chunk (2, 0)
    assert written == ["s/c/1/0"]
    after = {key: hierarchy.store.get(key) for key in hierarchy.store.list_prefix("s/c/")}
    assert {k for k in before if before[k] != after[k]} == {"s/c/1/0"}
    values[9:11, 1:3] = -1
    assert_same_values(zarr.open_array(str(tmp_path / "s"))[...], values, "after the rewrite")


def test_partial_read_of_a_shard_fetches_only_its_index_and_inner_chunk(open_hierarchy, tmp_path):
    hierarchy = open_hierarchy(tmp_path)
    array = hierarchy.create_array("s", v3_document("int32", (16, 16), (16, 16), [_shard((4, 4))], 0))
    array.write((), np.arange(256, dtype="i4").reshape(16, 16))
    reader = open_hierarchy(tmp_path).open_node("s")
    before = reader.context.stats.snapshot().get("bytes_fetched", 0)
    assert_same_values(
        reader.read((5, slice(4, 8))), np.arange(256, dtype="i4").reshape(16, 16)[5, 4:8], "one inner chunk"
    )
    fetched = reader.context.stats.snapshot()["bytes_fetched"] - before
    assert fetched == 4 * 4 * 4 + (16 * 16 + 4)  # one inner chunk, the index with its crc32c


def test_groups_we_create_are_groups_to_zarr_python(open_hierarchy, tmp_path):
    hierarchy = open_hierarchy(tmp_path)
    hierarchy.create_group("a", {"x": 1})
    hierarchy.create_group("a/b", None)
    hierarchy.create_group("v2", {"y": [1]}, zarr_format=2)
    a = zarr.open_group(str(tmp_path / "a"), mode="r")
    assert dict(a.attrs) == {"x": 1} and sorted(a.group_keys()) == ["b"]
    v2 = zarr.open_group(str(tmp_path / "v2"), mode="r")
    assert v2.metadata.zarr_format == 2 and dict(v2.attrs) == {"y": [1]}
    assert isinstance(hierarchy.open_node("a/b"), Group)
    assert hierarchy.children("") == ["a", "v2"]


def test_write_of_a_region_keeps_the_rest_of_partly_covered_chunks(open_hierarchy, tmp_path):
    original = sample_values(np.dtype("<f8"), (10, 10), seed=3)
    zarr.create_array(str(tmp_path / "z"), shape=(10, 10), chunks=(4, 4), dtype="<f8")[...] = original
    array = open_hierarchy(tmp_path).open_node("z")
    array.write((slice(3, 5), slice(3, 9)), 42.0)
    original[3:5, 3:9] = 42.0
    assert_same_values(zarr.open_array(str(tmp_path / "z"))[...], original, "after a partial write")
    assert math.prod(array.chunk_grid.grid_shape) == 9


@pytest.mark.parametrize(
    "name", ["float32.shard_start_gzip", "int16.transpose", "string.vlen_utf8", "int32.shard_nested"]
)
def test_random_region_writes_follow_numpy_assignment(open_hierarchy, tmp_path, name):
    """Writes with slices and integers, of whole arrays, scalars and broadcast rows, land
    where numpy assignment puts them."""
    data_type, shape, chunks, codecs, fill_value = V3_WRITES[name]
    array = open_hierarchy(tmp_path).create_array("a", v3_document(data_type, shape, chunks, codecs, fill_value))
    expected = fill_array(array.shape, array.dtype, array.fill_value)
    rng = np.random.default_rng(7)
    for step in range(25):
        selection = []
        for n in shape:
            if rng.random() < 0.3:
                selection.append(int(rng.integers(-n, n)))
            else:
                start = int(rng.integers(0, n))
                selection.append(slice(start, int(rng.integers(start, n + 1))))
        selection = tuple(selection)
        target_shape = np.shape(expected[selection])
        kind = step % 3
        if kind == 0:
            values = sample_values(_sample_dtype(data_type), target_shape, step)
        elif kind == 1:
            values = sample_values(_sample_dtype(data_type), (), step)[()]
        else:  # one row, broadcast along the leading dimensions
            values = sample_values(_sample_dtype(data_type), target_shape[-1:], step)
        array.write(selection, values)
        expected[selection] = values
    assert_same_values(zarr.open_array(str(tmp_path / "a"))[...], expected, name)


def _bits(value, dtype) -> bytes:
    return np.asarray(value, dtype=dtype).astype(np.dtype(dtype).newbyteorder("<")).tobytes()


@pytest.mark.parametrize(
    ("dtype", "fill"),
    [
        ("<f4", np.array(0x7FC00001, "<u4").view("<f4")[()]),
        (">f8", -0.0),
        ("<f2", np.inf),
        ("<f8", np.nan),
        ("<c8", complex(np.nan, -0.0)),
        (">c16", complex(1.5, np.inf)),
        ("<u8", 2**64 - 1),
        (">i2", -7),
        ("|b1", True),
        ("|i1", -128),
    ],
    ids=str,
)
def test_documents_we_build_from_numpy_types_carry_the_fill_value_bit_for_bit(open_hierarchy, tmp_path, dtype, fill):
    """v3_name_of and fill_value_to_json (used to create arrays from .npy files) give
    zarr-python the same type and fill value."""
    from zarrfs.format.dtypes import parse_v3_data_type, v3_name_of
    from zarrfs.format.fill_values import fill_value_to_json

    name = v3_name_of(np.dtype(dtype))
    data_type = parse_v3_data_type(name)
    fill_json = fill_value_to_json(np.asarray(fill, dtype=dtype)[()], data_type)
    codecs = [LE] if np.dtype(dtype).itemsize > 1 else [{"name": "bytes"}]
    array = open_hierarchy(tmp_path).create_array("a", v3_document(name, (3,), (2,), codecs, fill_json))
    theirs = zarr.open_array(str(tmp_path / "a"))
    assert theirs.dtype == np.dtype(dtype).newbyteorder("<") or theirs.dtype == np.dtype(dtype)
    assert _bits(theirs.fill_value, theirs.dtype) == _bits(fill, dtype)
    assert _bits(array.fill_value, array.dtype.numpy) == _bits(fill, dtype)


def test_raw_fill_value_round_trips_through_json(open_hierarchy, tmp_path):
    from zarrfs.format.dtypes import parse_v3_data_type
    from zarrfs.format.fill_values import fill_value_to_json, parse_fill_value

    data_type = parse_v3_data_type("r24")
    fill = np.frombuffer(b"\x01\x00\xff", dtype="V3")[0]
    assert parse_fill_value(fill_value_to_json(fill, data_type), data_type, 3).tobytes() == b"\x01\x00\xff"


@pytest.mark.parametrize(("dtype", "fill"), [("string", "é x"), ("bytes", b"\x00\xff")])
def test_variable_length_fill_values_round_trip_through_zarr_python(open_hierarchy, tmp_path, dtype, fill):
    from zarrfs.format.dtypes import parse_v3_data_type
    from zarrfs.format.fill_values import fill_value_to_json

    codec = {"name": "vlen-utf8" if dtype == "string" else "vlen-bytes"}
    fill_json = fill_value_to_json(fill, parse_v3_data_type(dtype))
    open_hierarchy(tmp_path).create_array("a", v3_document(dtype, (3,), (2,), [codec], fill_json))
    assert zarr.open_array(str(tmp_path / "a")).fill_value == fill


def test_values_that_do_not_fit_the_selection_are_an_invalid_write(open_hierarchy, tmp_path):
    from zarrfs.format import InvalidWriteError

    array = open_hierarchy(tmp_path).create_array("a", v3_document("int8", (4, 4), (2, 2), [{"name": "bytes"}]))
    with pytest.raises(InvalidWriteError):
        array.write((slice(0, 2), slice(0, 3)), np.zeros((2, 2), "i1"))
    with pytest.raises(InvalidWriteError):
        array.write_chunks({(0, 0): np.zeros((2, 3), "i1")})
    with pytest.raises(InvalidWriteError):
        array.write_chunks({(2, 0): np.zeros((2, 2), "i1")})


def test_a_read_racing_a_write_does_not_cache_the_old_chunk(open_hierarchy, tmp_path):
    """A reader that fetched a chunk's old bytes while a writer replaced them must not
    leave the old values in the shared cache."""
    hierarchy = open_hierarchy(tmp_path)
    hierarchy.create_array("a", v3_document("int32", (4,), (4,), [LE]))
    reader, writer = hierarchy.open_node("a"), hierarchy.open_node("a")
    writer.write((), [1, 2, 3, 4])
    fetch = reader.store.get_partial_values

    def fetch_then_write(requests, **options):
        values = fetch(requests, **options)  # the old bytes are in hand: now the writer stores new ones
        reader.store.get_partial_values = fetch
        writer.write((), [5, 6, 7, 8])
        return values

    reader.store.get_partial_values = fetch_then_write
    assert_same_values(reader.read(), np.array([1, 2, 3, 4], "i4"), "the racing read")
    assert_same_values(reader.read(), np.array([5, 6, 7, 8], "i4"), "the next read")
