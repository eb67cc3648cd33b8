"""Hierarchy operations: children (explicit, implicit, consolidated, stale consolidated),
creating, erasing and moving nodes, and the rules for replacing metadata documents."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from format_oracle import assert_same_values

from zarrfs.format import (
    Array,
    Group,
    InvalidWriteError,
    MetadataChangeError,
    MetadataError,
    NodeNotFoundError,
    ReadOnlyFormatError,
    UnsupportedError,
)

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def _tree(root, zarr_format=3, consolidate=False, implicit=True):
    """/ (attrs) with arrays `a`, `g/b`, group `g`, `g/h`, and an array under an implicit
    group `i/j/k` (which consolidated metadata does not list); optionally consolidated."""
    group = zarr.open_group(str(root), mode="w", zarr_format=zarr_format, attributes={"root": True})
    group.create_array("a", shape=(4,), chunks=(2,), dtype="i2")[...] = [1, 2, 3, 4]
    g = group.create_group("g", attributes={"g": 1})
    g.create_array("b", shape=(3, 3), chunks=(2, 2), dtype="f4")[...] = np.eye(3)
    g.create_group("h")
    if implicit:
        zarr.create_array(str(root / "i" / "j" / "k"), shape=(2,), dtype="u1", zarr_format=zarr_format)[...] = [7, 8]
    if consolidate:
        zarr.consolidate_metadata(str(root), zarr_format=zarr_format)
    return group


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_children_include_implicit_groups(open_hierarchy, tmp_path, zarr_format):
    _tree(tmp_path, zarr_format)
    (tmp_path / "not-a-node").mkdir()
    (tmp_path / "not-a-node" / "notes.txt").write_text("no metadata below here")
    h = open_hierarchy(tmp_path)
    assert h.children("") == ["a", "g", "i"]
    assert h.children("g") == ["b", "h"]
    assert h.children("i") == ["j"] and h.children("i/j") == ["k"]
    for path in ("i", "i/j"):
        node = h.open_node(path)
        assert isinstance(node, Group) and node.implicit and node.attributes == {}
    assert isinstance(h.open_node("i/j/k"), Array)
    with pytest.raises(NodeNotFoundError):
        h.open_node("not-a-node")
    assert h.open_node("").attributes == {"root": True}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_children_match_zarr_python(open_hierarchy, tmp_path, zarr_format):
    _tree(tmp_path, zarr_format, consolidate=True, implicit=False)
    h = open_hierarchy(tmp_path)
    theirs = zarr.open_group(str(tmp_path), mode="r", use_consolidated=True)
    assert theirs.metadata.consolidated_metadata is not None
    assert h.children("") == sorted(theirs.keys())
    assert h.children("g") == sorted(theirs["g"].keys())


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_stale_consolidated_metadata_is_united_with_the_store_on_local_stores(open_hierarchy, tmp_path, zarr_format):
    _tree(tmp_path, zarr_format, consolidate=True)
    zarr.create_array(str(tmp_path / "late"), shape=(2,), dtype="i1", zarr_format=zarr_format)
    zarr.create_array(str(tmp_path / "g" / "late2"), shape=(2,), dtype="i1", zarr_format=zarr_format)
    h = open_hierarchy(tmp_path)
    assert h.children("") == ["a", "g", "i", "late"]
    assert h.children("g") == ["b", "h", "late2"]
    assert isinstance(h.open_node("late"), Array)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nodes_erased_since_consolidation_are_gone_on_local_stores(open_hierarchy, tmp_path, zarr_format):
    _tree(tmp_path, zarr_format, consolidate=True)
    h = open_hierarchy(tmp_path)
    h.erase_node("g")
    h.move_node("a", "renamed")
    assert h.children("") == ["i", "renamed"]
    for path in ("g", "g/b", "a"):
        with pytest.raises(NodeNotFoundError):
            h.open_node(path)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_remote_hierarchy_trusts_consolidated_metadata_unless_told_never(open_hierarchy, tmp_path, zarr_format):
    _tree(tmp_path, zarr_format, consolidate=True)
    zarr.create_array(str(tmp_path / "late"), shape=(2,), dtype="i1", zarr_format=zarr_format)
    consolidated = open_hierarchy(tmp_path)
    consolidated.remote = True  # as for s3:// and other remote stores
    assert consolidated.children("") == ["a", "g"]  # what the consolidated metadata lists
    assert isinstance(consolidated.open_node("g/b"), Array)
    listed = open_hierarchy(tmp_path, consolidated="never")
    listed.remote = True
    assert listed.children("") == ["a", "g", "i", "late"]


def test_remote_hierarchy_reads_arrays_from_consolidated_metadata(open_hierarchy, tmp_path):
    _tree(tmp_path, 3, consolidate=True)
    h = open_hierarchy(tmp_path)
    h.remote = True
    requests = []
    get = h.store.get_partial_values
    h.store.get_partial_values = lambda reqs, **options: (requests.extend(k for k, _ in reqs), get(reqs, **options))[1]
    assert_same_values(h.open_node("g/b").read(), np.eye(3, dtype="f4"), "g/b")
    assert not [k for k in requests if k.endswith("zarr.json") and k != "zarr.json"]


def _deep_tree(root, zarr_format):
    """Groups three deep, each with an array, consolidated by zarr-python."""
    group = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
    for top in ("p", "q"):
        for mid in ("r", "s"):
            for low in ("t", "u"):
                g = group.require_group(f"{top}/{mid}/{low}")
                g.create_array("v", shape=(3,), chunks=(2,), dtype="i4", attributes={"at": f"{top}{mid}{low}"})
        group[top].create_array("w", shape=(2, 2), chunks=(1, 2), dtype="f8")
    zarr.consolidate_metadata(str(root), zarr_format=zarr_format)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_remote_consolidated_children_and_nodes_match_zarr_python_at_every_depth(open_hierarchy, tmp_path, zarr_format):
    _deep_tree(tmp_path, zarr_format)
    h = open_hierarchy(tmp_path, read_only=True)
    h.remote = True
    h.store.list_dir = h.store.list_prefix = None  # every answer comes from the consolidated metadata
    theirs = zarr.open_group(str(tmp_path), mode="r", use_consolidated=True)
    members = dict(theirs.members(max_depth=None))
    assert h.children("") == sorted(theirs.keys())
    for path, member in members.items():
        node = h.open_node(path)
        if isinstance(member, zarr.Group):
            assert isinstance(node, Group) and not node.implicit
            assert h.children(path) == sorted(member.keys()), path
        else:
            assert isinstance(node, Array)
            assert (node.shape, node.dtype.numpy, node.metadata.attributes) == (
                member.shape,
                member.dtype,
                dict(member.attrs),
            )


def test_remote_consolidated_metadata_lists_groups_it_only_implies(open_hierarchy, tmp_path):
    """Consolidated metadata naming x/y/z alone still shows x and x/y, as implicit groups."""
    array = zarr.create_array(str(tmp_path / "source"), shape=(2,), dtype="u1")
    document = json.loads((tmp_path / "source" / "zarr.json").read_text())
    (tmp_path / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {},
                "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": {"x/y/z": document}},
            }
        )
    )
    h = open_hierarchy(tmp_path, read_only=True)
    h.remote = True
    assert array.shape == (2,)
    assert (h.children(""), h.children("x"), h.children("x/y"), h.children("x/y/z")) == (["x"], ["y"], ["z"], [])
    for path in ("x", "x/y"):
        node = h.open_node(path)
        assert isinstance(node, Group) and node.implicit
    assert isinstance(h.open_node("x/y/z"), Array)
    assert json.loads(h.open_node("x/y/z").documents["zarr.json"]) == document


def test_a_consolidated_document_holding_a_bare_nan_is_shown_as_read(open_hierarchy, tmp_path):
    """A bare NaN (Python's json reads it; JSON writers may not write it) in one node's
    consolidated document: the node opens as its own document would, and its zarr.json
    shows the NaN as the store holds it; its siblings and the listing are untouched."""
    zarr.open_group(str(tmp_path), mode="w").create_array("good", shape=(2,), dtype="f4")
    zarr.consolidate_metadata(str(tmp_path))
    root = json.loads((tmp_path / "zarr.json").read_text())
    bad = dict(root["consolidated_metadata"]["metadata"]["good"], attributes={"x": float("nan")})
    root["consolidated_metadata"]["metadata"]["bad"] = bad
    (tmp_path / "zarr.json").write_text(json.dumps(root))  # allow_nan: a bare NaN
    assert "NaN" in (tmp_path / "zarr.json").read_text()
    h = open_hierarchy(tmp_path, read_only=True)
    h.remote = True
    assert h.children("") == ["bad", "good"]
    node = h.open_node("bad")
    assert np.isnan(node.metadata.attributes["x"]) and b'"x": NaN' in node.documents["zarr.json"]
    assert isinstance(h.open_node("good"), Array)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_listing_a_group_from_consolidated_metadata_renders_no_document(
    open_hierarchy, tmp_path, monkeypatch, zarr_format
):
    """Children are opened to list a group (array or group?); their documents' bytes are
    made only when asked for, and an array's are those zarr-python wrote for it."""
    from zarrfs.format import hierarchy as hierarchy_module

    _tree(tmp_path, zarr_format, consolidate=True, implicit=False)
    rendered = []
    dumps = json.dumps
    monkeypatch.setattr(hierarchy_module.json, "dumps", lambda *a, **k: (rendered.append(1), dumps(*a, **k))[1])
    h = open_hierarchy(tmp_path, read_only=True)
    h.remote = True
    nodes = {p: h.open_node(p) for p in ("a", "g", "g/b", "g/h")}
    assert not rendered
    monkeypatch.undo()
    for path in ("a", "g/b"):  # arrays: the bytes zarr-python wrote beside its consolidated metadata
        for name in nodes[path].documents:
            assert nodes[path].documents[name] == (tmp_path / path / name).read_bytes(), (path, name)
    # a group's entry there holds more than its own document (consolidated_metadata: {}): what it says
    if zarr_format == 3:
        said = json.loads((tmp_path / "zarr.json").read_text())["consolidated_metadata"]["metadata"]["g/h"]
    else:
        said = json.loads((tmp_path / ".zmetadata").read_text())["metadata"]["g/h/.zgroup"]
    assert json.loads(nodes["g/h"].documents["zarr.json" if zarr_format == 3 else ".zgroup"]) == said


def test_consolidated_metadata_read_again_unchanged_is_not_parsed_again(open_hierarchy, tmp_path, monkeypatch):
    from zarrfs.format.consolidated_reads import Consolidated

    _tree(tmp_path, 3, consolidate=True, implicit=False)
    parses = []
    parsed = Consolidated.parsed.__func__
    monkeypatch.setattr(Consolidated, "parsed", classmethod(lambda cls, *a: (parses.append(1), parsed(cls, *a))[1]))
    h = open_hierarchy(tmp_path, read_only=True, metadata_ttl=0)  # every call reads the root again
    h.remote = True
    assert h.children("") == ["a", "g"]
    assert h.children("g") == ["b", "h"] and isinstance(h.open_node("g/b"), Array)
    assert len(parses) == 1
    zarr.open_group(str(tmp_path), mode="r+").create_array("late", shape=(2,), dtype="i1")
    zarr.consolidate_metadata(str(tmp_path))
    assert h.children("") == ["a", "g", "late"]
    assert isinstance(h.open_node("late"), Array)
    assert len(parses) == 2


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_node_read_again_unchanged_is_not_parsed_again(open_hierarchy, tmp_path, zarr_format):
    """Re-opening a node whose documents read the same bytes (as each is once the metadata
    ttl expires) gives the node parsed before, while it is held; a changed document, or an
    array whose decoded chunks were forgotten since, is parsed anew."""
    _tree(tmp_path, zarr_format, implicit=False)
    h = open_hierarchy(tmp_path)
    array, group = h.open_node("g/b"), h.open_node("g")
    assert h.open_node("g/b") is array and h.open_node("g") is group
    zarr.open_array(str(tmp_path / "g" / "b"), mode="r+").attrs["units"] = "m"  # another writer
    changed = h.open_node("g/b")
    assert changed is not array and changed.metadata.attributes == {"units": "m"}
    assert h.open_node("g/b") is changed
    h.context.invalidate("g/b")  # its decoded chunks forgotten: the node is another
    assert h.open_node("g/b") is not changed and h.open_node("g/b").current()
    zarr.open_group(str(tmp_path / "g"), mode="r+").attrs["g"] = 2
    assert h.open_node("g") is not group and h.open_node("g").attributes == {"g": 2}


def test_create_group_and_array_then_erase_and_move(open_hierarchy, tmp_path):
    h = open_hierarchy(tmp_path)
    h.create_group("grp", {"k": "v"})
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4, 4],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": -1,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    array = h.create_array("grp/arr", doc)
    array.write((), np.arange(16, dtype="i4").reshape(4, 4))
    with pytest.raises(FileExistsError):
        h.create_group("grp/arr")
    with pytest.raises(FileExistsError):
        h.create_group("grp")

    h.move_node("grp/arr", "grp/moved")
    assert h.children("grp") == ["moved"]
    assert_same_values(
        zarr.open_array(str(tmp_path / "grp" / "moved"))[...], np.arange(16, dtype="i4").reshape(4, 4), "moved"
    )
    with pytest.raises(NodeNotFoundError):
        h.open_node("grp/arr")

    h.erase_node("grp/moved")
    assert h.children("grp") == []
    assert h.store.list_prefix("grp/moved/") == []
    with pytest.raises(NodeNotFoundError):
        h.move_node("grp/moved", "elsewhere")


@pytest.mark.parametrize("kind", ["group", "array"])
def test_creating_a_node_that_another_writer_makes_of_the_other_kind_meanwhile_fails_as_existing(
    open_hierarchy, tmp_path, monkeypatch, kind
):
    h = open_hierarchy(tmp_path)
    array_doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [4],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    other = array_doc if kind == "group" else {"zarr_format": 3, "node_type": "group"}
    own_create, own_set = h.store.create, h.store.set

    def created_then_overwritten(key, value):
        own_create(key, value)
        own_set(key, json.dumps(other).encode())  # the other writer's (unconditional) document lands last

    monkeypatch.setattr(h.store, "create", created_then_overwritten)
    with pytest.raises(FileExistsError, match="another writer"):
        h.create_group("x") if kind == "group" else h.create_array("x", array_doc)


@pytest.mark.parametrize("path", ["", "parent/.", "parent/..", "parent/__private", "zarr.json", "p/.zarray"])
def test_invalid_node_names_are_refused(open_hierarchy, tmp_path, path):
    h = open_hierarchy(tmp_path)
    with pytest.raises(InvalidWriteError):
        h.create_group(path)
    with pytest.raises(InvalidWriteError):
        h.move_node("x", path) if path else h.erase_node(path)


def test_writes_to_a_read_only_store_are_refused(open_hierarchy, tmp_path):
    _tree(tmp_path)
    h = open_hierarchy(tmp_path, read_only=True)
    with pytest.raises(ReadOnlyFormatError):
        h.create_group("new")
    with pytest.raises(ReadOnlyFormatError):
        h.erase_node("a")


# ------------------------------------------------------------------ replace_document


def _array_with_data(root, zarr_format=3):
    array = zarr.create_array(
        str(root / "a"), shape=(6, 4), chunks=(2, 2), dtype="<i4", zarr_format=zarr_format, attributes={"old": 1}
    )
    array[...] = np.arange(24).reshape(6, 4)
    name = "zarr.json" if zarr_format == 3 else ".zarray"
    return json.loads((root / "a" / name).read_text())


def test_attribute_change_on_an_array_with_data_is_stored(open_hierarchy, tmp_path):
    doc = _array_with_data(tmp_path)
    h = open_hierarchy(tmp_path)
    doc["attributes"] = {"new": [1, 2]}
    doc["dimension_names"] = ["y", "x"]
    node = h.replace_document("a", "zarr.json", json.dumps(doc).encode())
    assert node.metadata.attributes == {"new": [1, 2]}
    theirs = zarr.open_array(str(tmp_path / "a"))
    assert dict(theirs.attrs) == {"new": [1, 2]} and theirs.metadata.dimension_names == ("y", "x")
    assert_same_values(theirs[...], np.arange(24, dtype="<i4").reshape(6, 4), "data kept")


def test_v2_attributes_are_replaced_through_zattrs(open_hierarchy, tmp_path):
    _array_with_data(tmp_path, zarr_format=2)
    h = open_hierarchy(tmp_path)
    h.replace_document("a", ".zattrs", b'{"units": "K"}')
    assert dict(zarr.open_array(str(tmp_path / "a")).attrs) == {"units": "K"}


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_dtype_change_on_an_array_with_data_is_refused_and_the_old_document_kept(open_hierarchy, tmp_path, zarr_format):
    doc = _array_with_data(tmp_path, zarr_format)
    name = "zarr.json" if zarr_format == 3 else ".zarray"
    before = (tmp_path / "a" / name).read_bytes()
    doc.update(data_type="float32") if zarr_format == 3 else doc.update(dtype="<f4")
    with pytest.raises(MetadataChangeError):
        open_hierarchy(tmp_path).replace_document("a", name, json.dumps(doc).encode())
    assert (tmp_path / "a" / name).read_bytes() == before


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(fill_value=5),
        lambda d: d["codecs"].append({"name": "gzip", "configuration": {"level": 1}}),
        lambda d: d["chunk_grid"]["configuration"].update(chunk_shape=[3, 2]),
        lambda d: d["chunk_key_encoding"].update(name="v2", configuration={"separator": "."}),
    ],
    ids=["fill_value", "codecs", "chunk_shape", "chunk_key_encoding"],
)
def test_changes_that_would_misread_existing_chunks_are_refused(open_hierarchy, tmp_path, edit):
    doc = _array_with_data(tmp_path)
    edit(doc)
    with pytest.raises(MetadataChangeError):
        open_hierarchy(tmp_path).replace_document("a", "zarr.json", json.dumps(doc).encode())


def test_any_change_is_allowed_on_an_array_without_data(open_hierarchy, tmp_path):
    zarr.create_array(str(tmp_path / "a"), shape=(6, 4), chunks=(2, 2), dtype="<i4")
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    doc.update(data_type="float64", fill_value="NaN")
    node = open_hierarchy(tmp_path).replace_document("a", "zarr.json", json.dumps(doc).encode())
    assert node.dtype.name == "float64"
    assert zarr.open_array(str(tmp_path / "a")).dtype == np.dtype("float64")


@pytest.mark.parametrize("raw", [b"{not json", b'{"zarr_format": 3, "node_type": "array"}', b"[]"])
def test_invalid_document_is_refused_and_the_old_document_kept(open_hierarchy, tmp_path, raw):
    _array_with_data(tmp_path)
    before = (tmp_path / "a" / "zarr.json").read_bytes()
    with pytest.raises(MetadataError):
        open_hierarchy(tmp_path).replace_document("a", "zarr.json", raw)
    assert (tmp_path / "a" / "zarr.json").read_bytes() == before


def test_resize_erases_chunks_outside_as_zarr_python_does(open_hierarchy, tmp_path):
    doc = _array_with_data(tmp_path)
    twin = zarr.create_array(str(tmp_path / "twin"), shape=(6, 4), chunks=(2, 2), dtype="<i4")
    twin[...] = np.arange(24).reshape(6, 4)
    h = open_hierarchy(tmp_path)
    for shape in ([3, 4], [3, 1], [6, 4]):  # shrink, shrink, grow back
        doc["shape"] = shape
        h.replace_document("a", "zarr.json", json.dumps(doc).encode())
        twin.resize(tuple(shape))
        assert_same_values(zarr.open_array(str(tmp_path / "a"))[...], twin[...], f"resized to {shape}")
        assert_same_values(h.open_node("a").read(), twin[...], f"resized to {shape}, read by us")
    assert [k[len("a/") :] for k in h.store.list_prefix("a/c/")] == [
        k[len("twin/") :] for k in h.store.list_prefix("twin/c/")
    ]


def test_group_attributes_replace(open_hierarchy, tmp_path):
    _tree(tmp_path)
    h = open_hierarchy(tmp_path)
    h.replace_document(
        "g", "zarr.json", json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {"x": 2}}).encode()
    )
    assert dict(zarr.open_group(str(tmp_path / "g")).attrs) == {"x": 2}
    assert h.children("g") == ["b", "h"]


def test_create_array_over_an_existing_node_is_refused(open_hierarchy, tmp_path):
    doc = _array_with_data(tmp_path)
    h = open_hierarchy(tmp_path)
    doc["data_type"] = "float32"
    with pytest.raises(FileExistsError):
        h.create_array("a", doc)
    assert_same_values(zarr.open_array(str(tmp_path / "a"))[...], np.arange(24, dtype="<i4").reshape(6, 4), "kept")


def test_nodes_cannot_be_created_or_moved_inside_an_array(open_hierarchy, tmp_path):
    doc = _array_with_data(tmp_path)
    h = open_hierarchy(tmp_path)
    h.create_group("g")
    with pytest.raises(InvalidWriteError, match="array"):
        h.create_group("a/c")
    with pytest.raises(InvalidWriteError, match="array"):
        h.create_array("a/x/y", doc)
    with pytest.raises(InvalidWriteError, match="array"):
        h.move_node("g", "a/g")
    assert h.store.list_prefix("a/x/") == [] and h.store.get("a/c/zarr.json") is None


def test_a_node_cannot_be_moved_into_itself(open_hierarchy, tmp_path):
    _tree(tmp_path)
    with pytest.raises(InvalidWriteError):
        open_hierarchy(tmp_path).move_node("g", "g/h/g")


def test_a_group_with_children_cannot_become_an_array(open_hierarchy, tmp_path):
    _tree(tmp_path)
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    with pytest.raises(MetadataChangeError):
        open_hierarchy(tmp_path).replace_document("g", "zarr.json", json.dumps(doc).encode())
    assert isinstance(open_hierarchy(tmp_path).open_node("g"), Group)


def test_replace_document_validates_the_document_it_stores(open_hierarchy, tmp_path):
    _array_with_data(tmp_path)
    h = open_hierarchy(tmp_path)
    with pytest.raises(MetadataError):
        h.replace_document("a", ".zarray", b"not json")  # a v2 document for a v3 node
    assert h.store.get("a/.zarray") is None
    with pytest.raises(InvalidWriteError):
        h.replace_document("a", "notes.txt", b"{}")
    assert h.store.get("a/notes.txt") is None


def test_creating_over_an_unreadable_node_is_refused(open_hierarchy, tmp_path):
    _array_with_data(tmp_path)
    doc = json.loads((tmp_path / "a" / "zarr.json").read_text())
    doc["codecs"].append({"name": "frobnicate"})
    (tmp_path / "a" / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(FileExistsError):
        open_hierarchy(tmp_path).create_group("a")


def test_children_of_an_unopenable_root_are_still_listed(open_hierarchy, tmp_path):
    _tree(tmp_path, consolidate=True)
    doc = json.loads((tmp_path / "zarr.json").read_text())
    doc["extension"] = {"must_understand": True}
    (tmp_path / "zarr.json").write_text(json.dumps(doc))
    h = open_hierarchy(tmp_path)
    assert h.children("") == ["a", "g", "i"]
    with pytest.raises(UnsupportedError):
        h.open_node("")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_remote_hierarchy_shows_its_own_changes_despite_consolidated_metadata(open_hierarchy, tmp_path, zarr_format):
    _tree(tmp_path, zarr_format, consolidate=True, implicit=False)
    h = open_hierarchy(tmp_path)
    h.remote = True
    assert h.children("") == ["a", "g"]
    h.create_group("new", {"n": 1}, zarr_format=zarr_format)
    h.erase_node("a")
    h.replace_document(
        "g",
        "zarr.json" if zarr_format == 3 else ".zattrs",
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {"x": 2}}).encode()
        if zarr_format == 3
        else b'{"x": 2}',
    )
    assert h.children("") == ["g", "new"]
    assert h.open_node("g").attributes == {"x": 2}
    with pytest.raises(NodeNotFoundError):
        h.open_node("a")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_shrinking_an_array_of_a_vast_grid_erases_the_stored_chunks_outside(open_hierarchy, tmp_path, zarr_format):
    """The old grid is the metadata's to choose (2**40 chunks cost nothing to declare): the
    stored keys are what is looked at, not the grid."""
    z = zarr.create_array(
        str(tmp_path / "a"), shape=(1 << 40,), chunks=(1,), dtype="u1", fill_value=0, zarr_format=zarr_format
    )
    for i in (0, 1, 5, (1 << 40) - 1):
        z[i] = 7
    h = open_hierarchy(tmp_path)
    doc = json.loads((tmp_path / "a" / (".zarray" if zarr_format == 2 else "zarr.json")).read_text())
    doc["shape"] = [2]
    h.replace_document("a", ".zarray" if zarr_format == 2 else "zarr.json", json.dumps(doc).encode())
    assert_same_values(zarr.open_array(str(tmp_path / "a"), mode="r")[...], np.array([7, 7], "u1"), "kept")
    chunks = [k for k in h.store.list_prefix("a/") if not k.endswith((".zarray", ".zattrs", "zarr.json"))]
    assert sorted(chunks) == (["a/0", "a/1"] if zarr_format == 2 else ["a/c/0", "a/c/1"])


@pytest.mark.parametrize(("path", "named"), [("", "/zarr.json"), ("g", "/g/zarr.json")])
def test_an_unreadable_document_is_named_by_its_path(open_hierarchy, tmp_path, path, named):
    (tmp_path / path).mkdir(exist_ok=True)
    (tmp_path / path / "zarr.json").write_bytes(b"{not json")
    with pytest.raises(MetadataError, match=f"^{named} is not valid JSON"):
        open_hierarchy(tmp_path).open_node(path)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("change", ["move"])
def test_consolidated_metadata_stops_listing_a_node_before_its_documents_go(
    open_hierarchy, tmp_path, zarr_format, change, monkeypatch
):
    """A move that a crash cuts short (an object store copies, then deletes) leaves
    consolidated metadata that lists no node whose documents are gone: it is rewritten
    without the node before the store begins. (An erase is not: docs/reliability.md.)"""
    from zarrfs.format.consolidation import ConsolidatedUpkeep

    _tree(tmp_path, zarr_format, consolidate=True)
    h = open_hierarchy(tmp_path)
    h.upkeep = ConsolidatedUpkeep(h.store)
    listed_then = []

    def consolidated_nodes() -> set[str]:
        if zarr_format == 3:
            return set(json.loads((tmp_path / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"])
        return {k.rpartition("/")[0] for k in json.loads((tmp_path / ".zmetadata").read_bytes())["metadata"]}

    def crash(*args, **kwargs):  # the store's part of the change, cut short at its start
        listed_then.append(consolidated_nodes())
        raise OSError("killed")

    monkeypatch.setattr(h.store, "move" if change == "move" else "erase_prefix", crash)
    with pytest.raises(OSError):
        h.move_node("a", "renamed") if change == "move" else h.erase_node("a")
    assert "g/b" in listed_then[0] and "a" not in listed_then[0]
    h.upkeep.flush()  # the change failed: the node is there, and listed again
    assert "a" in consolidated_nodes()
