"""What a `find` costs the decoded core per array (issues 46, 47), without a kernel: a
listing tells the size of every file, `info`'s and `data.tif`'s among them, and works
them out without per-pixel-row Python work (the preview line of `info` plans its chunks
in numpy) and with one layout per `data.tif`; the sizes stay what a read returns."""

from __future__ import annotations

import io
import json
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tifffile

from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.format.codecs import CodecPipeline, pipeline
from zarrfs.format.consolidated_reads import RenderedDocuments
from zarrfs.fs.decoded import DecodedCore
from zarrfs.store import open_store
from zarrfs.views import preview
from zarrfs.views.legacy import tiff

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

SHAPES = {  # (shape, chunks, dtype): strips, pages, RGB, a strided preview, v2
    "plain": ((100, 100), (50, 50), "float32"),
    "wide": ((300, 2000), (10, 100), "int16"),  # 600 chunks: the preview takes 1 in n
    "pages": ((3, 60, 40), (1, 30, 40), "uint8"),
    "rgb": ((64, 48, 3), (32, 48, 3), "uint8"),
    "tall": ((5000, 7), (64, 7), "float64"),
}


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "s"
    top = zarr.open_group(str(root), mode="w")
    for g in range(2):
        group = top.create_group(f"g{g}")
        for name, (shape, chunks, dtype) in SHAPES.items():
            array = group.create_array(name, shape=shape, chunks=chunks, dtype=dtype)
            array[...] = (np.arange(np.prod(shape)) % 97).reshape(shape).astype(dtype)
    old = zarr.open_group(str(root / "old"), mode="w", zarr_format=2)
    old.create_array("x", shape=(40, 30), chunks=(7, 30), dtype=">u2")[...] = 3
    zarr.consolidate_metadata(str(root))
    return root


@pytest.fixture
def core(store):
    with ThreadPoolExecutor(2) as pool:
        hierarchy = open_hierarchy(open_store(str(store)), IOContext(executor=pool, cache=ChunkCache(1 << 24)))
        core = DecodedCore(hierarchy, metadata_ttl=60)
        yield core
        core.close()


def _find(core: DecodedCore, path: str = "") -> dict[str, int]:
    """As `find` over readdirplus: every directory listed, every entry looked up; the
    sizes of the files as listed."""
    sizes = {}
    for name, attributes in core.list_dir(path):
        child = f"{path}/{name}" if path else name
        assert core.lookup(child).size == attributes.size or attributes.is_dir, child
        if attributes.is_dir:
            sizes.update(_find(core, child))
        else:
            sizes[child] = attributes.size
    return sizes


def _read_all(core: DecodedCore, path: str) -> bytes:
    file = core.open(path, os.O_RDONLY)
    parts, offset = [], 0
    while part := file.read(offset, 1 << 20):
        parts.append(bytes(part))
        offset += len(part)
    file.release()
    return b"".join(parts)


def test_a_listing_plans_previews_and_lays_out_tiffs_cheaply(core, monkeypatch):
    per_position = []
    layouts = []
    each = preview._strided_each
    monkeypatch.setattr(preview, "_strided_each", lambda *a: per_position.append(a[1]) or each(*a))
    set_layout = tiff.TiffLayout._set_layout
    monkeypatch.setattr(tiff.TiffLayout, "_set_layout", lambda self, big: layouts.append(big) or set_layout(self, big))
    sizes = _find(core)
    infos = [p for p in sizes if p.endswith("/info") and "/chunks/" not in p]
    tifs = [p for p in sizes if p.endswith("/data.tif")]
    assert len(infos) == 2 * len(SHAPES) + 1 and len(tifs) == 2 * len(SHAPES) + 1
    assert per_position == []  # (before: every preview's rows and columns, position by position)
    assert layouts == [False] * len(tifs)  # (before: two per file)


def test_listed_sizes_of_info_and_data_tif_are_what_reads_return(core, store):
    """zarr-python's values are what each `data.tif` holds (tifffile reads it)."""
    sizes = _find(core)
    checked = [p for p in sizes if p.rpartition("/")[2] in ("info", "data.tif", "preview.png") and "/chunks/" not in p]
    assert len(checked) == 3 * (2 * len(SHAPES) + 1)
    for path in checked:
        content = _read_all(core, path)
        assert len(content) == sizes[path], path
        if path.endswith("/data.tif"):
            expected = zarr.open_array(str(store / path.rpartition("/")[0]), mode="r")[...]
            assert np.array_equal(tifffile.imread(io.BytesIO(content)), expected), path


@pytest.mark.parametrize("limit", [128 << 20, 64 << 10])  # (the second: node states dropped as it goes)
def test_a_find_of_groups_over_consolidated_metadata_renders_no_document(tmp_path, monkeypatch, limit):
    """`find -maxdepth 2` of a hierarchy that its root's consolidated metadata alone
    describes (bench/consolidated.py's) opens every array below the groups listed: none of
    their documents is rendered to JSON for it (their memory is counted without); the
    groups' are, as each lists its zarr.json. Nor is a codec chain made per array: the
    arrays alike share one."""
    template = zarr.open_group(str(tmp_path / "template"), mode="w")
    template.create_array("a", shape=(100, 100), chunks=(50, 50), dtype="float32", attributes={"units": "m"})
    array = json.loads((tmp_path / "template" / "a" / "zarr.json").read_text())
    metadata = {f"g{g}": {"zarr_format": 3, "node_type": "group", "attributes": {}} for g in range(4)}
    metadata.update({f"g{g}/a{a}": array for g in range(4) for a in range(5)})
    root = tmp_path / "many.zarr"
    root.mkdir()
    consolidated = {"kind": "inline", "must_understand": False, "metadata": metadata}
    (root / "zarr.json").write_text(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}, "consolidated_metadata": consolidated})
    )
    rendered = []
    render = RenderedDocuments.__getitem__

    def counted(self, name):
        if name in self._parsed and name not in self._rendered:
            rendered.append(self._parsed[name]["node_type"])
        return render(self, name)

    monkeypatch.setattr(RenderedDocuments, "__getitem__", counted)
    chains = []  # the codec chains made: the 20 arrays' codecs are one chain
    make = CodecPipeline.__init__

    def made(self, codecs, spec):
        chains.append(spec)
        make(self, codecs, spec)

    monkeypatch.setattr(pipeline, "_made", {})  # (none kept from other tests)
    monkeypatch.setattr(CodecPipeline, "__init__", made)
    with ThreadPoolExecutor(2) as pool:
        hierarchy = open_hierarchy(open_store(str(root), read_only=True), IOContext(executor=pool))
        hierarchy.remote = True  # (what an s3:// store sets: its consolidated metadata is used)
        core = DecodedCore(hierarchy, metadata_ttl=60, metadata_limit=limit)
        found = []
        for group, attributes in core.list_dir(""):
            if not attributes.is_dir:  # (the root's zarr.json, as stored)
                continue
            assert core.lookup(group).is_dir
            for name, attributes in core.list_dir(group):
                if attributes.is_dir:  # (and the group's zarr.json, its size that of its rendering)
                    found.append(f"{group}/{name}")
                    assert core.lookup(f"{group}/{name}").is_dir
        assert sorted(found) == sorted(f"g{g}/a{a}" for g in range(4) for a in range(5))
        assert (core.tree.shed > 0) == (limit < 1 << 20)
        assert (
            rendered.count("array") == 0 and rendered.count("group") >= 4
        )  # the groups' zarr.json listed (before: each array's too, to count its bytes)
        written = (tmp_path / "template" / "a" / "zarr.json").read_bytes()  # (as zarr-python wrote it)
        assert core.lookup("g1/a2/zarr.json").size == len(written)
        assert len(chains) == 1, chains  # (before: one per array opened, 20 or more)
        core.close()
