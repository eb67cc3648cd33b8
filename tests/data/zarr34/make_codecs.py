"""Writes tests/data/zarr34/codecs/: arrays zarr-python >= 3.4 writes with the codecs
of the zarr-extensions registry and numcodecs 0.17 (store.zarr/), and the values
zarr-python reads back from each (expected/NAME.npy), with the values it was given
(written/NAME.npy) and the region written (regions.json). Run where zarr >= 3.4, numcodecs
>= 0.17, cast-value-rs, pcodec and zfpy are installed:

    python tests/data/zarr34/make_codecs.py [OUT]
"""

from __future__ import annotations

import json
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec, CastValue, ScaleOffset, ShardingCodec, ZstdCodec
from zarr.codecs.numcodecs import ZFPY, PCodec

HERE = Path(__file__).resolve().parent


def cast(data_type, **options):
    return CastValue(data_type=data_type, **options)


def _grid(shape, dtype, low, high, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=shape).astype(dtype)


# name -> (shape, chunks, dtype, fill_value, codec options, values, region written)
ARRAYS = {
    "scale_offset_f32": (
        (9, 7),
        (4, 3),
        "float32",
        0.0,
        dict(filters=[ScaleOffset(offset=5, scale=0.1)]),
        _grid((9, 7), "float32", -50, 50, 1),
        np.s_[:6],
    ),
    "scale_offset_i16": (
        (10,),
        (4,),
        "int16",
        1000,
        dict(filters=[ScaleOffset(offset=1000, scale=3)]),
        (np.arange(10) * 7 - 30 + 1000).astype("int16"),
        np.s_[2:9],
    ),
    "scale_offset_u64": (
        (6,),
        (4,),
        "uint64",
        2**63,
        dict(filters=[ScaleOffset(offset=2**63, scale=2)]),
        (np.uint64(2**63) + np.arange(6, dtype="uint64") * 1000),
        np.s_[:5],
    ),
    # the registry's example: float64 in [0, 2540] as uint8, NaN kept through scalar_map
    "scale_cast_u8_nan": (
        (12, 5),
        (5, 2),
        "float64",
        "NaN",
        dict(
            filters=[
                ScaleOffset(offset=-10, scale=0.1),
                cast("uint8", rounding="nearest-even", scalar_map={"encode": [("NaN", 0)], "decode": [(0, "NaN")]}),
            ]
        ),
        np.where(np.arange(60).reshape(12, 5) % 7 == 3, np.nan, np.linspace(0, 2540, 60).reshape(12, 5)),
        np.s_[:9, :3],
    ),
    # numcodecs.fixedscaleoffset as the registry maps it: wrap past the target's range
    "scale_cast_u8_wrap": (
        (20,),
        (8,),
        "float32",
        10.0,
        dict(filters=[ScaleOffset(offset=10, scale=0.1), cast("uint8", rounding="towards-zero", out_of_range="wrap")]),
        np.linspace(10, 5000, 20).astype("float32"),
        np.s_[:],
    ),
    "cast_u16_clamp_floor": (
        (4, 6),
        (3, 4),
        "float64",
        0.0,
        dict(filters=[cast("uint16", rounding="towards-negative", out_of_range="clamp")]),
        np.linspace(-1000.5, 80000.5, 24).reshape(4, 6),
        np.s_[:, :5],
    ),
    "cast_i16_nearest_away": (
        (16,),
        (5,),
        "float32",
        0.0,
        dict(filters=[cast("int16", rounding="nearest-away", out_of_range="clamp")]),
        np.array(
            [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.49, -3.51, 1e6, -1e6, 7.5, -7.5, 0.0, 100.25, 32767.5, -32768.5],
            dtype="float32",
        ),
        np.s_[:],
    ),
    "cast_i32_ceil": (
        (9,),
        (4,),
        "float64",
        0.0,
        dict(filters=[cast("int32", rounding="towards-positive")]),
        np.array([-2.5, -1.0001, -0.2, 0.2, 1.0001, 2.5, 1e9 + 0.1, -1e9 - 0.9, 3.0]),
        np.s_[:],
    ),
    "cast_f32_towards_zero": (
        (8,),
        (3,),
        "float64",
        0.0,
        dict(filters=[cast("float32", rounding="towards-zero", out_of_range="clamp")]),
        np.array([0.1, -0.1, 1 / 3, -2 / 3, 1e300, -1e300, np.pi, np.inf]),
        np.s_[:],
    ),
    "cast_f16_clamp": (
        (10,),
        (4,),
        "float32",
        0.0,
        dict(filters=[cast("float16", out_of_range="clamp")]),
        np.array([0.1, 65504, 65519, 65520, 1e6, -1e6, np.nan, -0.0, 1e-8, 3.14159], dtype="float32"),
        np.s_[:],
    ),
    "cast_i64_i16_wrap": (
        (7,),
        (3,),
        "int64",
        0,
        dict(filters=[cast("int16", out_of_range="wrap")]),
        np.array([0, 32767, 32768, 32769, -32769, 2**40 + 5, -(2**62)], dtype="int64"),
        np.s_[:],
    ),
    "cast_i32_u8_clamp": (
        (6,),
        (4,),
        "int32",
        7,
        dict(filters=[cast("uint8", out_of_range="clamp")]),
        np.array([-5, 0, 255, 256, 100000, 7], dtype="int32"),
        np.s_[:],
    ),
    "cast_u16_f16_floor": (
        (6,),
        (6,),
        "uint16",
        0,
        dict(filters=[cast("float16", rounding="towards-negative")]),
        np.array([1, 2049, 2051, 4097, 65504, 30001], dtype="uint16"),
        np.s_[:],
    ),
    # sharded: the filters inside the shards (as create_array puts them), and before them
    "scale_cast_in_shards": (
        (10, 8),
        (2, 2),
        "float64",
        "NaN",
        dict(
            shards=(4, 4),
            filters=[
                ScaleOffset(offset=-10, scale=0.1),
                cast("uint8", scalar_map={"encode": [("NaN", 0)], "decode": [(0, "NaN")]}),
            ],
        ),
        np.linspace(0, 2540, 80).reshape(10, 8),
        np.s_[1:5, :3],
    ),
    "pcodec_f64": (
        (40, 3),
        (16, 2),
        "float64",
        0.0,
        dict(serializer=PCodec(level=4), compressors=None),
        np.cumsum(_grid((40, 3), "float64", -1, 1, 2), axis=0),
        np.s_[:],
    ),
    "pcodec_i32": (
        (50,),
        (16,),
        "int32",
        -1,
        dict(serializer=PCodec(), compressors=None),
        np.arange(50, dtype="int32") * 3 - 70,
        np.s_[:40],
    ),
    # numcodecs 0.17 writes delta_spec "no_op"; 0.16 reads it only as "none"
    "pcodec_no_op_u16": (
        (30,),
        (12,),
        "uint16",
        0,
        dict(serializer=PCodec(delta_spec="no_op"), compressors=None),
        (np.arange(30, dtype="uint16") * 997) % 5000,
        np.s_[:],
    ),
    "zfpy_f64": (
        (12, 6),
        (5, 4),
        "float64",
        0.0,
        dict(serializer=ZFPY(mode=4, tolerance=-1, rate=-1, precision=-1), compressors=None),
        _grid((12, 6), "float64", 0, 10, 3),
        np.s_[:],
    ),
}

# written with an explicit codec list: scale_offset and cast_value before sharding_indexed
EXPLICIT = {
    "scale_cast_then_shards": (
        (9, 6),
        "float64",
        "NaN",
        [
            ScaleOffset(offset=-10, scale=0.1),
            cast("uint8", scalar_map={"encode": [("NaN", 0)], "decode": [(0, "NaN")]}),
            ShardingCodec(chunk_shape=(2, 3), codecs=[BytesCodec(), ZstdCodec()]),
        ],
        (4, 6),
        np.linspace(0, 2540, 54).reshape(9, 6),
        np.s_[:3, :],
    ),
}


def _write(array, name, values, region, regions, out: Path) -> None:
    values = np.asarray(values, dtype=array.dtype)[region]
    array[region] = values
    np.save(out / "written" / f"{name}.npy", values)
    regions[name] = [
        list(s.indices(n)[:2]) for s, n in zip(np.index_exp[region] + (np.s_[:],) * array.ndim, array.shape)
    ]


def main(out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    root = zarr.open_group(out / "store.zarr", mode="w", zarr_format=3)
    (out / "expected").mkdir(parents=True)
    (out / "written").mkdir()
    regions = {}
    for name, (shape, chunks, dtype, fill, options, values, region) in ARRAYS.items():
        a = root.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill, **options)
        _write(a, name, values, region, regions, out)
    for name, (shape, dtype, fill, codecs, chunks, values, region) in EXPLICIT.items():
        a = zarr.create(
            shape=shape,
            chunks=chunks,
            dtype=dtype,
            fill_value=fill,
            codecs=codecs,
            store=out / "store.zarr",
            path=name,
            zarr_format=3,
        )
        _write(a, name, values, region, regions, out)
    for name in [*ARRAYS, *EXPLICIT]:
        np.save(out / "expected" / f"{name}.npy", zarr.open_array(out / "store.zarr" / name, mode="r")[...])
    (out / "regions.json").write_text(json.dumps(regions, indent=1) + "\n")
    writers = {p: version(p) for p in ("zarr", "numcodecs", "numpy", "cast-value-rs", "pcodec", "zfpy")}
    (out / "writers.json").write_text(json.dumps({"python": sys.version.split()[0], **writers}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "codecs")
