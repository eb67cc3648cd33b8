"""Arrays of rectilinear chunk grids written by zarr-python 3.4, mounted: `data`,
`data.npy`, the chunk files (each its own chunk's full size) and `info`, byte for byte
as zarr-python read them; writes through the mount read back by zarr-python and by us."""

from __future__ import annotations

import io
import json
import os
import shutil

import numpy as np
import pytest

from tests.format.rectilinear_fixtures import (
    CORPUS,
    array_names,
    chunk_sizes,
    document,
    expected_chunks,
    expected_values,
    little_endian_bytes,
    needs_zarr34,
    zarr_writes_rectilinear,
)
from tests.fs.mount.write_fixtures import run

NAMES = array_names(CORPUS)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """The committed corpus, and one written now where zarr-python >= 3.4 is installed."""
    out = {"committed": CORPUS}
    if zarr_writes_rectilinear():
        from tests.data.zarr34.make_rectilinear import write_corpus

        out["fresh"] = tmp_path_factory.mktemp("zarr34") / "rectilinear"
        write_corpus(out["fresh"])
    return out


@pytest.fixture(scope="module")
def mounted(module_mount, corpora):
    return {source: module_mount(corpus / "store", "--read-only") for source, corpus in corpora.items()}


SOURCES = ["committed", pytest.param("fresh", marks=needs_zarr34)]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", NAMES)
def test_data_and_data_npy_are_what_zarr_python_read(mounted, corpora, source, name):
    expected = expected_values(corpora[source], name)
    node = mounted[source] / name
    assert (node / "data").read_bytes() == little_endian_bytes(expected)
    npy = np.load(io.BytesIO((node / "data.npy").read_bytes()), allow_pickle=False)
    assert npy.shape == expected.shape and npy.tobytes() == little_endian_bytes(expected)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", NAMES)
def test_chunk_files_list_the_grid_each_at_its_own_size(mounted, corpora, source, name):
    expected = expected_chunks(corpora[source], name)
    sizes = chunk_sizes(corpora[source], name)
    chunks = mounted[source] / name / "chunks"
    listed = sorted(
        tuple(int(p) for p in path.relative_to(chunks).parts) for path in chunks.rglob("*") if path.is_file()
    )
    assert listed == sorted(expected)
    assert sorted(os.listdir(chunks)) == sorted(str(i) for i in range(len(sizes[0])))
    for coords, chunk in expected.items():
        path = chunks.joinpath(*map(str, coords))
        assert path.stat().st_size == chunk.nbytes, coords
        assert path.read_bytes() == little_endian_bytes(chunk), coords


@pytest.mark.parametrize("name", NAMES)
def test_info_shows_the_chunk_sizes_in_run_length_form(mounted, name):
    info = (mounted["committed"] / name / "info").read_text()
    fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
    doc = document(CORPUS, name)
    sharded = doc["codecs"][0]["name"] == "sharding_indexed"
    label = "shard sizes" if sharded else "chunk sizes"
    shown = json.loads(fields[label].strip().removeprefix("rectilinear "))
    # the sizes of the chunks that overlap the array, as zarr-python's runs write them
    declared = doc["chunk_grid"]["configuration"]["chunk_shapes"]
    if name == "issue_example":
        assert shown == declared == [[[3, 2], 4], [2, 5]]
    if name == "transposed_big_endian":
        assert shown == [[2, 3], [1, 3], [[4, 2]]]  # the size alone, as the chunks of shape 6 it makes
    if name == "overhanging":
        assert shown == [[4, 6], [3, 6]]
    if name == "sharded_overhanging":
        assert shown == [[6, 4], [[5, 2]]]  # the third shard lies past the array's end
    grid = tuple(len(s) for s in chunk_sizes(CORPUS, name))
    count = int(np.prod(grid))
    assert fields["chunk grid"].strip().startswith(f"{grid}, {count} {'inner chunk' if sharded else 'chunk'}")


def _expected_after(store, name, writes) -> np.ndarray:
    values = expected_values(CORPUS, name).copy()
    for region, part in writes:
        values[region] = part
    return values


@pytest.mark.parametrize("name", ["issue_example", "sharded_overhanging", "transposed_big_endian"])
def test_writes_through_data_and_chunk_files_read_back_by_zarr_python_and_by_us(mount, tmp_path, name):
    store = tmp_path / "store"
    shutil.copytree(CORPUS / "store", store)
    values = expected_values(CORPUS, name).copy()
    itemsize = values.dtype.itemsize
    rng = np.random.default_rng(3)
    m = mount(store)
    node = m / name
    # a run of elements across chunks of different sizes, at an unaligned element
    flat = values.reshape(-1)
    start, count = 3, flat.size // 2
    new = rng.integers(0, 120, size=count).astype(values.dtype)
    with open(node / "data", "r+b") as f:
        os.pwrite(f.fileno(), little_endian_bytes(new), start * itemsize)
    flat[start : start + count] = new
    # a whole chunk file replaced (the last: a chunk of its own size, overhanging or not)
    chunks = expected_chunks(CORPUS, name)
    last = max(chunks)
    replacement = rng.integers(0, 120, size=chunks[last].shape).astype(values.dtype)
    source = tmp_path / "chunk.raw"
    source.write_bytes(little_endian_bytes(replacement))
    run("cp", source, node / "chunks" / os.path.join(*map(str, last)))
    sizes = chunk_sizes(CORPUS, name)
    region = tuple(slice(sum(s[:c]), min(sum(s[: c + 1]), n)) for s, c, n in zip(sizes, last, values.shape))
    values[region] = replacement[tuple(slice(0, r.stop - r.start) for r in region)]
    assert (node / "data").read_bytes() == little_endian_bytes(values)
    m.unmount()

    from zarrfs.format import Hierarchy, IOContext
    from zarrfs.store import open_store

    ours = Hierarchy(open_store(str(store), None, read_only=True), IOContext()).open_node(name)
    assert ours.read().tobytes() == values.tobytes()
    assert ours.read_chunks([last])[0].tobytes() == replacement.tobytes()
    # the grid zarr-python wrote is kept as it wrote it
    assert document(CORPUS, name)["chunk_grid"] == json.loads((store / name / "zarr.json").read_text())["chunk_grid"]
    if zarr_writes_rectilinear():
        import zarr

        with zarr.config.set({"array.rectilinear_chunks": True}):
            theirs = zarr.open_array(str(store / name), mode="r")[...]
        assert theirs.dtype == values.dtype and theirs.tobytes() == values.tobytes()


def test_a_chunk_file_of_another_chunks_size_is_refused(mount, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(CORPUS / "store", store)
    before = (store / "issue_example" / "c" / "2" / "1").read_bytes()
    m = mount(store)
    # chunk (0, 0) is 3 x 2 int16: 12 bytes; (2, 1) is 4 x 5: 40 bytes
    source = tmp_path / "small.raw"
    source.write_bytes(bytes(12))
    result = run("cp", source, m / "issue_example" / "chunks" / "2" / "1", check=False)
    assert result.returncode != 0
    m.unmount()
    assert (store / "issue_example" / "c" / "2" / "1").read_bytes() == before
