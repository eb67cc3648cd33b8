"""Reference arrays for the format tests: a covering set of data types x codecs x shapes,
written by zarr-python and tensorstore (the oracles), and the comparisons that say
whether our decoded values are theirs bit for bit."""

from __future__ import annotations

import json
import math
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

warnings.filterwarnings("ignore", module="zarr")  # unstable-dtype and codec-spec warnings
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402
import zarr.codecs.numcodecs as znc  # noqa: E402

CORPORA = Path(__file__).resolve().parents[1] / "data" / "corpora" / "zarrita-js"

V3_NUMERIC = [
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

# bit patterns that must survive decoding: NaN payloads (quiet, signalling, negative),
# -0.0, infinities, the smallest subnormal
_FLOAT_BITS = {
    2: [0x7E00, 0x7E01, 0xFE00, 0x7C01, 0x8000, 0x7C00, 0xFC00, 0x0001],
    4: [0x7FC00000, 0x7FC00001, 0xFFC00000, 0x7F800001, 0x80000000, 0x7F800000, 0xFF800000, 0x00000001],
    8: [
        0x7FF8000000000000,
        0x7FF8000000000001,
        0xFFF8000000000000,
        0x7FF0000000000001,
        0x8000000000000000,
        0x7FF0000000000000,
        0xFFF0000000000000,
        0x0000000000000001,
    ],
}


# types numpy lacks, as ml_dtypes names them (tensorstore writes them): bits per element
LOW_PRECISION = {
    "bfloat16": 16,
    "float8_e3m4": 8,
    "float8_e4m3fn": 8,
    "float8_e4m3fnuz": 8,
    "float8_e4m3b11fnuz": 8,
    "float8_e5m2": 8,
    "float8_e5m2fnuz": 8,
    "float8_e8m0fnu": 8,
    "float4_e2m1fn": 4,
}
SUBBYTE_INTS = {"int2": 2, "int4": 4}


def ml_dtype(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))


def as_plain_numpy(values: Any) -> Any:
    """Oracle values as zarrfs holds them: types numpy lacks as the unsigned integer of
    their width (their bits), sub-byte integers as int8."""
    values = np.asarray(values)
    if values.dtype.name in SUBBYTE_INTS:
        return values.astype(np.int8)
    if values.dtype.name in LOW_PRECISION:
        return values.view(f"u{values.dtype.itemsize}")
    return values


def sample_values(dtype: Any, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Varied values of `dtype` (a numpy dtype, "str"/"bytes" for variable-length, or an
    ml_dtypes name), with the special float bit patterns and NaT sprinkled in."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    if isinstance(dtype, str) and dtype in LOW_PRECISION:
        bits = rng.integers(0, 1 << LOW_PRECISION[dtype], size=n, dtype=f"u{ml_dtype(dtype).itemsize}")
        return bits.view(ml_dtype(dtype)).reshape(shape)
    if isinstance(dtype, str) and dtype in SUBBYTE_INTS:
        half = 1 << (SUBBYTE_INTS[dtype] - 1)
        return rng.integers(-half, half, size=n).astype(ml_dtype(dtype)).reshape(shape)
    if dtype in ("str", "bytes"):
        alphabet = list("abcXYZ019 _-é世界🚀\x00")
        out = np.empty(n, dtype=object)
        for i in range(n):
            s = "".join(rng.choice(alphabet, size=int(rng.integers(0, 9))))
            out[i] = s if dtype == "str" else s.encode()
        return out.reshape(shape)
    dtype = np.dtype(dtype)
    if dtype.fields is not None:
        out = np.empty(n, dtype=dtype)
        for i, name in enumerate(dtype.names):
            out[name] = sample_values(dtype.fields[name][0], (n,), seed + i + 1)
        return out.reshape(shape)
    if dtype.subdtype is not None:  # a field with a shape
        base, inner = dtype.subdtype
        return sample_values(base, shape + inner, seed)
    if dtype.kind in "Mm":
        ticks = rng.integers(-(2**40), 2**40, size=n, dtype=np.int64)
        ticks[rng.choice(n, size=min(n, 2), replace=False)] = -(2**63)  # NaT
        return ticks.view(dtype.newbyteorder("=")).astype(dtype).reshape(shape)
    if dtype.kind == "b":
        return (rng.random(n) < 0.5).reshape(shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return (
            rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype.newbyteorder("="))
            .astype(dtype)
            .reshape(shape)
        )
    if dtype.kind in "fc":
        # built in native order, then cast (a byte swap, which keeps every bit pattern)
        part = np.dtype(f"f{dtype.itemsize // (2 if dtype.kind == 'c' else 1)}")
        parts = []
        for _ in range(2 if dtype.kind == "c" else 1):
            x = (rng.standard_normal(n) * 1000).astype(part)
            special = np.array(_FLOAT_BITS[part.itemsize], dtype=f"u{part.itemsize}")
            where = rng.choice(n, size=min(n, 2 * len(special)), replace=False)
            x.view(f"u{part.itemsize}")[where] = np.resize(special, len(where))
            parts.append(x)
        out = parts[0] if dtype.kind == "f" else np.empty(n, dtype=dtype.newbyteorder("="))
        if dtype.kind == "c":
            out.view(part)[0::2], out.view(part)[1::2] = parts[0], parts[1]
        return out.astype(dtype).reshape(shape)
    if dtype.kind == "S":
        raw = rng.integers(0, 256, size=(n, dtype.itemsize), dtype="u1")
        lengths = rng.integers(0, dtype.itemsize + 1, size=n)
        raw[np.arange(dtype.itemsize)[None, :] >= lengths[:, None]] = 0
        return raw.view(dtype).reshape(shape)
    if dtype.kind == "U":
        chars = np.array([ord(c) for c in "abcXYZ019 é世界🚀"], dtype="u4")
        width = dtype.itemsize // 4
        codes = rng.choice(chars, size=(n, width))
        lengths = rng.integers(0, width + 1, size=n)
        codes[np.arange(width)[None, :] >= lengths[:, None]] = 0
        return codes.view(dtype.newbyteorder("=")).astype(dtype).reshape(shape)
    if dtype.kind == "V":
        return rng.integers(0, 256, size=n * dtype.itemsize, dtype="u1").view(dtype).reshape(shape)
    raise ValueError(f"no sample values for {dtype}")


@dataclass
class Case:
    """One reference array: how an oracle creates it and which part of it gets data."""

    name: str
    writer: str  # "zarr" | "tensorstore" | "hand"
    shape: tuple[int, ...]
    dtype: Any
    options: dict = field(default_factory=dict)
    # which region gets data: "all", "head" (leave the last chunk row unwritten), "none"
    written: str = "head"
    make: Callable[[Path, Case], None] | None = None  # for hand-made cases
    # tensorstore cases: read back with tensorstore rather than zarr-python
    reader: str = "zarr"

    @property
    def id(self) -> str:
        return self.name


def case_seed(case: Case) -> int:
    return zlib.crc32(case.name.encode())


def _written_regions(case: Case, chunks: tuple[int, ...], inner: tuple[int, ...]) -> list[tuple[slice, ...]]:
    """The regions that get data; `chunks` is the stored grid, `inner` the finest."""
    if case.written == "none" or any(s == 0 for s in case.shape):
        return []
    if case.written == "all" or not case.shape:
        return [tuple(slice(None) for _ in case.shape)]
    if case.written == "sparse":  # the first inner chunk and one in the middle: shards with holes
        middle = tuple(slice(s // 2, min(s, s // 2 + n)) for s, n in zip(case.shape, inner))
        return [tuple(slice(0, n) for n in inner), middle]
    # leave the last row of chunks along axis 0 unwritten, when there is more than one
    first = case.shape[0]
    stop = (math.ceil(first / chunks[0]) - 1) * chunks[0] if first > chunks[0] else first
    return [(slice(0, stop), *tuple(slice(None) for _ in case.shape[1:]))]


# ------------------------------------------------------------------ zarr-python cases


def _v3(name, shape, dtype, written="head", **options) -> Case:
    return Case(name, "zarr", tuple(shape), dtype, {"zarr_format": 3, **options}, written)


def _v2(name, shape, dtype, written="head", **options) -> Case:
    return Case(name, "zarr", tuple(shape), dtype, {"zarr_format": 2, **options}, written)


def _codec_available(codec_id: str) -> bool:
    """Whether numcodecs has the codec (pcodec and zfpy need packages of their own)."""
    try:
        numcodecs.get_codec({"id": codec_id})
    except ValueError:
        return False
    return True


def _bytes(endian="little"):
    return zc.BytesCodec(endian=endian)


V3_CASES: list[Case] = [
    # every numeric type with zarr-python's default codecs, partial edge chunks
    *[_v3(f"v3.{t}.default", (7, 5), t, chunks=(3, 2)) for t in V3_NUMERIC],
    # ... and big-endian with no compressor, 3-D
    *[
        _v3(f"v3.{t}.big", (4, 3, 5), t, chunks=(3, 2, 2), serializer=_bytes("big"), compressors=None)
        for t in V3_NUMERIC
    ],
    # fill values: NaN, -0.0, infinities, complex with specials, max uint64, negative int, true
    _v3("v3.float32.fill_nan", (10,), "float32", chunks=(3,), fill_value=np.nan),
    _v3("v3.float64.fill_neg0", (10,), "float64", chunks=(3,), fill_value=-0.0),
    _v3("v3.float16.fill_inf", (10,), "float16", chunks=(3,), fill_value=-np.inf),
    _v3("v3.complex64.fill_special", (10,), "complex64", chunks=(3,), fill_value=complex(np.nan, -np.inf)),
    _v3("v3.complex128.fill", (10,), "complex128", chunks=(4,), fill_value=complex(1.5, -2.25)),
    _v3("v3.uint64.fill_max", (10,), "uint64", chunks=(4,), fill_value=2**64 - 1),
    _v3("v3.int64.fill_min", (10,), "int64", chunks=(4,), fill_value=-(2**63)),
    _v3("v3.int16.fill_neg", (10,), "int16", chunks=(4,), fill_value=-7),
    _v3("v3.bool.fill_true", (10,), "bool", chunks=(4,), fill_value=True),
    _v3("v3.float32.unwritten", (6, 6), "float32", chunks=(4, 4), written="none", fill_value=3.5),
    # codecs
    _v3("v3.int16.raw", (9, 7), "int16", chunks=(4, 3), compressors=None),
    _v3("v3.float32.transpose2d", (9, 7), "float32", chunks=(4, 3), filters=[zc.TransposeCodec(order=(1, 0))]),
    _v3(
        "v3.int32.transpose3d",
        (5, 6, 7),
        "int32",
        chunks=(2, 3, 4),
        filters=[zc.TransposeCodec(order=(2, 0, 1))],
        serializer=_bytes("big"),
    ),
    _v3("v3.uint16.gzip", (30, 20), "uint16", chunks=(8, 7), compressors=[zc.GzipCodec(level=1)]),
    _v3(
        "v3.float64.zstd_checksum",
        (30, 20),
        "float64",
        chunks=(8, 7),
        compressors=[zc.ZstdCodec(level=3, checksum=True)],
    ),
    *[
        _v3(
            f"v3.float32.blosc_{cname}_{shuffle}",
            (40, 9),
            "float32",
            chunks=(16, 4),
            compressors=[zc.BloscCodec(cname=cname, clevel=5, shuffle=shuffle, typesize=4)],
        )
        for cname, shuffle in [
            ("lz4", "noshuffle"),
            ("zstd", "shuffle"),
            ("zlib", "bitshuffle"),
            ("lz4hc", "shuffle"),
            ("blosclz", "bitshuffle"),
        ]
    ],
    _v3(
        "v3.int8.blosc_typesize1",
        (50,),
        "int8",
        chunks=(16,),
        compressors=[zc.BloscCodec(cname="zstd", shuffle="bitshuffle", typesize=1)],
    ),
    _v3("v3.int32.crc32c", (20, 3), "int32", chunks=(6, 3), compressors=[zc.Crc32cCodec()]),
    _v3("v3.int32.gzip_crc32c", (20, 3), "int32", chunks=(6, 3), compressors=[zc.GzipCodec(level=6), zc.Crc32cCodec()]),
    # sharding
    _v3("v3.int16.shard_end", (20, 18), "int16", chunks=(4, 3), shards=(8, 9), compressors=None),
    _v3(
        "v3.float32.shard_gzip", (20, 18), "float32", chunks=(4, 3), shards=(8, 9), compressors=[zc.GzipCodec(level=1)]
    ),
    _v3(
        "v3.uint8.shard_start",
        (33, 10),
        "uint8",
        chunks=(8, 8),
        serializer=zc.ShardingCodec(chunk_shape=(4, 4), codecs=[_bytes(), zc.ZstdCodec()], index_location="start"),
        written="sparse",
    ),
    _v3(
        "v3.int64.shard_index_codecs",
        (16, 16),
        "int64",
        chunks=(8, 8),
        serializer=zc.ShardingCodec(
            chunk_shape=(2, 4),
            codecs=[_bytes("big")],
            index_codecs=[_bytes("big"), zc.Crc32cCodec()],
            index_location="end",
        ),
    ),
    _v3(
        "v3.float64.shard_index_no_crc_start",
        (16, 6),
        "float64",
        chunks=(16, 6),
        serializer=zc.ShardingCodec(
            chunk_shape=(4, 3), codecs=[_bytes(), zc.Crc32cCodec()], index_codecs=[_bytes()], index_location="start"
        ),
    ),
    _v3(
        "v3.int32.shard_inner_transpose",
        (12, 10),
        "int32",
        chunks=(6, 10),
        serializer=zc.ShardingCodec(
            chunk_shape=(3, 5), codecs=[zc.TransposeCodec(order=(1, 0)), _bytes(), zc.GzipCodec()]
        ),
    ),
    _v3(
        "v3.int32.transpose_then_shard",
        (12, 10),
        "int32",
        chunks=(6, 6),
        filters=[zc.TransposeCodec(order=(1, 0))],
        serializer=zc.ShardingCodec(chunk_shape=(3, 3), codecs=[_bytes()]),
    ),
    _v3(
        "v3.int16.shard_then_compress",
        (12, 10),
        "int16",
        chunks=(6, 10),
        serializer=zc.ShardingCodec(chunk_shape=(3, 5), codecs=[_bytes()]),
        compressors=[zc.Crc32cCodec()],
    ),
    _v3(
        "v3.uint32.shard_nested",
        (16, 16),
        "uint32",
        chunks=(8, 8),
        serializer=zc.ShardingCodec(
            chunk_shape=(4, 4), codecs=[zc.ShardingCodec(chunk_shape=(2, 2), codecs=[_bytes(), zc.ZstdCodec()])]
        ),
        written="sparse",
    ),
    _v3("v3.float32.shard_sparse", (32, 30), "float32", chunks=(4, 4), shards=(16, 16), written="sparse"),
    _v3("v3.float32.shard_unwritten", (32, 32), "float32", chunks=(4, 4), shards=(16, 16), written="none"),
    _v3("v3.string.shard", (10, 6), "str", chunks=(2, 3), shards=(4, 6)),
    # numcodecs.* codecs as zarr-python writes them
    _v3(
        "v3.int32.numcodecs_delta_zlib",
        (40,),
        "int32",
        chunks=(16,),
        filters=[znc.Delta(dtype="int32")],
        compressors=[znc.Zlib(level=1)],
    ),
    _v3("v3.float32.numcodecs_bitround", (40,), "float32", chunks=(16,), filters=[znc.BitRound(keepbits=6)]),
    _v3(
        "v3.float64.numcodecs_fixedscaleoffset",
        (40,),
        "float64",
        chunks=(16,),
        filters=[znc.FixedScaleOffset(offset=0, scale=100, dtype="<f8", astype="<i4")],
    ),
    _v3("v3.float32.numcodecs_quantize", (40,), "float32", chunks=(16,), filters=[znc.Quantize(digits=3, dtype="<f4")]),
    _v3(
        "v3.int16.numcodecs_shuffle_lz4",
        (40,),
        "int16",
        chunks=(16,),
        compressors=[znc.Shuffle(elementsize=2), znc.LZ4()],
    ),
    _v3("v3.int16.numcodecs_bz2", (40,), "int16", chunks=(16,), compressors=[znc.BZ2(level=1)]),
    _v3("v3.int16.numcodecs_lzma", (40,), "int16", chunks=(16,), compressors=[znc.LZMA()]),
    _v3("v3.uint8.numcodecs_crc32", (40,), "uint8", chunks=(16,), compressors=[znc.CRC32()]),
    _v3("v3.uint8.numcodecs_adler32", (40,), "uint8", chunks=(16,), compressors=[znc.Adler32()]),
    _v3("v3.uint8.numcodecs_fletcher32", (40,), "uint8", chunks=(16,), compressors=[znc.Fletcher32()]),
    _v3("v3.bool.numcodecs_packbits", (40,), "bool", chunks=(13,), filters=[znc.PackBits()]),
    _v3(
        "v3.float64.numcodecs_astype",
        (40,),
        "float64",
        chunks=(16,),
        filters=[znc.AsType(encode_dtype="<f4", decode_dtype="<f8")],
    ),
    _v3("v3.uint16.numcodecs_jenkins_lookup3", (40,), "uint16", chunks=(16,), compressors=[znc.JenkinsLookup3()]),
    _v3("v3.int32.numcodecs_gzip_crc32c", (40,), "int32", chunks=(16,), compressors=[znc.GZip(level=1), znc.CRC32C()]),
    _v3(
        "v3.float32.numcodecs_zstd_checksum",
        (40,),
        "float32",
        chunks=(16,),
        compressors=[znc.Zstd(level=1, checksum=True)],
    ),
    _v3("v3.float32.numcodecs_blosc", (40,), "float32", chunks=(16,), compressors=[znc.Blosc(cname="lz4", shuffle=2)]),
    _v3(
        "v3.datetime64_s.numcodecs_shuffle_zlib",
        (40,),
        "datetime64[s]",
        chunks=(16,),
        compressors=[znc.Shuffle(elementsize=8), znc.Zlib(level=1)],
    ),
    *[
        _v3(f"v3.{t}.numcodecs_pcodec", (40, 3), t, chunks=(16, 2), serializer=znc.PCodec(level=4), compressors=None)
        for t in (["float32", "int64", "uint16"] if _codec_available("pcodec") else [])
    ],
    *[
        _v3(
            f"v3.{t}.numcodecs_zfpy",
            (40, 3),
            t,
            chunks=(16, 2),
            serializer=znc.ZFPY(mode=4, tolerance=-1, rate=-1, precision=-1),
            compressors=None,
        )
        for t in (["float64", "int32"] if _codec_available("zfpy") else [])
    ],
    # variable length
    _v3("v3.string.vlen_utf8", (11, 3), "str", chunks=(4, 2)),
    _v3("v3.string.fill", (11,), "str", chunks=(4,), fill_value="fill é", compressors=None),
    _v3("v3.bytes.vlen_bytes", (11, 3), "bytes", chunks=(4, 2)),
    _v3("v3.bytes.fill", (11,), "bytes", chunks=(4,), fill_value=b"\x00ab"),
    # the extension data types zarr-python writes (zarr-extensions registry)
    _v3("v3.datetime64_D.nat_fill", (7, 5), "datetime64[D]", chunks=(3, 2)),
    _v3("v3.datetime64_ns.fill", (10,), "datetime64[ns]", chunks=(3,), fill_value=np.datetime64(-5, "ns")),
    _v3("v3.datetime64_10s.big", (10,), "datetime64[10s]", chunks=(4,), serializer=_bytes("big"), compressors=None),
    _v3("v3.timedelta64_ms", (7, 5), "timedelta64[ms]", chunks=(3, 2), fill_value=np.timedelta64(7, "ms")),
    _v3("v3.timedelta64_generic.shard", (12,), "timedelta64", chunks=(2,), shards=(6,)),
    _v3("v3.fixed_utf32", (7, 5), "<U5", chunks=(3, 2)),
    _v3("v3.fixed_utf32.fill_big", (10,), "<U3", chunks=(4,), fill_value="zé", serializer=_bytes("big")),
    _v3("v3.null_terminated_bytes", (7, 5), "S4", chunks=(3, 2)),
    _v3("v3.null_terminated_bytes.fill", (10,), "S3", chunks=(4,), fill_value=b"ab"),
    _v3("v3.raw_bytes", (7, 5), "V3", chunks=(3, 2)),
    _v3("v3.raw_bytes.fill", (10,), "V2", chunks=(4,), fill_value=b"\x01\xfe"),
    _v3("v3.structured", (7, 5), [("a", "<i4"), ("b", "<f8"), ("c", "S2")], chunks=(3, 2)),
    _v3("v3.structured.fill", (10,), [("a", "<i2"), ("b", "<f4")], chunks=(4,), fill_value=(-3, 2.5)),
    _v3(
        "v3.structured.nested_time_text",
        (10,),
        [("p", [("x", "<f4"), ("y", "<u2")]), ("t", "<M8[s]"), ("u", "<U2"), ("k", "?")],
        chunks=(4,),
    ),
    _v3("v3.structured.from_big_endian", (10,), [("a", ">i4"), ("b", ">f8")], chunks=(4,)),
    # chunk key encodings and dimension names
    _v3("v3.int16.key_dot", (9, 9), "int16", chunks=(4, 4), chunk_key_encoding={"name": "default", "separator": "."}),
    _v3("v3.int16.key_v2_dot", (9, 9), "int16", chunks=(4, 4), chunk_key_encoding={"name": "v2", "separator": "."}),
    _v3("v3.int16.key_v2_slash", (9, 9), "int16", chunks=(4, 4), chunk_key_encoding={"name": "v2", "separator": "/"}),
    _v3("v3.float32.dimension_names", (5, 4), "float32", chunks=(2, 2), dimension_names=["y", None]),
    # shapes
    _v3("v3.int32.scalar", (), "int32"),
    _v3("v3.float64.scalar_nan", (), "float64", fill_value=np.nan, written="none"),
    _v3("v3.int32.zero_length", (0, 5), "int32", chunks=(3, 2)),
    _v3("v3.uint8.chunk_bigger_than_array", (3, 2), "uint8", chunks=(10, 10), written="all"),
    _v3("v3.int8.4d", (3, 4, 5, 6), "int8", chunks=(2, 3, 2, 4)),
]

V2_CASES: list[Case] = [
    *[
        _v2(f"v2.{t}.blosc", (7, 5), t, chunks=(3, 2))
        for t in ["|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"]
    ],
    *[
        _v2(f"v2.{t}.be", (7, 5), t, chunks=(3, 2), compressors=numcodecs.Zlib(level=1))
        for t in [">i2", ">i4", ">i8", ">u2", ">u4", ">u8", ">f2", ">f4", ">f8", ">c8", ">c16"]
    ],
    _v2("v2.<i4.none", (17,), "<i4", chunks=(5,), compressors=None),
    *[
        _v2(f"v2.<f4.{name}", (40, 9), "<f4", chunks=(16, 4), compressors=codec)
        for name, codec in [
            ("zlib", numcodecs.Zlib(level=3)),
            ("gzip", numcodecs.GZip(level=1)),
            ("bz2", numcodecs.BZ2()),
            ("lzma", numcodecs.LZMA()),
            ("zstd", numcodecs.Zstd(level=2)),
            ("lz4", numcodecs.LZ4()),
            ("blosc_zstd_bitshuffle", numcodecs.Blosc(cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE)),
            ("blosc_lz4_noshuffle", numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.NOSHUFFLE)),
            ("blosc_zlib_shuffle", numcodecs.Blosc(cname="zlib", shuffle=numcodecs.Blosc.SHUFFLE)),
        ]
    ],
    _v2(
        "v2.<i2.delta_shuffle",
        (40,),
        "<i2",
        chunks=(16,),
        filters=[numcodecs.Delta("<i2"), numcodecs.Shuffle(elementsize=2)],
        compressors=numcodecs.Zlib(),
    ),
    _v2(
        "v2.<f8.fixedscaleoffset",
        (40,),
        "<f8",
        chunks=(16,),
        filters=[numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<i4")],
    ),
    _v2("v2.<f4.quantize_bitround", (40,), "<f4", chunks=(16,), filters=[numcodecs.Quantize(digits=2, dtype="<f4")]),
    _v2("v2.<f4.bitround", (40,), "<f4", chunks=(16,), filters=[numcodecs.BitRound(keepbits=5)]),
    _v2("v2.|b1.packbits", (40,), "|b1", chunks=(13,), filters=[numcodecs.PackBits()]),
    _v2(
        "v2.<f8.astype", (40,), "<f8", chunks=(16,), filters=[numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")]
    ),
    _v2("v2.<u4.crc32", (40,), "<u4", chunks=(16,), compressors=numcodecs.CRC32()),
    _v2("v2.>i4.delta_be", (40,), ">i4", chunks=(16,), filters=[numcodecs.Delta(">i4")]),
    # memory order
    _v2("v2.<i4.order_F", (9, 7), "<i4", chunks=(4, 3), order="F"),
    _v2("v2.>f8.order_F_3d", (5, 6, 7), ">f8", chunks=(2, 3, 4), order="F", compressors=numcodecs.Zstd()),
    _v2("v2.|S5.order_F", (6, 5), "|S5", chunks=(4, 2), order="F"),
    # fixed-size strings and vlen
    _v2("v2.|S7", (11,), "|S7", chunks=(4,)),
    _v2("v2.|S3.fill", (11,), "|S3", chunks=(4,), fill_value=b"ab"),
    _v2("v2.<U5", (11,), "<U5", chunks=(4,)),
    _v2("v2.>U4.fill", (11,), ">U4", chunks=(4,), fill_value="zé"),
    _v2("v2.|O.vlen_utf8", (11, 3), "str", chunks=(4, 2)),
    _v2("v2.|O.vlen_bytes", (11, 3), "bytes", chunks=(4, 2)),
    _v2("v2.|O.vlen_utf8_zstd", (11,), "str", chunks=(4,), compressors=numcodecs.Zstd()),
    # fill values
    _v2("v2.<f8.fill_null", (10,), "<f8", chunks=(3,), fill_value=None),
    _v2("v2.<i2.fill_null", (10,), "<i2", chunks=(3,), fill_value=None),
    _v2("v2.<f4.fill_nan", (10,), "<f4", chunks=(3,), fill_value=np.nan),
    _v2("v2.>f4.fill_neg_inf", (10,), ">f4", chunks=(3,), fill_value=-np.inf),
    _v2("v2.<c16.fill", (10,), "<c16", chunks=(3,), fill_value=complex(1, -2)),
    _v2("v2.|b1.fill_true", (10,), "|b1", chunks=(3,), fill_value=True),
    _v2("v2.<u8.fill_max", (10,), "<u8", chunks=(3,), fill_value=2**64 - 1),
    # datetimes, raw bytes and structured dtypes
    _v2("v2.<M8[D]", (7, 5), "<M8[D]", chunks=(3, 2)),
    _v2("v2.>M8[ns].fill", (10,), ">M8[ns]", chunks=(4,), fill_value=np.datetime64(3, "ns"), compressors=None),
    _v2("v2.<m8[s]", (10,), "<m8[s]", chunks=(4,)),
    _v2("v2.<M8[D].fill_null", (10,), "<M8[D]", chunks=(3,), fill_value=None),
    _v2("v2.>m8[3us].fill_null", (10,), ">m8[3us]", chunks=(3,), fill_value=None, compressors=None),
    _v2("v2.|V3", (10,), "|V3", chunks=(4,), fill_value=b"\x00\x01\x02"),
    _v2("v2.structured", (7, 5), [("a", "<i4"), ("b", ">f8"), ("c", "S2")], chunks=(3, 2)),
    _v2("v2.structured.fill", (10,), [("a", "<i2"), ("b", ">f4")], chunks=(4,), fill_value=(4, -1.5)),
    # separators and shapes
    _v2("v2.<i2.sep_slash", (9, 9), "<i2", chunks=(4, 4), chunk_key_encoding={"name": "v2", "separator": "/"}),
    _v2("v2.<i2.sep_dot", (9, 9), "<i2", chunks=(4, 4), chunk_key_encoding={"name": "v2", "separator": "."}),
    _v2("v2.<i4.scalar", (), "<i4"),
    _v2("v2.<f4.zero_length", (5, 0), "<f4", chunks=(2, 2)),
    _v2("v2.|u1.3d_unwritten", (5, 6, 7), "|u1", chunks=(2, 3, 4), written="none", fill_value=9),
]


def _zarr_dtype(dtype: Any):
    if dtype == "str":
        return str
    if dtype == "bytes":
        return zarr.dtype.VariableLengthBytes()
    return np.dtype(dtype)


def write_zarr_case(root: Path, case: Case) -> None:
    options = dict(case.options)
    if options.get("zarr_format") == 2 and "compressors" not in options:
        options["compressors"] = numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.SHUFFLE)
    chunks = options.pop("chunks", case.shape)
    array = zarr.create_array(
        store=str(root / case.name),
        shape=case.shape,
        dtype=_zarr_dtype(case.dtype),
        chunks=chunks,
        attributes={"case": case.name, "nested": {"list": [1, 2.5, None]}},
        **options,
    )
    shards = options.get("shards")
    inner = getattr(options.get("serializer"), "chunk_shape", chunks)
    values = sample_values(case.dtype, case.shape, seed=case_seed(case))
    for region in _written_regions(case, tuple(shards or chunks), tuple(inner)):
        array[region] = values[region]


# ------------------------------------------------------------------ tensorstore cases


def _ts3(name, shape, dtype, chunks, codecs, fill_value=None, chunk_key_encoding=None, written="head") -> Case:
    metadata = {
        "shape": list(shape),
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "codecs": codecs,
    }
    if fill_value is not None:
        metadata["fill_value"] = fill_value
    if chunk_key_encoding:
        metadata["chunk_key_encoding"] = chunk_key_encoding
    return Case(
        name,
        "tensorstore",
        tuple(shape),
        dtype,
        {"driver": "zarr3", "metadata": metadata},
        written,
        reader="tensorstore",
    )


def _ts2(name, shape, dtype, chunks, **metadata) -> Case:
    metadata = {"shape": list(shape), "chunks": list(chunks), "dtype": dtype, **metadata}
    return Case(
        name, "tensorstore", tuple(shape), dtype, {"driver": "zarr", "metadata": metadata}, reader="tensorstore"
    )


_LE = {"name": "bytes", "configuration": {"endian": "little"}}
_BE = {"name": "bytes", "configuration": {"endian": "big"}}

TS_CASES: list[Case] = [
    _ts3("ts3.int16.bytes", (9, 7), "int16", (4, 3), [_LE]),
    _ts3(
        "ts3.float32.blosc",
        (20, 9),
        "float32",
        (8, 4),
        [_LE, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}],
    ),
    _ts3(
        "ts3.uint64.gzip_be",
        (20, 9),
        "uint64",
        (8, 4),
        [_BE, {"name": "gzip", "configuration": {"level": 3}}],
        fill_value=7,
    ),
    _ts3("ts3.complex64.zstd", (20, 9), "complex64", (8, 4), [_LE, {"name": "zstd", "configuration": {"level": 1}}]),
    _ts3(
        "ts3.float64.transpose_crc32c",
        (6, 5, 4),
        "float64",
        (4, 2, 3),
        [{"name": "transpose", "configuration": {"order": [2, 1, 0]}}, _LE, {"name": "crc32c"}],
        fill_value="NaN",
    ),
    _ts3(
        "ts3.int32.shard",
        (20, 18),
        "int32",
        (8, 9),
        [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [4, 3],
                    "codecs": [_LE, {"name": "zstd"}],
                    "index_codecs": [_LE, {"name": "crc32c"}],
                    "index_location": "end",
                },
            }
        ],
        written="sparse",
    ),
    _ts3(
        "ts3.uint16.shard_start",
        (20, 18),
        "uint16",
        (8, 9),
        [
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": [2, 9],
                    "codecs": [_BE],
                    "index_codecs": [_BE],
                    "index_location": "start",
                },
            }
        ],
        fill_value=3,
    ),
    _ts3(
        "ts3.int8.key_v2",
        (9, 9),
        "int8",
        (4, 4),
        [_LE],
        chunk_key_encoding={"name": "v2", "configuration": {"separator": "."}},
    ),
    _ts3("ts3.bool.scalar", (), "bool", (), [_LE]),
    # the types numpy lacks: bfloat16, the float8 family, float4, int2, int4
    *[_ts3(f"ts3.{t}", (10, 3), t, (4, 2), [_LE]) for t in LOW_PRECISION if t != "bfloat16"],
    _ts3("ts3.bfloat16.nan_fill_zstd", (10, 3), "bfloat16", (4, 2), [_LE, {"name": "zstd"}], fill_value="NaN"),
    _ts3("ts3.bfloat16.big_fill", (10,), "bfloat16", (4,), [_BE], fill_value=-2.5),
    _ts3("ts3.float8_e4m3fn.fill", (10,), "float8_e4m3fn", (4,), [_LE], fill_value=1.5),
    _ts3("ts3.float8_e5m2.fill_inf", (10,), "float8_e5m2", (4,), [_LE], fill_value="-Infinity"),
    _ts3("ts3.float4_e2m1fn.fill", (10,), "float4_e2m1fn", (4,), [_LE], fill_value=-3.0),
    _ts3("ts3.int4", (10, 3), "int4", (4, 2), [_LE, {"name": "gzip"}]),
    _ts3("ts3.int4.fill", (10,), "int4", (4,), [_LE], fill_value=-3),
    _ts3("ts3.int2.fill", (10,), "int2", (4,), [_LE], fill_value=-2),
    *[_ts3(f"ts3.{t}.scalar", (), t, (), [_LE]) for t in ("int4", "float4_e2m1fn")],
    _ts3(
        "ts3.int4.shard",
        (12,),
        "int4",
        (6,),
        [
            {
                "name": "sharding_indexed",
                "configuration": {"chunk_shape": [3], "codecs": [_LE], "index_codecs": [_LE], "index_location": "end"},
            }
        ],
        fill_value=5,
    ),
    _ts2("ts2.bfloat16", (9,), "bfloat16", (4,), compressor={"id": "zstd", "level": 1}),
    _ts2("ts2.float8_e4m3fn", (9,), "float8_e4m3fn", (4,), compressor=None, fill_value=0.5),
    _ts2("ts2.int4", (9,), "int4", (4,), compressor=None, fill_value=-1),
    _ts2("ts2.structured", (9,), [["a", "<i2"], ["b", ">f8", [2]], ["c", "|u1", [3]]], (4,), compressor=None),
    _ts2("ts2.<i2.zlib", (9, 7), "<i2", (4, 3), compressor={"id": "zlib", "level": 1}),
    _ts2(
        "ts2.>f8.order_F",
        (9, 7, 3),
        ">f8",
        (4, 3, 2),
        order="F",
        compressor={"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2},
    ),
    _ts2("ts2.<u4.slash", (9, 7), "<u4", (4, 3), dimension_separator="/", compressor=None, fill_value=5),
    _ts2("ts2.>i8.zstd", (9,), ">i8", (4,), compressor={"id": "zstd", "level": 1}),
    _ts2("ts2.<c8.bz2", (9, 4), "<c8", (4, 3), compressor={"id": "bz2", "level": 1}),
]


def write_tensorstore_case(root: Path, case: Case) -> None:
    import tensorstore as ts

    spec = {
        "driver": case.options["driver"],
        "kvstore": {"driver": "file", "path": str(root / case.name)},
        "metadata": case.options["metadata"],
    }
    metadata = case.options["metadata"]
    chunks = metadata.get("chunks") or metadata["chunk_grid"]["configuration"]["chunk_shape"]
    sharding = [c for c in metadata.get("codecs", []) if c["name"] == "sharding_indexed"]
    inner = sharding[0]["configuration"]["chunk_shape"] if sharding else chunks
    regions = _written_regions(case, tuple(chunks), tuple(inner))
    if isinstance(case.dtype, list):  # structured: tensorstore opens one field at a time
        values = sample_values(_structured_dtype(case.dtype), case.shape, seed=case_seed(case))
        ts.open({**spec, "field": case.dtype[0][0]}, create=True, delete_existing=True).result()
        for name in values.dtype.names:
            store = ts.open({**spec, "field": name}, open=True).result()
            field = values[name].astype(values[name].dtype.newbyteorder("="))
            for region in regions:
                store[region].write(field[region]).result()
        return
    store = ts.open(spec, create=True, delete_existing=True).result()
    values = sample_values(
        case.dtype if case.dtype in LOW_PRECISION or case.dtype in SUBBYTE_INTS else np.dtype(case.dtype),
        case.shape,
        seed=case_seed(case),
    )
    if values.dtype.byteorder == ">":
        values = values.astype(values.dtype.newbyteorder("="))
    for region in regions:
        store[region].write(values[region]).result()


def _structured_dtype(fields: list) -> np.dtype:
    """A v2 structured dtype from its JSON form."""
    return np.dtype([tuple(f[:2]) + tuple(tuple(x) for x in f[2:]) for f in fields])


# ------------------------------------------------------------------ hand-made cases


def _twin_pair(dtype: Any, fill_value: Any, edit: Callable[[dict], None]) -> Callable[[Path, Case], None]:
    """A maker for a spelling no oracle writes: zarr-python writes the array as
    `NAME.twin`, and NAME holds the same chunks under an edited zarr.json, so zarr-python
    reads the reference values from the twin."""

    def make(root: Path, case: Case) -> None:
        twin = zarr.create_array(
            store=str(root / (case.name + ".twin")),
            shape=case.shape,
            dtype=dtype,
            chunks=(3,),
            fill_value=fill_value,
            compressors=None,
        )
        values = sample_values(np.dtype(dtype), case.shape, seed=case_seed(case))
        twin[:6] = values[:6]
        target = root / case.name
        (target / "c").mkdir(parents=True)
        doc = json.loads((root / (case.name + ".twin") / "zarr.json").read_text())
        edit(doc)
        (target / "zarr.json").write_text(json.dumps(doc))
        for chunk in (root / (case.name + ".twin") / "c").iterdir():
            (target / "c" / chunk.name).write_bytes(chunk.read_bytes())

    return make


def _as_r16(doc: dict) -> None:
    doc.update(data_type="r16", fill_value=[1, 2])


def _as_struct(doc: dict) -> None:
    """The registry's `struct`: field objects, a fill value per field, an explicit endian.
    zarr-python before 3.2 writes `structured` with [name, type] pairs, later releases
    write `struct` itself (its fields are then already objects)."""
    fields = [
        field if isinstance(field, dict) else {"name": field[0], "data_type": field[1]}
        for field in doc["data_type"]["configuration"]["fields"]
    ]
    doc["data_type"] = {"name": "struct", "configuration": {"fields": fields}}
    doc["fill_value"] = {"a": -3, "b": "NaN"}
    doc["codecs"] = [{"name": "bytes", "configuration": {"endian": "little"}}]


def _as_nat_string_microseconds(doc: dict) -> None:
    doc["data_type"]["configuration"]["unit"] = "μs"
    doc["fill_value"] = "NaT"


HAND_CASES: list[Case] = [
    Case("hand.r16", "hand", (10,), "V2", make=_twin_pair("V2", b"\x01\x02", _as_r16), reader="twin"),
    Case(
        "hand.struct",
        "hand",
        (10,),
        [("a", "<i2"), ("b", "<f4")],
        reader="twin",
        make=_twin_pair([("a", "<i2"), ("b", "<f4")], (-3, np.nan), _as_struct),
    ),
    Case(
        "hand.datetime64_us.nat_string",
        "hand",
        (10,),
        "datetime64[us]",
        reader="twin",
        make=_twin_pair("datetime64[us]", np.datetime64("NaT", "us"), _as_nat_string_microseconds),
    ),
]

ALL_CASES: list[Case] = V3_CASES + V2_CASES + TS_CASES + HAND_CASES


def write_case(root: Path, case: Case) -> None:
    if case.writer == "zarr":
        write_zarr_case(root, case)
    elif case.writer == "tensorstore":
        write_tensorstore_case(root, case)
    else:
        case.make(root, case)


# ------------------------------------------------------------------ oracle reads


def open_oracle(root: Path, case: Case):
    """A callable selection -> numpy values, reading with the case's oracle."""
    if case.reader == "tensorstore":
        import tensorstore as ts

        spec = {"driver": case.options["driver"], "kvstore": {"driver": "file", "path": str(root / case.name)}}
        if isinstance(case.dtype, list):  # structured: one field at a time
            dtype = _structured_dtype(case.dtype)
            fields = {name: ts.open({**spec, "field": name}, open=True, read=True).result() for name in dtype.names}
        else:
            fields = {None: ts.open(spec, open=True, read=True).result()}

        def read(selection):
            if isinstance(selection, tuple):  # tensorstore takes no negative indices
                selection = tuple(s + n if isinstance(s, int) and s < 0 else s for s, n in zip(selection, case.shape))
            parts = {name: as_plain_numpy(store[selection].read().result()) for name, store in fields.items()}
            if None in parts:
                return parts[None]
            first = parts[dtype.names[0]]  # a field with a shape reads with that shape last
            out = np.empty(first.shape[: first.ndim - len(dtype[0].shape)], dtype=dtype)
            for name, part in parts.items():
                out[name] = part
            return out

        return read
    path = root / (case.name + ".twin" if case.reader == "twin" else case.name)
    array = zarr.open_array(str(path), mode="r")
    return lambda selection: np.asarray(array[selection])


def oracle_fill_value(root: Path, case: Case) -> Any:
    """The fill value as the writing library understands it."""
    if case.reader == "tensorstore":
        import tensorstore as ts

        spec = {"driver": case.options["driver"], "kvstore": {"driver": "file", "path": str(root / case.name)}}
        if isinstance(case.dtype, list):  # structured: each field's fill
            dtype = _structured_dtype(case.dtype)
            out = np.zeros((), dtype=dtype)
            for name in dtype.names:
                fill = ts.open({**spec, "field": name}, open=True, read=True).result().fill_value
                if fill is not None:
                    out[name] = fill
            return out[()]
        store = ts.open(spec, open=True, read=True).result()
        fill = store.fill_value
        fill = np.zeros((), dtype=store.dtype.numpy_dtype) if fill is None else np.asarray(fill)
        return as_plain_numpy(fill)[()]
    path = root / (case.name + ".twin" if case.reader == "twin" else case.name)
    array = zarr.open_array(str(path), mode="r")
    fill = array.fill_value
    if fill is None:  # v2 null: zarr-python reads unwritten chunks as its data type's default
        return array.metadata.dtype.default_scalar()  # zero; NaT for datetime64/timedelta64
    return fill


# ------------------------------------------------------------------ comparisons


def canonical(values: np.ndarray) -> np.ndarray:
    """Values in native byte order, for bytewise comparison across byte orders."""
    values = np.asarray(values)
    if values.dtype.fields is not None:  # each field in its own order: cast field by field
        return np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    if values.dtype.byteorder == ">" or (values.dtype.byteorder == "=" and not np.little_endian):
        values = values.byteswap().view(values.dtype.newbyteorder("<"))
    return np.ascontiguousarray(values)


def _python_scalar(value: Any) -> Any:
    """zarr-python returns some elements of 0-d selections as numpy scalars or arrays."""
    if isinstance(value, np.ndarray):
        value = value[()]
    return value.item() if isinstance(value, np.generic) else value


def assert_same_values(ours: np.ndarray, theirs: np.ndarray, what: str = "") -> None:
    """Equal shapes and, bit for bit, equal elements (element equality for objects)."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != {theirs.shape}"
    if ours.dtype.kind in "OT" or theirs.dtype.kind in "OT":  # variable-length: str or bytes objects
        assert ours.dtype.kind in "OT" and theirs.dtype.kind in "OT", f"{what}: dtype {ours.dtype} != {theirs.dtype}"
        a_items = [_python_scalar(a) for a in ours.astype(object).ravel().tolist()]
        b_items = [_python_scalar(b) for b in theirs.astype(object).ravel().tolist()]
        mismatches = [(i, a, b) for i, (a, b) in enumerate(zip(a_items, b_items)) if type(a) is not type(b) or a != b]
        assert not mismatches, f"{what}: {len(mismatches)} elements differ, first {mismatches[:3]}"
        return
    assert ours.dtype.kind == theirs.dtype.kind and ours.dtype.itemsize == theirs.dtype.itemsize, (
        f"{what}: dtype {ours.dtype} != {theirs.dtype}"
    )
    a, b = canonical(ours), canonical(theirs)
    if a.tobytes() != b.tobytes():
        flat_a, flat_b = a.reshape(-1), b.reshape(-1)
        va, vb = flat_a.view(f"V{a.dtype.itemsize}"), flat_b.view(f"V{b.dtype.itemsize}")
        bad = np.flatnonzero(va != vb)
        raise AssertionError(
            f"{what}: {bad.size} of {flat_a.size} elements differ, first at {bad[:5].tolist()}: "
            f"ours {flat_a[bad[:5]].tolist()} theirs {flat_b[bad[:5]].tolist()}"
        )
