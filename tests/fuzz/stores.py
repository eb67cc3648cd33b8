"""Generated hostile stores for the fuzzer: a few valid hierarchies written once by
zarr-python (v2 and v3, several codecs, sharding with the index at either end,
consolidated metadata, a kerchunk references file over one of them), copied for each
case and spoiled by drawn mutations of their documents, chunk bytes, shard indexes,
consolidated metadata, names and references. Each case knows which arrays no mutation
touched and what zarr-python read of them, so that the walk can check they still read
right."""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import json
import os
import shutil
import stat
import tempfile
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import zarr
import zarr.codecs as zc

DOCUMENT_NAMES = {"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"}


@dataclass(frozen=True)
class Template:
    """A hierarchy zarr-python wrote: its directory, the bytes `data` must show of each
    numeric array (little-endian, C order), and its sharded arrays (index at the start?)."""

    path: Path
    arrays: dict[str, bytes]
    sharded: dict[str, bool]


def _v3(root: Path) -> dict[str, bool]:
    group = zarr.open_group(str(root), mode="w", attributes={"title": "fuzz", "nested": {"a": [1, 2]}})
    a = group.create_array(
        "a", shape=(10, 12), chunks=(4, 5), dtype="<f4", fill_value=0.0, dimension_names=["y", "x"],
        compressors=[zc.ZstdCodec(checksum=True)],
    )  # fmt: skip
    a[:] = np.arange(120, dtype="<f4").reshape(10, 12)
    b = group.create_array("g/b", shape=(9, 10), chunks=(2, 3), shards=(4, 6), dtype="<i2", fill_value=-1,
                           compressors=[zc.GzipCodec()])  # fmt: skip
    b[:5] = np.arange(50, dtype="<i2").reshape(5, 10)
    c = group.create_array("g/c", shape=(7,), chunks=(3,), dtype="u1", compressors=[zc.BloscCodec(), zc.Crc32cCodec()])
    c[:] = np.arange(7, dtype="u1")
    t = group.create_array("t", shape=(5, 3), chunks=(2, 2), dtype="<u2", serializer=zc.BytesCodec(endian="big"),
                           filters=[zc.TransposeCodec(order=(1, 0))], compressors=None)  # fmt: skip
    t[:] = np.arange(15, dtype="<u2").reshape(5, 3) * 1000
    group.create_array("z", shape=(), dtype="<i4", fill_value=7)[...] = 42
    group.create_array("s", shape=(3,), chunks=(2,), dtype=str)[:] = ["x", "yy", ""]
    zarr.consolidate_metadata(str(root))
    return {"g/b": False}


def _v3_start(root: Path) -> dict[str, bool]:
    group = zarr.open_group(str(root), mode="w")
    cube = group.create_array(
        "cube", shape=(4, 6, 5), chunks=(2, 3, 5), dtype="<f8", fill_value=float("nan"),
        serializer=zc.ShardingCodec(chunk_shape=(2, 3, 5), codecs=[zc.BytesCodec(), zc.ZstdCodec()],
                                    index_location="start"),
    )  # fmt: skip
    cube[:3] = np.arange(90, dtype="<f8").reshape(3, 6, 5) / 7
    plain = group.create_array("plain", shape=(6,), chunks=(4,), dtype="<i8", compressors=None)
    plain[:] = np.arange(6) - 3
    return {"cube": True}


def _v2(root: Path) -> dict[str, bool]:
    group = zarr.open_group(str(root), mode="w", zarr_format=2, attributes={"units": "K"})
    be = group.create_array("be", shape=(7, 6), chunks=(3, 4), dtype=">i4", order="F", fill_value=0,
                            compressors=numcodecs.Zlib())  # fmt: skip
    be[:] = np.arange(42).reshape(7, 6)
    f = group.create_array("f", shape=(5, 5), chunks=(2, 5), dtype="<f8", fill_value=None,
                           compressors=numcodecs.Blosc(cname="lz4"), filters=[numcodecs.Delta("<f8")])  # fmt: skip
    f[:] = np.arange(25, dtype="<f8").reshape(5, 5) / 4
    x = group.create_array("nested/x", shape=(10,), chunks=(4,), dtype="u1", fill_value=255,
                           chunk_key_encoding={"name": "v2", "separator": "/"}, compressors=numcodecs.BZ2())  # fmt: skip
    x[:6] = np.arange(6, dtype="u1")
    zarr.consolidate_metadata(str(root))
    return {}


def _views(root: Path) -> dict[str, bool]:
    """Arrays the views read most from: a dataset of shared dimensions with CF attributes
    (dataset.nc, GeoTIFF georeferencing), an image stack (data.tif, preview.png), and data
    types beyond the plain numbers."""
    group = zarr.open_group(str(root), mode="w", attributes={"Conventions": "CF-1.8", "title": "views"})
    lat = group.create_array("lat", shape=(6,), chunks=(6,), dtype="<f8", dimension_names=["lat"],
                             attributes={"units": "degrees_north", "standard_name": "latitude"})  # fmt: skip
    lat[:] = np.linspace(50, 45, 6)
    lon = group.create_array("lon", shape=(8,), chunks=(8,), dtype="<f8", dimension_names=["lon"],
                             attributes={"units": "degrees_east", "standard_name": "longitude"})  # fmt: skip
    lon[:] = np.linspace(5, 12, 8)
    temp = group.create_array("temp", shape=(6, 8), chunks=(3, 4), dtype="<f4", fill_value=float("nan"),
                              dimension_names=["lat", "lon"], attributes={"units": "K", "_FillValue": "NaN",
                              "grid_mapping": "crs"})  # fmt: skip
    temp[:] = np.arange(48, dtype="<f4").reshape(6, 8) + 270
    group.create_array("crs", shape=(), dtype="<i4", attributes={"grid_mapping_name": "latitude_longitude"})
    img = group.create_array("img", shape=(3, 8, 8), chunks=(1, 8, 8), dtype="<u2", compressors=[zc.ZstdCodec()])
    img[:] = np.arange(192, dtype="<u2").reshape(3, 8, 8) * 300
    group.create_array("when", shape=(4,), chunks=(2,), dtype="datetime64[s]")[:] = np.arange(4).astype("datetime64[s]")
    group.create_array("flags", shape=(5,), chunks=(5,), dtype=bool)[:] = [True, False, True, True, False]
    group.create_array("cplx", shape=(2, 2), chunks=(1, 2), dtype="<c8")[:] = np.array([[1 + 2j, 3], [4j, -1]])
    group.create_array("half", shape=(7,), chunks=(4,), dtype="<f2")[:] = np.arange(7) / 3
    return {}


TEMPLATE_WRITERS = {"v3": _v3, "v3-index-start": _v3_start, "v2": _v2, "views": _views}
KINDS = [*TEMPLATE_WRITERS, "references"]


@functools.cache
def templates() -> dict[str, Template]:
    base = Path(tempfile.mkdtemp(prefix="zarrfs-fuzz-templates-"))
    atexit.register(shutil.rmtree, base, True)
    found = {}
    for name, write in TEMPLATE_WRITERS.items():
        root = base / name
        sharded = write(root)
        arrays = {}
        for key in sorted(
            p.parent.relative_to(root).as_posix() for p in root.rglob("*") if p.name in (".zarray", "zarr.json")
        ):
            node = zarr.open(str(root / key), mode="r")
            if isinstance(node, zarr.Array) and node.dtype.kind in "biufc":
                value = np.asarray(node[...])
                arrays[key] = np.ascontiguousarray(value.astype(value.dtype.newbyteorder("<"))).tobytes()
        found[name] = Template(root, arrays, sharded)
    return found


@functools.cache
def bombs() -> dict[str, bytes]:
    """256 MiB of zeros, compressed as each codec stores them."""
    size = 256 << 20
    zeros = np.zeros(size, "u1")
    gzip = zlib.compressobj(9, zlib.DEFLATED, 31)
    return {
        "zstd": bytes(numcodecs.Zstd(level=1).encode(zeros)),
        "gzip": gzip.compress(bytes(size)) + gzip.flush(),
        "zlib": bytes(numcodecs.Zlib(level=9).encode(zeros)),
        "blosc": bytes(numcodecs.Blosc(cname="zstd").encode(zeros)),
        "lz4": bytes(numcodecs.LZ4().encode(zeros)),
    }


# ---------------------------------------------------------------- what a case is
@dataclass
class Case:
    """One generated store: `source` is what is mounted; `store` the directory of keys."""

    kind: str
    store: Path
    source: Path
    arrays: dict[str, bytes]
    sharded: dict[str, bool]
    spoiled: set[str] = field(default_factory=set)
    # whether zarr-python may read the spoiled arrays too (no link, FIFO or bomb to stall
    # or flood it; not references), and the arrays whose consolidated entry was changed
    # (zarr-python opening the node reads its own document instead)
    zarr_may_read: bool = True
    unlike_zarr: set[str] = field(default_factory=set)
    done: list[str] = field(default_factory=list)  # the mutations, for the report

    def stored_keys(self) -> list[str]:
        """The store's plain files (links not followed: a mutation never writes through one)."""
        found, root = [], str(self.store)
        for base, _, files in os.walk(root):  # (strings, one lstat each: called for every mutation)
            for name in files:
                path = os.path.join(base, name)
                if stat.S_ISREG(os.lstat(path).st_mode):
                    found.append(os.path.relpath(path, root))
        return sorted(found)

    def spoil(self, key: str) -> None:
        """The arrays a change of `key` may change: the one it lies in, or (a group's
        document) every array below that group."""
        node = key.rsplit("/", 1)[0] if "/" in key else ""
        document = key.rsplit("/", 1)[-1] in DOCUMENT_NAMES
        for array in self.arrays:
            if key.startswith(array + "/") or (document and (not node or array.startswith(node + "/"))):
                self.spoiled.add(array)

    def expected(self) -> dict[str, bytes]:
        return {path: value for path, value in self.arrays.items() if path not in self.spoiled}


# The harness's own file work, on a thread of its own so that it overlaps the walks (a
# copy of a template made ahead for the next case of its kind, the last case's directory
# removed): on a loaded disk these cost as much as a walk (docs/reliability.md)
_janitor = ThreadPoolExecutor(1, thread_name_prefix="fuzz-janitor")
_spares: dict[tuple[Path, str], Future[Path]] = {}
_spare_numbers = itertools.count()


def make_case(kind: str, directory: Path) -> Case:
    source_kind = "v2" if kind == "references" else kind
    template = templates()[source_kind]
    store = directory / "store"
    spare = _spares.pop((directory.parent, source_kind), None)
    try:
        made = spare.result() if spare is not None else None
    except OSError:
        made = None
    if made is not None:
        made.rename(store)
    else:
        shutil.copytree(template.path, store)
    # the next case of this kind in this directory's parent takes a copy made meanwhile
    ahead = directory.parent / f".spare-{source_kind}-{next(_spare_numbers)}"
    _spares[(directory.parent, source_kind)] = _janitor.submit(_copied, template.path, ahead)
    return Case(kind, store, store, dict(template.arrays), dict(template.sharded))


def _copied(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def discard(directory: Path) -> None:
    """Remove a case's directory, in the background."""
    _janitor.submit(shutil.rmtree, directory, True)


def discarded() -> None:
    """Wait for the directories given to `discard` to be gone, and drop the spare copies."""
    for spare in list(_spares.values()):
        with contextlib.suppress(OSError):
            _janitor.submit(shutil.rmtree, spare.result(), True)
    _spares.clear()
    _janitor.submit(lambda: None).result()


def write_references(case: Case, directory: Path, mutations: list[tuple[int, Any]]) -> None:
    """The store as a kerchunk references file (documents inline, chunks by path, some by
    range), then its references pointed anywhere."""
    refs: dict[str, Any] = {}
    for i, key in enumerate(case.stored_keys()):
        path = case.store / key
        if key.rsplit("/", 1)[-1] in DOCUMENT_NAMES:
            refs[key] = path.read_text(errors="replace")
        elif i % 2:
            refs[key] = [str(path), 0, path.stat().st_size]
        else:
            refs[key] = [str(path)]
    keys = sorted(refs)
    for pick, target in mutations:
        key = keys[pick % len(keys)] if pick >= 0 else target[0]
        value = target if pick >= 0 else target[1]
        if isinstance(value, list) and value and value[0] == "SELF":
            value = [str(case.store / keys[pick % len(keys)]), *value[1:]]
        refs[key] = value
        case.spoil(key)
        if isinstance(value, list) and value and isinstance(value[0], str) and "://" in value[0]:
            # fsspec reads references that name no protocol with the first one it finds
            case.spoiled.update(case.arrays)
        case.done.append(f"reference {key!r} -> {value!r}"[:200])
    case.source = directory / "refs.json"
    case.source.write_text(json.dumps({"version": 1, "refs": refs}))


ZARR_READ_LIMIT = 16 << 20  # bytes of a spoiled array zarr-python is asked to read


def zarr_reads(case: Case) -> dict[str, bytes]:
    """What zarr-python reads of each spoiled array it can read at all (the bytes `data`
    must show): where zarrfs reads one too, it must read the same."""
    if not case.zarr_may_read or case.kind == "references":
        return {}
    found = {}
    for path in sorted(case.spoiled - case.unlike_zarr):
        try:
            array = zarr.open_array(str(case.store / path), mode="r")
            if array.dtype.kind not in "biufc" or array.nbytes > ZARR_READ_LIMIT:
                continue
            value = np.asarray(array[...])
        except Exception:  # (zarr-python cannot read it either)
            continue
        found[path] = np.ascontiguousarray(value.astype(value.dtype.newbyteorder("<"))).tobytes()
    return found
