"""Hierarchies in the pre-final Zarr v3 draft layouts, written key by key from the drafts'
own examples (shapes shrunk), with chunks encoded by numpy and numcodecs: what zarrfs
reads must equal the `expected` arrays built here, never its own output."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numcodecs
import numpy as np

from tests.conftest import CORPORA

CORPUS_2019 = CORPORA / "zarr-implementations" / "zarrita.zr3"
CORPUS_V2 = CORPORA / "zarr-implementations" / "zarr.zr"
# the draft copy's arrays and the v2 copy of each; blosc-lz4 is `blosc` in the v2 copy
CORPUS_ARRAYS = {"raw": "raw", "gzip": "gzip", "zlib": "zlib", "blosc/lz4": "blosc"}
# each draft array's compressor, as numcodecs knows it (None: stored raw)
CORPUS_CODECS = {
    "raw": None,
    "gzip": numcodecs.GZip(level=1),
    "zlib": numcodecs.Zlib(level=1),
    "blosc/lz4": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1),
}

FORMAT_2022 = "https://purl.org/zarr/spec/core/3.0"
FORMAT_2019 = "https://purl.org/zarr/spec/protocol/core/3.0"
GZIP_2022 = {"type": "https://purl.org/zarr/spec/codecs/gzip/1.0", "configuration": {"level": 1}}

# the 2022 draft's examples: its entry point with an ignorable extension, its group,
# its float64 gzip array (10000 x 1000 in chunks of 1000 x 100, shrunk) and the same
# with a datetime extension data type that falls back to <i8
ENTRY_POINT_2022 = {
    "zarr_format": FORMAT_2022,
    "metadata_encoding": {"type": "json", "metadata_key_suffix": ".json"},
    "extensions": [
        {
            "extension": "http://example.org/zarr/extension/foo",
            "must_understand": False,
            "configuration": {"foo": "bar"},
        }
    ],
}
GROUP_2022 = {"attributes": {"spam": "ham", "eggs": 42}}
FLOAT_ARRAY_2022 = {
    "shape": [20, 10],
    "data_type": "<f8",
    "chunk_grid": {"type": "regular", "chunk_shape": [8, 4], "separator": "/"},
    "chunk_memory_layout": "C",
    "codecs": [GZIP_2022],
    "fill_value": "NaN",
    "extensions": [],
    "attributes": {"foo": 42, "bar": "apples", "baz": [1, 2, 3, 4]},
}
DATETIME_ARRAY_2022 = {
    **FLOAT_ARRAY_2022,
    "data_type": {
        "extension": "https://purl.org/zarr/spec/extensions/data-types/datetime/1.0",
        "type": "<M8[ns]",
        "fallback": "<i8",
    },
    "fill_value": None,
    "attributes": {},
}
# column-major chunks stored big-endian through the endian codec, then blosc
FORTRAN_ARRAY_2022 = {
    "shape": [5, 7],
    "data_type": "int16",
    "chunk_grid": {"type": "regular", "chunk_shape": [2, 3], "separator": "/"},
    "chunk_memory_layout": "F",
    "codecs": [
        {"type": "https://purl.org/zarr/spec/codecs/endian/1.0", "configuration": {"endian": "big"}},
        {
            "type": "https://purl.org/zarr/spec/codecs/blosc/1.0",
            "configuration": {"cname": "zstd", "clevel": 3, "shuffle": 1, "blocksize": 0},
        },
    ],
    "fill_value": -1,
    "extensions": [],
    "attributes": {},
}
SPECIAL_FILL_2022 = {
    "shape": [3],
    "data_type": "float32",
    "chunk_grid": {"type": "regular", "chunk_shape": [2], "separator": "/"},
    "chunk_memory_layout": "C",
    "fill_value": "+Infinity",
    "extensions": [],
    "attributes": {},
}
# what zarrfs must refuse to open, each beside nodes it opens
REFUSED_2022 = {
    "must_understand": {
        **FLOAT_ARRAY_2022,
        "extensions": [{"extension": "https://example.org/zarr/extension/mystery", "must_understand": True}],
    },
    "transformer": {
        **FLOAT_ARRAY_2022,
        "storage_transformers": [
            {
                "extension": "https://purl.org/zarr/spec/storage_transformers/sharding/1.0",
                "type": "indexed",
                "configuration": {"chunks_per_shard": [2, 2]},
            }
        ],
    },
    "unknown_field": {**FLOAT_ARRAY_2022, "chunk_key_encoding": "v2"},
    "unknown_codec": {
        **FLOAT_ARRAY_2022,
        "codecs": [{"type": "https://purl.org/zarr/spec/codecs/mystery/1.0", "configuration": {}}],
    },
}


def write_json(path: Path, document: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=4))


def write_chunks(
    data_dir: Path,
    values: np.ndarray,
    chunk_shape: tuple[int, ...],
    encode,
    *,
    separator: str = "/",
    skip: set = frozenset(),
    order: str = "C",
    fill=0,
) -> np.ndarray:
    """Store `values` chunk by chunk as `c<i><sep><j>` under `data_dir`: each chunk padded
    to full size with `fill`, laid out in `order`, then `encode(bytes)`. Chunks in `skip`
    are not stored. Returns what the array then holds (fill value where skipped)."""
    expected = values.copy()
    grid = [math.ceil(s / c) for s, c in zip(values.shape, chunk_shape)]
    for coords in itertools.product(*(range(n) for n in grid)):
        region = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(coords, chunk_shape, values.shape))
        if coords in skip:
            expected[region] = fill
            continue
        chunk = np.full(chunk_shape, fill, dtype=values.dtype)
        chunk[tuple(slice(0, r.stop - r.start) for r in region)] = values[region]
        key = data_dir / ("c" + separator.join(map(str, coords)))
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_bytes(encode(chunk.tobytes(order=order)))
    return expected


def write_draft_2022(root: Path) -> dict[str, np.ndarray]:
    """The 2022 hierarchy: /foo/bar (explicit group), /foo/baz (implicit) holding the
    float64 array qux, /datetimes, /fortran, /specials, and /refused/* that cannot be
    opened. Returns the expected values of each readable array by path."""
    write_json(root / "zarr.json", ENTRY_POINT_2022)
    write_json(root / "meta/foo/bar.group.json", GROUP_2022)
    gzip = numcodecs.GZip(level=1).encode
    rng = np.random.default_rng(2022)
    expected = {}

    write_json(root / "meta/foo/baz/qux.array.json", FLOAT_ARRAY_2022)
    floats = rng.normal(size=(20, 10))
    expected["foo/baz/qux"] = write_chunks(
        root / "data/foo/baz/qux", floats, (8, 4), gzip, skip={(1, 1), (2, 2)}, fill=np.nan
    )

    write_json(root / "meta/datetimes.array.json", DATETIME_ARRAY_2022)
    stamps = np.arange(200, dtype="<i8").reshape(20, 10) * 86_400_000_000_000 + 1_650_000_000_000_000_000
    expected["datetimes"] = write_chunks(root / "data/datetimes", stamps, (8, 4), gzip, skip={(0, 2)})

    write_json(root / "meta/fortran.array.json", FORTRAN_ARRAY_2022)
    blosc = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=1).encode
    ints = (np.arange(35).reshape(5, 7) - 17).astype(">i2")
    expected["fortran"] = write_chunks(
        root / "data/fortran", ints, (2, 3), blosc, order="F", skip={(2, 0)}, fill=-1
    ).astype("<i2")

    write_json(root / "meta/specials.array.json", SPECIAL_FILL_2022)
    expected["specials"] = np.full(3, np.inf, dtype="<f4")

    for name, document in REFUSED_2022.items():
        write_json(root / f"meta/refused/{name}.array.json", document)
        write_chunks(root / f"data/refused/{name}", floats, (8, 4), gzip)
    return expected


def write_draft_2019_root_array(root: Path) -> np.ndarray:
    """A 2019–2021 hierarchy whose root is an array: `meta/root.array.json`, big-endian
    float32 in column-major chunks, zstd, no separator given (the draft's default `.`),
    fill value "NaN"; chunks under `data/root/`. Returns the expected values."""
    write_json(
        root / "zarr.json",
        {
            "zarr_format": FORMAT_2019,
            "metadata_encoding": "application/json",
            "metadata_key_suffix": ".json",
            "extensions": [],
        },
    )
    write_json(
        root / "meta/root.array.json",
        {
            "shape": [7, 5],
            "data_type": ">f4",
            "chunk_grid": {"type": "regular", "chunk_shape": [3, 2]},
            "chunk_memory_layout": "F",
            "compressor": {"codec": "https://purl.org/zarr/spec/codec/zstd/1.0", "configuration": {"level": 5}},
            "fill_value": "NaN",
            "extensions": [],
            "attributes": {"origin": "synthetic"},
        },
    )
    values = (np.arange(35, dtype=">f4").reshape(7, 5) / 4).astype(">f4")
    zstd = numcodecs.Zstd(level=5).encode
    return write_chunks(
        root / "data/root", values, (3, 2), zstd, separator=".", order="F", skip={(1, 1)}, fill=np.nan
    ).astype("<f4")
