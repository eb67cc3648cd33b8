"""A hypothesis-generated hostile metadata corpus (docs/errors.md): documents zarr-python writes,
mutated at random (subtrees replaced by odd JSON, extreme numbers, keys dropped or added),
and raw bytes. Opening such a node gives the node or a FormatError (MetadataError,
UnsupportedError), never another exception: the fs layer shows those nodes as broken
directories, and their parents stay listable."""

from __future__ import annotations

import functools
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import numcodecs
import pytest
import zarr
import zarr.codecs as zc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrfs.format import Array, FormatError, Hierarchy, MetadataError
from zarrfs.store import open_store

EXTREMES = [
    0,
    -1,
    1,
    2**31,
    2**32,
    2**53 + 1,
    2**62,
    2**63,
    2**64,
    -(2**63),
    10**30,
    1e308,
    -1e308,
    0.5,
    "NaN",
    "Infinity",
    "-Infinity",
    "0x",
    "0xZZ",
    "",
    "c",
    ".",
    "/",
    "..",
    "\x00",
    "little",
    "big",
    "C",
    "F",
    "|O",
    "<f8",
    "S0",
    "V0",
    "bytes",
    "zstd",
    "sharding_indexed",
]
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6) | st.sampled_from(EXTREMES)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_counter = itertools.count()
_STORE = open_store("memory://zarrfs-hostile-metadata")


@functools.cache
def documents() -> list[tuple[str, dict]]:
    """(document name, document) of arrays and groups as zarr-python writes them."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        group = zarr.open_group(str(root), mode="w", attributes={"title": "t", "nested": {"a": [1, 2]}})
        group.create_array(
            "plain",
            shape=(6, 4),
            chunks=(3, 2),
            dtype="<f4",
            fill_value=float("nan"),
            compressors=[zc.ZstdCodec(checksum=True)],
            dimension_names=["y", "x"],
        )
        group.create_array("sharded", shape=(8,), chunks=(2,), shards=(4,), dtype="<i2", compressors=[zc.GzipCodec()])
        group.create_array(
            "blosc", shape=(4, 4), chunks=(2, 2), dtype="<u8", compressors=[zc.BloscCodec(), zc.Crc32cCodec()]
        )
        group.create_array("text", shape=(3,), chunks=(3,), dtype=str)
        zarr.consolidate_metadata(str(root))
        zarr.create_array(
            str(root / "v2"),
            shape=(5, 5),
            chunks=(2, 5),
            dtype=">i4",
            zarr_format=2,
            compressors=numcodecs.Zlib(),
            filters=[numcodecs.Delta(">i4")],
        )
        zarr.open_group(str(root / "v2group"), mode="w", zarr_format=2)
        found = [
            (p.name, json.loads(p.read_text()))
            for p in sorted(root.rglob("*"))
            if p.name in ("zarr.json", ".zarray", ".zgroup")
        ]
    return found


def paths(document: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys and indexes) into a document, the root included."""
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += paths(value, (*prefix, key))
    elif isinstance(document, list):
        for i, value in enumerate(document):
            found += paths(value, (*prefix, i))
    return found


@st.composite
def mutated_documents(draw) -> tuple[str, Any]:
    name, document = draw(st.sampled_from(documents()))
    document = json.loads(json.dumps(document))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths(document)))
        if not path:
            document = draw(JSON)
            continue
        parent = functools.reduce(lambda node, key: node[key], path[:-1], document)
        action = draw(st.sampled_from(["replace", "replace", "extreme", "delete", "insert"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "insert" and isinstance(parent, dict):
            parent[draw(st.sampled_from([*sorted(parent), "extra", "must_understand"]))] = draw(JSON)
        elif action == "extreme":
            parent[path[-1]] = draw(st.sampled_from(EXTREMES) | st.lists(st.sampled_from(EXTREMES), max_size=3))
        else:
            parent[path[-1]] = draw(JSON)
    return name, document


def open_document(name: str, raw: bytes) -> None:
    """Open a node whose only document is `raw`; FormatError is the only failure allowed."""
    path = f"n{next(_counter)}"
    _STORE.set(f"{path}/{name}", raw)
    try:
        node = Hierarchy(_STORE).open_node(path)
        if isinstance(node, Array):
            node.describe_codecs()
            assert node.chunk_grid.chunk_count >= 0
    except FormatError:
        pass
    finally:
        _STORE.erase_prefix(path + "/")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_documents())
def test_mutated_documents_open_or_fail_with_a_format_error(case) -> None:
    name, document = case
    open_document(name, json.dumps(document).encode())


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_damaged_bytes_open_or_fail_with_a_format_error(data) -> None:
    name, document = data.draw(st.sampled_from(documents()))
    raw = bytearray(json.dumps(document).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        edit = data.draw(st.sampled_from(["flip", "cut", "repeat"]))
        if edit == "flip":
            raw[at] = data.draw(st.integers(0, 255))
        elif edit == "cut":
            del raw[at:]
            if not raw:
                raw = bytearray(b"{")
        else:
            raw[at:at] = raw[at : at + 64] * data.draw(st.integers(1, 50))
    open_document(name, bytes(raw))


@pytest.mark.parametrize("raw", [b"", b"null", b"[]", b"1e999", b'"x"', b"{" * 100_000, b"\xff" * 10])
def test_degenerate_documents_fail_with_a_format_error(raw: bytes) -> None:
    for name in ("zarr.json", ".zarray", ".zgroup"):
        open_document(name, raw)


def test_sharding_index_codecs_that_store_no_empty_index_fail_with_a_metadata_error() -> None:
    # a sharding codec in index_codecs stores nothing for an index of empty entries, so
    # the index has no size to find it by (this was a TypeError, wrapped as "invalid metadata")
    document = next(doc for name, doc in documents() if name == "zarr.json" and doc.get("shape") == [8])
    document = json.loads(json.dumps(document))
    sharding = document["codecs"][0]
    sharding["configuration"]["index_codecs"] = [
        {"name": "sharding_indexed", "configuration": {"chunk_shape": [1, 2], "codecs": [{"name": "bytes"}]}}
    ]
    _STORE.set("index-sharded/zarr.json", json.dumps(document).encode())
    try:
        with pytest.raises(MetadataError, match="index_codecs"):
            Hierarchy(_STORE).open_node("index-sharded")
    finally:
        _STORE.erase_prefix("index-sharded/")
