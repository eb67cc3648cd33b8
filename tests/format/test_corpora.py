"""The zarrita.js test corpora (v2 and v3, as directories and as zip files), read in place
and compared node by node with zarr-python reading the same data."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from format_oracle import CORPORA, assert_same_values

from zarrfs.format import Array, Group, UnsupportedError

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.storage  # noqa: E402

# zarr-python cannot read this one either: the json2 object codec is not a Zarr data type
UNSUPPORTED = {"1d.contiguous.json2.O"}


def _corpus_arrays(version: str) -> list[str]:
    root = CORPORA / version / "data.zarr"
    name = "zarr.json" if version == "v3" else ".zarray"
    return [
        doc.parent.relative_to(root).as_posix()
        for doc in sorted(root.rglob(name))
        if version == "v2" or json.loads(doc.read_text())["node_type"] == "array"
    ]


V2_ARRAYS = _corpus_arrays("v2")
V3_ARRAYS = _corpus_arrays("v3")
ZIPS = {  # zip file -> the prefix inside it that holds the hierarchy
    "v2/data.zipped_from_within.zarr.zip": "",
    "v2/data.zipped_from_parent.zarr.zip": "data.zarr/",
    "v3/data.zipped_from_within.zarr.zip": "",
    "v3/data.zipped_from_parent.zarr.zip": "data.zarr/",
    "v3/data.uncompressed.zarr.zip": "",
}


def _zarr_array(version: str, path: str):
    return zarr.open_array(str(CORPORA / version / "data.zarr" / path), mode="r")


def test_corpora_are_present():
    assert len(V2_ARRAYS) > 30 and len(V3_ARRAYS) > 40


@pytest.mark.parametrize("path", [p for p in V2_ARRAYS if p not in UNSUPPORTED])
def test_v2_corpus_array_matches_zarr_python(open_hierarchy, path):
    node = open_hierarchy(CORPORA / "v2" / "data.zarr", read_only=True).open_node(path)
    expected = _zarr_array("v2", path)
    assert isinstance(node, Array)
    assert_same_values(node.read(), expected[...], path)
    assert node.metadata.attributes == dict(expected.attrs)


@pytest.mark.parametrize("path", V3_ARRAYS)
def test_v3_corpus_array_matches_zarr_python(open_hierarchy, path):
    node = open_hierarchy(CORPORA / "v3" / "data.zarr", read_only=True).open_node(path)
    expected = _zarr_array("v3", path)
    assert isinstance(node, Array)
    assert_same_values(node.read(), expected[...], path)
    assert node.metadata.attributes == dict(expected.attrs)


def test_json2_object_array_is_unsupported_with_a_clear_message(open_hierarchy):
    hierarchy = open_hierarchy(CORPORA / "v2" / "data.zarr", read_only=True)
    with pytest.raises(UnsupportedError, match="json2"):
        hierarchy.open_node("1d.contiguous.json2.O")


@pytest.mark.parametrize("zip_name", list(ZIPS))
def test_zip_copies_read_like_the_directories(open_hierarchy, zip_name):
    version = zip_name.split("/")[0]
    prefix = ZIPS[zip_name]
    hierarchy = open_hierarchy(CORPORA / zip_name, read_only=True)
    assert hierarchy.store.read_only
    zip_store = zarr.storage.ZipStore(CORPORA / zip_name, mode="r")
    try:
        for path in V2_ARRAYS if version == "v2" else V3_ARRAYS:
            if path in UNSUPPORTED:
                continue
            expected = zarr.open_array(store=zip_store, path=prefix + path, mode="r")
            assert_same_values(hierarchy.open_node(prefix + path).read(), expected[...], f"{zip_name}:{path}")
    finally:
        zip_store.close()


def _zarr_group_members(version: str, path: str) -> list[str]:
    if version == "v2" and path == "":
        # zarr-python cannot list this group (its consolidated metadata holds the json2
        # array); the members are those its .zmetadata names
        consolidated = json.loads((CORPORA / "v2" / "data.zarr" / ".zmetadata").read_text())["metadata"]
        return sorted({key.split("/")[0] for key in consolidated if "/" in key})
    group = zarr.open_group(str(CORPORA / version / "data.zarr" / path), mode="r")
    return sorted(group.keys())


@pytest.mark.parametrize(
    ("version", "path"),
    [
        ("v2", ""),
        ("v2", "my group with spaces"),
        ("v3", ""),
        ("v3", "my group with spaces"),
        ("v3", "consolidated"),
        ("v3", "consolidated/nested"),
    ],
)
def test_group_children_match_zarr_python(open_hierarchy, version, path):
    hierarchy = open_hierarchy(CORPORA / version / "data.zarr", read_only=True)
    node = hierarchy.open_node(path)
    assert isinstance(node, Group)
    assert hierarchy.children(path) == _zarr_group_members(version, path)
    expected_attrs = (
        json.loads((CORPORA / version / "data.zarr" / path / ".zattrs").read_text())
        if version == "v2" and path == ""
        else dict(zarr.open_group(str(CORPORA / version / "data.zarr" / path), mode="r").attrs)
    )
    assert node.attributes == expected_attrs


def test_remote_hierarchy_lists_children_from_consolidated_metadata_alone(open_hierarchy):
    """With consolidated metadata a remote hierarchy answers children() without listing."""
    hierarchy = open_hierarchy(CORPORA / "v2" / "data.zarr", read_only=True)
    hierarchy.remote = True  # what an s3:// store sets; the listing must come from .zmetadata
    hierarchy.store.list_dir = None  # any listing now fails
    assert hierarchy.children("") == _zarr_group_members("v2", "")
    assert np.array_equal(hierarchy.open_node("1d.contiguous.i4").read(), _zarr_array("v2", "1d.contiguous.i4")[...])
