"""The pre-final Zarr v3 draft layouts read by the format layer: the 2019–2021 corpus
`zarrita.zr3` equals its v2 copy as zarr-python reads it, chunk by chunk; hierarchies
built from the 2022 draft's own examples read as numpy and numcodecs wrote them; what
the drafts say must be refused is refused; nothing is ever written."""

from __future__ import annotations

import json
import math
import shutil
import warnings

import numpy as np
import pytest

from tests.format.draft_fixtures import (
    CORPUS_2019,
    CORPUS_ARRAYS,
    CORPUS_CODECS,
    CORPUS_V2,
    ENTRY_POINT_2022,
    FORMAT_2022,
    REFUSED_2022,
    write_draft_2019_root_array,
    write_draft_2022,
    write_json,
)
from zarrfs.format import (
    Array,
    Group,
    Hierarchy,
    MetadataError,
    NodeNotFoundError,
    ReadOnlyFormatError,
    UnsupportedError,
    open_hierarchy,
)
from zarrfs.format.drafts import DraftHierarchy
from zarrfs.store import open_store
from zarrfs.views.info import render_info

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def open_path(path, read_only: bool = True):
    return open_hierarchy(open_store(str(path), read_only=read_only))


@pytest.fixture(scope="module")
def corpus() -> DraftHierarchy:
    return open_path(CORPUS_2019)


@pytest.fixture(scope="module")
def draft_2022(tmp_path_factory):
    root = tmp_path_factory.mktemp("draft2022")
    expected = write_draft_2022(root)
    return open_path(root), expected, root


# ------------------------------------------------------------ 2019–2021: the corpus


def test_entry_point_names_the_2019_draft(corpus):
    assert isinstance(corpus, DraftHierarchy)
    assert corpus.layout.dialect == "v3-draft-2019"
    assert corpus.layout.suffix == ".json"


def test_corpus_tree_has_the_four_arrays_and_an_implicit_group(corpus):
    assert corpus.children("") == ["blosc", "gzip", "raw", "zlib"]
    assert corpus.children("blosc") == ["lz4"]
    blosc = corpus.open_node("blosc")
    assert isinstance(blosc, Group) and blosc.implicit
    root = corpus.open_node("")
    assert isinstance(root, Group) and not root.implicit
    assert root.documents == {"zarr.json": (CORPUS_2019 / "zarr.json").read_bytes()}
    for path in CORPUS_ARRAYS:
        assert isinstance(corpus.open_node(path), Array)
    with pytest.raises(NodeNotFoundError):
        corpus.open_node("missing")
    with pytest.raises(NodeNotFoundError):
        corpus.open_node("raw/c0")  # chunk keys are not nodes


@pytest.mark.parametrize("path", list(CORPUS_ARRAYS))
def test_corpus_array_equals_the_v2_copy_read_by_zarr_python(corpus, path):
    expected = np.asarray(zarr.open_array(str(CORPUS_V2 / CORPUS_ARRAYS[path]), mode="r")[...])
    array = corpus.open_node(path)
    assert array.shape == (512, 512, 3) and array.chunk_shape == (100, 100, 1)
    ours = array.read()
    assert ours.dtype == expected.dtype
    assert ours.tobytes() == expected.tobytes()


@pytest.mark.parametrize("path", list(CORPUS_ARRAYS))
def test_corpus_chunks_are_the_stored_chunks_decoded_with_overhanging_edges(corpus, path):
    array = corpus.open_node(path)
    expected_image = np.asarray(zarr.open_array(str(CORPUS_V2 / CORPUS_ARRAYS[path]), mode="r")[...])
    codec = CORPUS_CODECS[path]
    grid = array.chunk_grid
    assert grid.grid_shape == (6, 6, 3)
    coords = list(grid.all_chunks())
    for c, chunk in zip(coords, array.read_chunks(coords)):
        stored = (CORPUS_2019 / "data/root" / path / f"c{c[0]}/{c[1]}/{c[2]}").read_bytes()
        raw = stored if codec is None else bytes(codec.decode(stored))
        assert chunk.shape == (100, 100, 1)
        assert chunk.tobytes() == raw, c
        region = grid.chunk_region(c)
        inside = tuple(slice(0, r.stop - r.start) for r in region)
        assert np.array_equal(chunk[inside], expected_image[region]), c


def test_corpus_info_names_the_draft_and_the_equivalent_codecs(corpus):
    text = render_info(corpus.open_node("blosc/lz4"), "blosc/lz4")
    assert "format:             Zarr v3 draft (2019–2021 core protocol)" in text
    assert "blosc(cname=lz4" in text and "chunks stored:      108 / 108" in text
    assert "Zarr v3 draft (2019–2021 core protocol)" in render_info(corpus.open_node(""), "")


def test_corpus_nodes_show_their_documents_as_stored(corpus):
    array = corpus.open_node("gzip")
    assert array.documents == {"array.json": (CORPUS_2019 / "meta/root/gzip.array.json").read_bytes()}


# ------------------------------------------------------------ 2019–2021: synthetic


def test_2019_root_array_in_column_major_big_endian_chunks(tmp_path):
    expected = write_draft_2019_root_array(tmp_path)
    hierarchy = open_path(tmp_path)
    array = hierarchy.open_node("")
    assert isinstance(array, Array)
    assert set(array.documents) == {"zarr.json", "array.json"}
    assert array.metadata.attributes == {"origin": "synthetic"}
    assert array.stored_key((1, 2)) == "data/root/c1.2"
    ours = array.read()
    assert ours.tobytes() == expected.tobytes()  # NaN where the chunk is missing, bit for bit
    assert np.isnan(ours[3:6, 2:4]).all()


def test_2019_group_with_null_attributes_and_suffixless_keys(tmp_path):
    write_json(
        tmp_path / "zarr.json",
        {
            "zarr_format": "https://purl.org/zarr/spec/protocol/core/3.0",
            "metadata_encoding": "application/json",
            "extensions": [],
        },
    )
    write_json(tmp_path / "meta/root/a.group", {"extensions": [], "attributes": None})
    write_json(tmp_path / "meta/root/a/b.group", {"extensions": [], "attributes": {"k": 1}})
    hierarchy = open_path(tmp_path)
    assert hierarchy.children("") == ["a"] and hierarchy.children("a") == ["b"]
    assert hierarchy.open_node("a").attributes == {}
    assert hierarchy.open_node("a/b").attributes == {"k": 1}


# ------------------------------------------------------------ 2022: the draft's examples


def test_entry_point_names_the_2022_draft(draft_2022):
    hierarchy, _, _ = draft_2022
    assert isinstance(hierarchy, DraftHierarchy)
    assert hierarchy.layout.dialect == "v3-draft-2022" and hierarchy.layout.suffix == ".json"


def test_2022_tree_with_explicit_and_implicit_groups(draft_2022):
    hierarchy, _, _ = draft_2022
    assert hierarchy.children("") == ["datetimes", "foo", "fortran", "refused", "specials"]
    assert hierarchy.children("foo") == ["bar", "baz"]
    assert hierarchy.children("foo/baz") == ["qux"]
    bar, baz, foo = (hierarchy.open_node(p) for p in ("foo/bar", "foo/baz", "foo"))
    assert not bar.implicit and bar.attributes == {"spam": "ham", "eggs": 42}
    assert set(bar.documents) == {"group.json"}
    assert baz.implicit and foo.implicit
    assert hierarchy.exists("foo/baz/qux") and not hierarchy.exists("foo/nothing")


def test_2022_float64_gzip_array_reads_as_written(draft_2022):
    hierarchy, expected, _ = draft_2022
    array = hierarchy.open_node("foo/baz/qux")
    assert array.metadata.attributes == {"foo": 42, "bar": "apples", "baz": [1, 2, 3, 4]}
    assert array.dtype.numpy == np.dtype("<f8")
    assert np.isnan(array.fill_value)
    assert array.stored_key((2, 1)) == "data/foo/baz/qux/c2/1"
    assert array.read().tobytes() == expected["foo/baz/qux"].tobytes()


def test_2022_extension_data_type_reads_as_its_fallback(draft_2022):
    hierarchy, expected, _ = draft_2022
    array = hierarchy.open_node("datetimes")
    assert array.dtype.numpy == np.dtype("<i8") and "'<M8[ns]'" in array.dtype.name
    assert array.fill_value == 0
    assert np.array_equal(array.read(), expected["datetimes"])


def test_2022_column_major_layout_with_the_endian_codec(draft_2022):
    hierarchy, expected, _ = draft_2022
    array = hierarchy.open_node("fortran")
    assert np.array_equal(array.read(), expected["fortran"])


def test_2022_plus_infinity_fill_value(draft_2022):
    hierarchy, expected, _ = draft_2022
    assert np.array_equal(hierarchy.open_node("specials").read(), expected["specials"])


@pytest.mark.parametrize("name", list(REFUSED_2022))
def test_2022_node_that_must_be_refused_cannot_be_opened(draft_2022, name):
    hierarchy, _, _ = draft_2022
    assert f"{name}" in hierarchy.children("refused")
    with pytest.raises(UnsupportedError) as info:
        hierarchy.open_node(f"refused/{name}")
    assert "refused/" in str(info.value)
    assert hierarchy.exists(f"refused/{name}")


def test_2022_storage_transformer_refusal_names_it(draft_2022):
    hierarchy, _, _ = draft_2022
    with pytest.raises(UnsupportedError, match=r"storage transformers.*indexed"):
        hierarchy.open_node("refused/transformer")
    with pytest.raises(UnsupportedError, match=r"mystery.*must be understood"):
        hierarchy.open_node("refused/must_understand")


def test_2022_root_group_document_and_root_array_keys(tmp_path):
    write_json(tmp_path / "zarr.json", ENTRY_POINT_2022)
    write_json(tmp_path / "meta/group.json", {"attributes": {"title": "root"}})
    root = open_path(tmp_path).open_node("")
    assert root.attributes == {"title": "root"} and set(root.documents) == {"zarr.json", "group.json"}

    (tmp_path / "meta/group.json").unlink()
    write_json(
        tmp_path / "meta/array.json",
        {
            "shape": [4],
            "data_type": "uint16",
            "chunk_grid": {"type": "regular", "chunk_shape": [4], "separator": "/"},
            "chunk_memory_layout": "C",
            "fill_value": "0x0102",
            "extensions": [],
            "attributes": {},
        },
    )
    array = open_path(tmp_path).open_node("")
    assert array.stored_key((0,)) == "data/c0"
    assert array.fill_value == 0x0102
    (tmp_path / "data").mkdir()
    (tmp_path / "data/c0").write_bytes(np.array([1, 2, 3, 4], dtype="<u2").tobytes())
    assert open_path(tmp_path).open_node("").read().tolist() == [1, 2, 3, 4]


# ------------------------------------------------------------ entry points


def test_entry_point_extension_that_must_be_understood_refuses_the_hierarchy(tmp_path):
    write_json(
        tmp_path / "zarr.json",
        {
            **ENTRY_POINT_2022,
            "extensions": [{"extension": "http://example.org/zarr/extension/foo", "must_understand": True}],
        },
    )
    with pytest.raises(UnsupportedError, match="must be understood"):
        open_path(tmp_path)


@pytest.mark.parametrize(
    "encoding",
    [
        {"type": "yaml", "metadata_key_suffix": ".yaml"},
        {"extension": "https://example.org/cbor", "type": "cbor", "metadata_key_suffix": ".cbor"},
    ],
)
def test_entry_point_metadata_encoding_other_than_json_is_refused(tmp_path, encoding):
    write_json(tmp_path / "zarr.json", {**ENTRY_POINT_2022, "metadata_encoding": encoding})
    with pytest.raises(UnsupportedError, match="metadata encoding"):
        open_path(tmp_path)


def test_unknown_format_uri_is_refused_by_name(tmp_path):
    write_json(tmp_path / "zarr.json", {"zarr_format": "https://purl.org/zarr/spec/core/4.0"})
    with pytest.raises(UnsupportedError, match=r"core/4.0"):
        open_path(tmp_path)


def test_final_v3_and_v2_stores_open_as_before(tmp_path):
    zarr.open_group(str(tmp_path / "v3"), mode="w").create_array("a", shape=(2,), dtype="i4")
    zarr.open_group(str(tmp_path / "v2"), mode="w", zarr_format=2)
    for name in ("v3", "v2"):
        hierarchy = open_path(tmp_path / name)
        assert type(hierarchy) is Hierarchy
    assert open_path(tmp_path / "v3").children("") == ["a"]


def test_layout_is_never_guessed_from_key_names(tmp_path):
    # draft-looking keys but no draft entry point: not a draft hierarchy
    shutil.copytree(CORPUS_2019 / "meta", tmp_path / "meta")
    assert type(open_path(tmp_path)) is Hierarchy


def test_2022_codec_list_must_put_array_codecs_first(tmp_path):
    write_json(tmp_path / "zarr.json", ENTRY_POINT_2022)
    document = json.loads(json.dumps(REFUSED_2022["unknown_codec"]))
    document["codecs"] = [
        {"type": "https://purl.org/zarr/spec/codecs/gzip/1.0", "configuration": {"level": 1}},
        {"type": "https://purl.org/zarr/spec/codecs/endian/1.0", "configuration": {"endian": "big"}},
    ]
    write_json(tmp_path / "meta/x.array.json", document)
    with pytest.raises(MetadataError, match="before byte codecs"):
        open_path(tmp_path).open_node("x")


# ------------------------------------------------------------ read-only


def test_every_write_is_refused_and_nothing_is_stored(tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(CORPUS_2019, root)
    before = sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    hierarchy = open_path(root, read_only=False)
    assert hierarchy.read_only and not hierarchy.store.read_only
    attempts = [
        lambda: hierarchy.create_group("new"),
        lambda: hierarchy.create_array("new", {}),
        lambda: hierarchy.replace_document("gzip", "array.json", b"{}"),
        lambda: hierarchy.erase_node("gzip"),
        lambda: hierarchy.move_node("gzip", "moved"),
    ]
    for attempt in attempts:
        with pytest.raises(ReadOnlyFormatError, match=r"pre-final Zarr v3 draft layout.*reads but does not write"):
            attempt()
    after = sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    assert after == before
    assert math.prod(hierarchy.open_node("gzip").shape) == 512 * 512 * 3


def test_format_names_the_2022_draft_in_info(draft_2022):
    hierarchy, _, _ = draft_2022
    text = render_info(hierarchy.open_node("foo/baz/qux"), "foo/baz/qux")
    assert "Zarr v3 draft (2022 core specification)" in text
    assert "gzip(level=1)" in text and "fill value:         NaN" in text
    assert FORMAT_2022 not in text
