"""Arrays of the same codecs, chunk shape, type and fill value share one codec chain
(opening thousands of them from consolidated metadata makes one); arrays that differ in
any of these each read with their own."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from zarrfs.format import MetadataError, open_hierarchy
from zarrfs.format.codecs import pipeline
from zarrfs.store import open_store

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


@pytest.fixture
def hierarchy(tmp_path):
    root = zarr.open_group(str(tmp_path / "h.zarr"), mode="w")
    zstd = zarr.codecs.ZstdCodec(level=3)
    specs = {  # name: (dtype, chunks, fill value, shards)
        "a": ("int16", (4, 4), 0, None),
        "b": ("int16", (4, 4), 0, None),  # as a: one chain
        "fill": ("int16", (4, 4), 7, None),  # absent chunks read 7
        "chunks": ("int16", (2, 4), 0, None),
        "wide": ("int32", (4, 4), 0, None),
        "big": ("int16", (4, 4), 0, None),  # stored big-endian: another codec document
        "sharded": ("int16", (2, 2), 0, (4, 4)),
        "sharded2": ("int16", (1, 4), 0, (4, 4)),
    }
    for name, (dtype, chunks, fill, shards) in specs.items():
        endian = "big" if name == "big" else "little"
        array = root.create_array(
            name,
            shape=(8, 8),
            chunks=chunks,
            shards=shards,
            dtype=dtype,
            fill_value=fill,
            serializer=zarr.codecs.BytesCodec(endian=endian),
            compressors=zstd,
        )
        array[:4, :4] = np.arange(16, dtype=dtype).reshape(4, 4) + len(name)  # (the rest absent)
    old = zarr.open_group(str(tmp_path / "h.zarr" / "old"), mode="w", zarr_format=2)
    for name, fill in (("x", 0), ("y", 0), ("z", 9)):
        old.create_array(name, shape=(8, 8), chunks=(4, 4), dtype="<u2", fill_value=fill)[:4, :4] = 3
    return open_hierarchy(open_store(str(tmp_path / "h.zarr"), read_only=True)), specs


def test_arrays_alike_share_a_chain_and_each_reads_its_own(hierarchy):
    h, specs = hierarchy
    arrays = {name: h.open_node(name) for name in specs}
    assert arrays["a"].pipeline is arrays["b"].pipeline
    others = [arrays[n].pipeline for n in ("a", "fill", "chunks", "wide", "big", "sharded", "sharded2")]
    assert len({id(p) for p in others}) == len(others)
    assert arrays["sharded"].sharding is not arrays["sharded2"].sharding
    for name, (dtype, _chunks, fill, _shards) in specs.items():
        expected = np.full((8, 8), fill, dtype=dtype)
        expected[:4, :4] = np.arange(16, dtype=dtype).reshape(4, 4) + len(name)
        np.testing.assert_array_equal(arrays[name].read(), expected, err_msg=name)
    x, y, z = (h.open_node(f"old/{n}") for n in "xyz")
    assert x.pipeline is y.pipeline and z.pipeline is not x.pipeline
    assert z.read()[7, 7] == 9 and x.read()[7, 7] == 0 and y.read()[0, 0] == 3


def test_a_broken_chain_is_refused_at_every_open(hierarchy, monkeypatch):
    """Nothing is kept of a chain that could not be made: each array of it fails to open."""
    h, _ = hierarchy
    made = []
    monkeypatch.setattr(pipeline, "_made", {})

    def refused(self, codecs, spec):
        made.append(spec)
        raise ValueError("refused")

    monkeypatch.setattr(pipeline.CodecPipeline, "__init__", refused)
    for name in ("a", "b"):
        with pytest.raises(MetadataError, match="refused"):
            h.open_node(name)
    assert len(made) == 2
