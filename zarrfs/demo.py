"""A small, varied demo hierarchy (about 1.3 MB stored), written with zarrfs's own format
layer: Zarr v3 and v2 arrays, compressors, sharding, variable-length strings, unwritten
chunks and a convention. Every value comes from a seeded generator, so each run stores
the same bytes (gzip chunks aside: their header holds the time of compression).
DEMO_ARRAYS holds the values a reader should see."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .format import Hierarchy
from .format.metadata import array_document_v2, array_document_v3, dump_json, group_document_v3
from .store import open_store

SEED = 20240917

# the conventions spec's own example: projection information (geo:proj)
PROJ_CONVENTION_UUID = "f010a634-3525-416e-9320-8f44b5bc352c"

ROOT_ATTRIBUTES = {
    "title": "zarrfs demo hierarchy",
    "description": "Synthetic climate fields, images, labels and a Zarr v2 corner, "
                   "written by zarrfs.demo for browsing with ls and cat.",
    "zarr_conventions_version": "0.1.0",
    "zarr_conventions_metadata": {
        PROJ_CONVENTION_UUID: {
            "version": "0.1.0",
            "name": "geo:proj",
            "description": "Geospatial projection information",
            "schema": "https://github.com/EOPF-Explorer/data-model/v0.1.0/attributes/geo/proj/schema.json",
            "spec": "https://github.com/EOPF-Explorer/data-model/v0.1.0/README.md",
            "configuration": {"code": "EPSG:4326"},
        },
    },
}

GROUP_ATTRIBUTES = {
    "climate": {"description": "Monthly fields on regular latitude/longitude grids"},
    "images": {"description": "An RGB image and a sharded 3-D stack"},
    "tables": {"description": "Variable-length strings"},
}
LEGACY_ATTRIBUTES = {"description": "A Zarr v2 group, as older tools write them"}

_LITTLE = {"name": "bytes", "configuration": {"endian": "little"}}


# ------------------------------------------------------------------ values

def _rng(stream: int) -> np.random.Generator:
    # one independent stream per array, so each array can be recomputed alone
    return np.random.default_rng([SEED, stream])


def temperature() -> np.ndarray:
    """Monthly 2 m air temperature in kelvin, (time, lat, lon) on a 2.5 degree grid:
    warm tropics, cold poles, opposite seasons in the two hemispheres, some weather."""
    months = np.arange(12)[:, None, None]
    lat = np.radians(np.linspace(-90, 90, 73))[None, :, None]
    lon = np.radians(np.arange(144) * 2.5)[None, None, :]
    season = np.cos(2 * np.pi * (months + 0.5) / 12)
    field_ = (
        300 - 50 * np.sin(lat) ** 2
        - 15 * np.sin(lat) * season
        + 3 * np.sin(2 * lon) * np.cos(lat)
        + 2 * np.cos(3 * lon + 1) * np.cos(lat) ** 2
    )
    return (field_ + _rng(1).normal(0, 0.5, field_.shape)).astype(np.float32)


PRECIP_WRITTEN_MONTHS = 8


def precipitation() -> np.ndarray:
    """Monthly precipitation in mm/day, (time, lat, lon) on a 4 degree grid. Only the
    first PRECIP_WRITTEN_MONTHS are stored; the rest read as the NaN fill value."""
    months = np.arange(12)[:, None, None]
    lat = np.linspace(-88, 88, 45)[None, :, None]
    lon = np.radians(np.arange(90) * 4.0)[None, None, :]
    itcz = 8 * np.sin(2 * np.pi * (months - 3) / 12)  # the rain belt follows the sun
    mean = (
        9 * np.exp(-(((lat - itcz) / 9) ** 2))
        + 2.5 * np.exp(-(((np.abs(lat) - 45) / 12) ** 2))
        + 0.3
    ) * (1 + 0.3 * np.sin(3 * lon))
    values = mean * _rng(2).gamma(2.0, 0.5, mean.shape)
    values[values < 0.4] = 0.0
    values[PRECIP_WRITTEN_MONTHS:] = np.nan
    return values


def astronaut() -> np.ndarray:
    """A 256 x 256 RGB test picture: colour gradients behind a white helmet with a dark
    visor."""
    y, x = np.mgrid[0:256, 0:256]
    image = np.stack([x, y, 255 - (x + y) // 2], axis=-1).astype(np.float64)
    helmet = (y - 120) ** 2 + (x - 128) ** 2 < 70 ** 2
    visor = ((y - 115) / 28) ** 2 + ((x - 128) / 48) ** 2 < 1
    image[helmet] = (235, 235, 240)
    image[visor] = (30, 40, 70)
    return image.astype(np.uint8)


def stack() -> np.ndarray:
    """A 3-D fluorescence stack, (z, y, x) uint16: blurred cells over camera noise in the
    first six planes; the last two are empty, so their inner chunks are never stored."""
    rng = _rng(3)
    z, y, x = np.mgrid[0:8, 0:256, 0:256].astype(np.float64)
    values = rng.poisson(100, (8, 256, 256)).astype(np.float64)
    for cz, cy, cx, r, bright in zip(
        rng.uniform(0.5, 4.5, 24), rng.uniform(20, 236, 24), rng.uniform(20, 236, 24),
        rng.uniform(6, 16, 24), rng.uniform(800, 3000, 24),
    ):
        values += bright * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * r ** 2) - (z - cz) ** 2 / 2)
    values[6:] = 0
    return np.clip(values, 0, 65535).astype(np.uint16)


def labels() -> np.ndarray:
    """Class names of a segmentation, variable-length UTF-8 (one of them empty)."""
    names = ["background", "cell", "nucleus", "membrane", "mitochondrion",
             "vesicle", "caf\u00e9 au lait spot", "na\u00efve T cell", "", "unknown"]
    return np.array(names, dtype=object)


def elevation() -> np.ndarray:
    """Terrain height in metres, (y, x), big-endian int16: a mountain, rolling hills and
    a stretch of sea below zero."""
    y, x = np.mgrid[0:100, 0:120].astype(np.float64)
    height = (
        1500 * np.exp(-((x - 75) ** 2 + (y - 40) ** 2) / 600)
        + 250 * np.sin(x / 13) * np.cos(y / 9)
        + 6 * x - 250
    )
    return np.round(height + _rng(4).normal(0, 8, height.shape)).astype(">i2")


def readings() -> np.ndarray:
    """Hourly temperatures in degrees Celsius of 60 sensors over a day, (hour, sensor)."""
    rng = _rng(5)
    hours = np.arange(24)[:, None]
    offsets = rng.normal(18, 3, (1, 60))
    return offsets + 6 * np.sin(2 * np.pi * (hours - 9) / 24) + rng.normal(0, 0.3, (24, 60))


def scalar() -> np.ndarray:
    """A 0-d array: the demo's one fundamental constant."""
    return np.array(math.pi)


DEMO_ARRAYS: dict[str, Callable[[], np.ndarray]] = {
    "climate/temp": temperature,
    "climate/precip": precipitation,
    "images/astronaut": astronaut,
    "images/stack": stack,
    "tables/labels": labels,
    "legacy/elevation": elevation,
    "legacy/readings": readings,
    "scalar": scalar,
}


# ------------------------------------------------------------------ documents

@dataclass(frozen=True)
class _DemoArray:
    path: str
    document: dict
    zarr_format: int = 3
    attributes: dict = field(default_factory=dict)  # v2 only: goes to .zattrs
    written: tuple = (Ellipsis,)  # the region written; the rest stays unwritten


def _demo_arrays() -> list[_DemoArray]:
    zstd = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
    return [
        _DemoArray("climate/temp", array_document_v3(
            (12, 73, 144), (6, 37, 72), "float32", "NaN", [_LITTLE, zstd],
            dimension_names=["time", "lat", "lon"],
            attributes={"standard_name": "air_temperature", "long_name": "2 m air temperature",
                        "units": "K", "grid": "2.5 degree regular latitude/longitude"},
        )),
        _DemoArray("climate/precip", array_document_v3(
            (12, 45, 90), (4, 45, 45), "float64", "NaN", [_LITTLE, zstd],
            dimension_names=["time", "lat", "lon"],
            attributes={"standard_name": "precipitation_flux", "units": "mm/day",
                        "comment": f"only the first {PRECIP_WRITTEN_MONTHS} months are stored"},
        ), written=(slice(0, PRECIP_WRITTEN_MONTHS),)),
        _DemoArray("images/astronaut", array_document_v3(
            (256, 256, 3), (128, 128, 3), "uint8", 0,
            [_LITTLE, {"name": "gzip", "configuration": {"level": 5}}],
            dimension_names=["y", "x", "c"], attributes={"description": "RGB test picture"},
        )),
        _DemoArray("images/stack", array_document_v3(
            (8, 256, 256), (4, 128, 128), "uint16", 0,
            [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [1, 64, 64],
                "codecs": [_LITTLE, zstd],
                "index_codecs": [_LITTLE, {"name": "crc32c"}],
                "index_location": "end",
            }}],
            dimension_names=["z", "y", "x"],
            attributes={"description": "fluorescence stack", "voxel_size_um": [2.0, 0.5, 0.5]},
        )),
        _DemoArray("tables/labels", array_document_v3(
            (10,), (4,), "string", "", [{"name": "vlen-utf8"}, zstd],
            dimension_names=["label"],
        )),
        _DemoArray("legacy/elevation", array_document_v2(
            (100, 120), (50, 40), ">i2", -32768, order="F",
            compressor={"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 2, "blocksize": 0},
        ), zarr_format=2, attributes={"units": "m", "nodata": -32768}),
        _DemoArray("legacy/readings", array_document_v2(
            (24, 60), (8, 20), "<f8", None, separator="/",
            compressor={"id": "zlib", "level": 1},
        ), zarr_format=2, attributes={"units": "degC", "_ARRAY_DIMENSIONS": ["hour", "sensor"]}),
        _DemoArray("scalar", array_document_v3((), (), "float64", 0.0, [_LITTLE],
                                             attributes={"description": "pi"})),
    ]


# ------------------------------------------------------------------ writing

def write_demo(directory: str) -> None:
    """Write the demo hierarchy into `directory`, which must be empty or absent."""
    store = open_store(directory)
    if store.list():
        raise FileExistsError(f"{directory} is not empty")
    hierarchy = Hierarchy(store)
    store.set("zarr.json", dump_json(group_document_v3(ROOT_ATTRIBUTES)))
    for name, attributes in GROUP_ATTRIBUTES.items():
        hierarchy.create_group(name, attributes)
    hierarchy.create_group("legacy", LEGACY_ATTRIBUTES, zarr_format=2)
    for demo in _demo_arrays():
        if demo.zarr_format == 2:
            store.set(f"{demo.path}/.zarray", dump_json(demo.document))
            store.set(f"{demo.path}/.zattrs", dump_json(demo.attributes))
            array = hierarchy.open_node(demo.path)
        else:
            array = hierarchy.create_array(demo.path, demo.document)
        values = DEMO_ARRAYS[demo.path]()
        array.write(demo.written, values[demo.written])
