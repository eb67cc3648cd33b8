"""A small, varied demo hierarchy (about 1.3 MB stored), written with zarrfs's own format
layer: Zarr v3 and v2 arrays, compressors, sharding, variable-length strings, unwritten
chunks, a convention and an OME-Zarr image (NGFF 0.5). Every value comes from a seeded
generator, so each run stores the same bytes (gzip chunks aside: their header holds the
time of compression).
DEMO_ARRAYS holds the values a reader should see."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .format import Group, Hierarchy
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
    "images": {"description": "An RGB image, a sharded 3-D stack and an OME-Zarr image"},
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
        300
        - 50 * np.sin(lat) ** 2
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
    mean = (9 * np.exp(-(((lat - itcz) / 9) ** 2)) + 2.5 * np.exp(-(((np.abs(lat) - 45) / 12) ** 2)) + 0.3) * (
        1 + 0.3 * np.sin(3 * lon)
    )
    values = mean * _rng(2).gamma(2.0, 0.5, mean.shape)
    values[values < 0.4] = 0.0
    values[PRECIP_WRITTEN_MONTHS:] = np.nan
    return values


def astronaut() -> np.ndarray:
    """A 256 x 256 RGB test picture: colour gradients behind a white helmet with a dark
    visor."""
    y, x = np.mgrid[0:256, 0:256]
    image = np.stack([x, y, 255 - (x + y) // 2], axis=-1).astype(np.float64)
    helmet = (y - 120) ** 2 + (x - 128) ** 2 < 70**2
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
        rng.uniform(0.5, 4.5, 24),
        rng.uniform(20, 236, 24),
        rng.uniform(20, 236, 24),
        rng.uniform(6, 16, 24),
        rng.uniform(800, 3000, 24),
    ):
        values += bright * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * r**2) - (z - cz) ** 2 / 2)
    values[6:] = 0
    return np.clip(values, 0, 65535).astype(np.uint16)


# the OME-Zarr image images/cells: (c, z, y, x), level 0's pixel size in micrometres, and
# its levels, each half the last in y and x
CELLS_SHAPE = (2, 3, 64, 96)
CELLS_PIXEL_UM = (1.0, 0.5, 0.25, 0.25)
CELLS_LEVELS = 3
CELLS_CHANNELS = (("DAPI", "0000FF"), ("GFP", "00FF00"))


def cells() -> np.ndarray:
    """A two-channel fluorescence image, (c, z, y, x) uint16: nuclei (DAPI) and the
    cytoplasm around them (GFP) over camera noise, in three planes."""
    rng = _rng(6)
    _, planes, height, width = CELLS_SHAPE
    z, y, x = np.mgrid[0:planes, 0:height, 0:width].astype(np.float64)
    nuclei = np.zeros((planes, height, width))
    cytoplasm = np.zeros((planes, height, width))
    for cz, cy, cx, r in zip(
        rng.uniform(0.5, 1.5, 6),
        rng.uniform(10, height - 10, 6),
        rng.uniform(10, width - 10, 6),
        rng.uniform(4, 7, 6),
        strict=True,
    ):
        d2 = ((y - cy) ** 2 + (x - cx) ** 2) / r**2 + (z - cz) ** 2 / 2
        nuclei += 2500 * np.exp(-d2 / 2)
        cytoplasm += 900 * np.exp(-d2 / 8) * (1 - np.exp(-d2))
    noise = rng.poisson(100, (2, planes, height, width))
    return np.clip(np.stack([nuclei, cytoplasm]) + noise, 0, 65535).astype(np.uint16)


def cells_level(level: int) -> np.ndarray:
    """Level `level` of images/cells: level 0 with each 2**level square of pixels averaged."""
    f = 2**level
    c, z, h, w = CELLS_SHAPE
    blocks = cells().reshape(c, z, h // f, f, w // f, f).astype(np.float64)
    return np.round(blocks.mean(axis=(3, 5))).astype(np.uint16)


def labels() -> np.ndarray:
    """Class names of a segmentation, variable-length UTF-8 (one of them empty)."""
    names = [
        "background",
        "cell",
        "nucleus",
        "membrane",
        "mitochondrion",
        "vesicle",
        "caf\u00e9 au lait spot",
        "na\u00efve T cell",
        "",
        "unknown",
    ]
    return np.array(names, dtype=object)


def elevation() -> np.ndarray:
    """Terrain height in metres, (y, x), big-endian int16: a mountain, rolling hills and
    a stretch of sea below zero."""
    y, x = np.mgrid[0:100, 0:120].astype(np.float64)
    height = 1500 * np.exp(-((x - 75) ** 2 + (y - 40) ** 2) / 600) + 250 * np.sin(x / 13) * np.cos(y / 9) + 6 * x - 250
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
    **{f"images/cells/{k}": functools.partial(cells_level, k) for k in range(CELLS_LEVELS)},
    "tables/labels": labels,
    "legacy/elevation": elevation,
    "legacy/readings": readings,
    "scalar": scalar,
}


# ------------------------------------------------------------------ documents


@dataclass(frozen=True)
class _DemoArray:
    path: str
    document: dict[str, Any]
    zarr_format: int = 3
    attributes: dict[str, Any] = field(default_factory=dict)  # v2 only: goes to .zattrs
    written: tuple[Any, ...] = (Ellipsis,)  # the region written; the rest stays unwritten


def _demo_arrays() -> list[_DemoArray]:
    zstd = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
    return [
        _DemoArray(
            "climate/temp",
            array_document_v3(
                (12, 73, 144),
                (6, 37, 72),
                "float32",
                "NaN",
                [_LITTLE, zstd],
                dimension_names=["time", "lat", "lon"],
                attributes={
                    "standard_name": "air_temperature",
                    "long_name": "2 m air temperature",
                    "units": "K",
                    "grid": "2.5 degree regular latitude/longitude",
                },
            ),
        ),
        _DemoArray(
            "climate/precip",
            array_document_v3(
                (12, 45, 90),
                (4, 45, 45),
                "float64",
                "NaN",
                [_LITTLE, zstd],
                dimension_names=["time", "lat", "lon"],
                attributes={
                    "standard_name": "precipitation_flux",
                    "units": "mm/day",
                    "comment": f"only the first {PRECIP_WRITTEN_MONTHS} months are stored",
                },
            ),
            written=(slice(0, PRECIP_WRITTEN_MONTHS),),
        ),
        _DemoArray(
            "images/astronaut",
            array_document_v3(
                (256, 256, 3),
                (128, 128, 3),
                "uint8",
                0,
                [_LITTLE, {"name": "gzip", "configuration": {"level": 5}}],
                dimension_names=["y", "x", "c"],
                attributes={"description": "RGB test picture"},
            ),
        ),
        _DemoArray(
            "images/stack",
            array_document_v3(
                (8, 256, 256),
                (4, 128, 128),
                "uint16",
                0,
                [
                    {
                        "name": "sharding_indexed",
                        "configuration": {
                            "chunk_shape": [1, 64, 64],
                            "codecs": [_LITTLE, zstd],
                            "index_codecs": [_LITTLE, {"name": "crc32c"}],
                            "index_location": "end",
                        },
                    }
                ],
                dimension_names=["z", "y", "x"],
                attributes={"description": "fluorescence stack", "voxel_size_um": [2.0, 0.5, 0.5]},
            ),
        ),
        _DemoArray(
            "tables/labels",
            array_document_v3(
                (10,),
                (4,),
                "string",
                "",
                [{"name": "vlen-utf8"}, zstd],
                dimension_names=["label"],
            ),
        ),
        _DemoArray(
            "legacy/elevation",
            array_document_v2(
                (100, 120),
                (50, 40),
                ">i2",
                -32768,
                order="F",
                compressor={"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 2, "blocksize": 0},
            ),
            zarr_format=2,
            attributes={"units": "m", "nodata": -32768},
        ),
        _DemoArray(
            "legacy/readings",
            array_document_v2(
                (24, 60),
                (8, 20),
                "<f8",
                None,
                separator="/",
                compressor={"id": "zlib", "level": 1},
            ),
            zarr_format=2,
            attributes={"units": "degC", "_ARRAY_DIMENSIONS": ["hour", "sensor"]},
        ),
        _DemoArray("scalar", array_document_v3((), (), "float64", 0.0, [_LITTLE], attributes={"description": "pi"})),
    ]


def cells_attributes() -> dict[str, Any]:
    """NGFF 0.5's metadata of images/cells (under `ome`): one multiscale of the axes
    c, z, y, x in micrometres, each level's scale, and the omero channels."""
    axes = [{"name": "c", "type": "channel"}] + [
        {"name": name, "type": "space", "unit": "micrometer"} for name in "zyx"
    ]
    datasets = [
        {
            "path": str(k),
            "coordinateTransformations": [
                {"type": "scale", "scale": [size * (2**k if i >= 2 else 1) for i, size in enumerate(CELLS_PIXEL_UM)]}
            ],
        }
        for k in range(CELLS_LEVELS)
    ]
    channels = [
        {
            "label": label,
            "color": color,
            "active": True,
            "coefficient": 1.0,
            "family": "linear",
            "inverted": False,
            "window": {"min": 0, "max": 65535, "start": 0, "end": 3000},
        }
        for label, color in CELLS_CHANNELS
    ]
    return {
        "ome": {
            "version": "0.5",
            "multiscales": [{"name": "cells", "axes": axes, "datasets": datasets}],
            "omero": {"channels": channels, "rdefs": {"defaultT": 0, "defaultZ": 1, "model": "color"}},
        }
    }


def _cells_arrays() -> list[_DemoArray]:
    zstd = {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
    c, z, h, w = CELLS_SHAPE
    return [
        _DemoArray(
            f"images/cells/{k}",
            array_document_v3(
                (c, z, h >> k, w >> k),
                (1, 1, 32, 32),
                "uint16",
                0,
                [_LITTLE, zstd],
                dimension_names=["c", "z", "y", "x"],
            ),
        )
        for k in range(CELLS_LEVELS)
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
    hierarchy.create_group("images/cells", cells_attributes())
    for demo in _demo_arrays() + _cells_arrays():
        if demo.zarr_format == 2:
            store.set(f"{demo.path}/.zarray", dump_json(demo.document))
            store.set(f"{demo.path}/.zattrs", dump_json(demo.attributes))
            array = hierarchy.open_node(demo.path)
            assert not isinstance(array, Group)  # its .zarray was just written
        else:
            array = hierarchy.create_array(demo.path, demo.document)
        values = DEMO_ARRAYS[demo.path]()
        array.write(demo.written, values[demo.written])
