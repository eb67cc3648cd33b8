"""Rectilinear chunk grids (zarr-extensions `rectilinear`, written by zarr-python 3.4):
the committed corpus, and on zarr-python >= 3.4 one written afresh, read through the
format layer as zarr-python read it; writes read back by zarr-python and by us."""

from __future__ import annotations

import copy
import shutil

import numpy as np
import pytest
from rectilinear_fixtures import (
    CORPUS,
    array_names,
    chunk_sizes,
    document,
    expected_chunks,
    expected_values,
    needs_zarr34,
    zarr_writes_rectilinear,
)

from zarrfs.format import MetadataError, UnsupportedError
from zarrfs.format.metadata import parse_v3

NAMES = array_names(CORPUS)
SOURCES = ["committed", pytest.param("fresh", marks=needs_zarr34)]


@pytest.fixture(scope="module")
def fresh_corpus(tmp_path_factory):
    """The corpus written by the zarr-python installed (>= 3.4), in a temporary directory."""
    from tests.data.zarr34.make_rectilinear import write_corpus

    out = tmp_path_factory.mktemp("zarr34") / "rectilinear"
    write_corpus(out)
    return out


@pytest.fixture
def corpus(request, fresh_corpus_or_none):
    return CORPUS if request.param == "committed" else fresh_corpus_or_none


@pytest.fixture(scope="module")
def fresh_corpus_or_none(request):
    return request.getfixturevalue("fresh_corpus") if zarr_writes_rectilinear() else None


def test_corpus_covers_the_grids_zarr_python_writes():
    grids = {name: document(CORPUS, name)["chunk_grid"] for name in NAMES}
    assert all(g["name"] == "rectilinear" and g["configuration"]["kind"] == "inline" for g in grids.values())
    # the issue's example, run-length pairs beside single sizes, a size alone for a dimension
    assert grids["issue_example"]["configuration"]["chunk_shapes"] == [[[3, 2], 4], [2, 5]]
    assert grids["transposed_big_endian"]["configuration"]["chunk_shapes"][2] == 4
    assert document(CORPUS, "sharded")["codecs"][0]["name"] == "sharding_indexed"
    assert len(NAMES) == 7


@pytest.mark.parametrize("corpus", SOURCES, indirect=True)
@pytest.mark.parametrize("name", NAMES)
def test_array_reads_as_zarr_python_read_it(open_hierarchy, corpus, name):
    expected = expected_values(corpus, name)
    ours = open_hierarchy(corpus / "store", read_only=True).open_node(name).read()
    assert ours.dtype == expected.dtype and ours.shape == expected.shape
    assert ours.tobytes() == expected.tobytes()


@pytest.mark.parametrize("corpus", SOURCES, indirect=True)
@pytest.mark.parametrize("name", NAMES)
def test_each_chunk_decodes_at_its_own_full_size(open_hierarchy, corpus, name):
    array = open_hierarchy(corpus / "store", read_only=True).open_node(name)
    expected = expected_chunks(corpus, name)
    coords = list(array.chunk_grid.all_chunks())
    assert sorted(coords) == sorted(expected)
    assert array.chunk_grid.grid_shape == tuple(len(s) for s in chunk_sizes(corpus, name))
    for c, chunk in zip(coords, array.read_chunks(coords)):
        assert chunk.shape == expected[c].shape == array.chunk_shape_of(c), c
        assert chunk.tobytes() == expected[c].tobytes(), c


@pytest.mark.parametrize("name", NAMES)
def test_every_region_reads_as_the_same_slice_of_what_zarr_python_read(open_hierarchy, name):
    expected = expected_values(CORPUS, name)
    array = open_hierarchy(CORPUS / "store", read_only=True).open_node(name)
    rng = np.random.default_rng(len(name))
    for _ in range(40):
        region = []
        for n in expected.shape:
            a, b = sorted(rng.integers(0, n + 1, size=2))
            region.append(slice(int(a), int(b)))
        region = tuple(region)
        assert array.read(region).tobytes() == expected[region].tobytes(), region
    index = tuple(n - 1 for n in expected.shape)
    assert array.read(index) == expected[index]


def _open_with_zarr(path):
    import zarr

    with zarr.config.set({"array.rectilinear_chunks": True}):
        return zarr.open_array(str(path), mode="r")[...]


@pytest.mark.parametrize("name", ["issue_example", "transposed_big_endian", "sharded", "overhanging"])
def test_region_writes_read_back_by_zarr_python_and_by_us(open_hierarchy, tmp_path, name):
    shutil.copytree(CORPUS / "store", tmp_path / "store")
    values = expected_values(CORPUS, name).copy()
    array = open_hierarchy(tmp_path / "store").open_node(name)
    rng = np.random.default_rng(7)
    # across chunks of different sizes, a whole chunk, and the last element
    region = tuple(slice(n // 3, n - n // 4) for n in values.shape)
    values[region] = rng.integers(0, 100, size=values[region].shape).astype(values.dtype)
    array.write(region, values[region])
    last = tuple(n - 1 for n in values.shape)
    values[last] = 42
    array.write(last, 42)
    ours = open_hierarchy(tmp_path / "store", read_only=True).open_node(name).read()
    assert ours.tobytes() == values.tobytes()
    if zarr_writes_rectilinear():
        theirs = _open_with_zarr(tmp_path / "store" / name)
        assert theirs.dtype == values.dtype and theirs.tobytes() == values.tobytes()


# ------------------------------------------------------------------ metadata


def _issue_document() -> dict:
    return document(CORPUS, "issue_example")


@pytest.mark.parametrize(
    ("chunk_shapes", "largest"),
    [
        ([[[3, 2], 4], [2, 5]], (4, 5)),
        ([3, [[2, 1], [5, 1]]], (3, 5)),  # a size alone repeats to the extent
        ([[10, 99], [7]], (10, 7)),  # chunks wholly past the array are none of it
        ([[[1, 10]], [[1, 2], 1, [4, 1]]], (1, 4)),
    ],
)
def test_chunk_shapes_in_every_form_the_specification_allows_parse(chunk_shapes, largest):
    doc = _issue_document()
    doc["chunk_grid"]["configuration"]["chunk_shapes"] = chunk_shapes
    assert parse_v3(doc).chunk_shape == largest


@pytest.mark.parametrize(
    ("configuration", "error"),
    [
        ({"kind": "inline", "chunk_shapes": [[3, 3, 3], [2, 5]]}, MetadataError),  # 9 < 10
        ({"kind": "inline", "chunk_shapes": [[[3, 2], 4]]}, MetadataError),  # one dimension of two
        ({"kind": "inline", "chunk_shapes": [[[3, 2, 1], 4], [7]]}, MetadataError),
        ({"kind": "inline", "chunk_shapes": [[0, 10], [7]]}, MetadataError),
        ({"kind": "inline", "chunk_shapes": [[[3, 0], 10], [7]]}, MetadataError),
        ({"kind": "inline", "chunk_shapes": [[True, 10], [7]]}, MetadataError),
        ({"kind": "inline", "chunk_shapes": [[], [7]]}, MetadataError),
        ({"kind": "inline", "chunk_shapes": [-10, [7]]}, MetadataError),
        ({"kind": "external", "chunk_shapes": [[10], [7]]}, UnsupportedError),
        ({"chunk_shapes": [[10], [7]]}, UnsupportedError),
    ],
)
def test_chunk_shapes_the_specification_forbids_are_refused(configuration, error):
    doc = _issue_document()
    doc["chunk_grid"]["configuration"] = configuration
    with pytest.raises(error):
        parse_v3(doc)


def test_run_lengths_are_never_expanded(open_hierarchy, tmp_path):
    """A run may count any number of chunks: the grid keeps it as one run."""
    doc = copy.deepcopy(_issue_document())
    doc["shape"] = [2**40, 7]
    doc["chunk_grid"]["configuration"]["chunk_shapes"] = [[[1, 2**40]], [2, 5]]
    metadata = parse_v3(doc)
    from zarrfs.format.chunk_grid import RectilinearChunkGrid

    grid = RectilinearChunkGrid.of(metadata.shape, metadata.chunk_runs)
    assert grid.grid_shape == (2**40, 2)
    assert grid.chunk_region((2**40 - 1, 1)) == (slice(2**40 - 1, 2**40), slice(2, 7))


def test_shard_sizes_must_be_multiples_of_the_inner_chunks(open_hierarchy, tmp_path):
    shutil.copytree(CORPUS / "store", tmp_path / "store")
    path = tmp_path / "store" / "sharded" / "zarr.json"
    doc = document(CORPUS, "sharded")
    doc["chunk_grid"]["configuration"]["chunk_shapes"] = [[6, 3, 3], [[5, 2]]]  # 3 is no multiple of 2
    import json

    path.write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match="multiples of the inner chunk size 2"):
        open_hierarchy(tmp_path / "store", read_only=True).open_node("sharded")
