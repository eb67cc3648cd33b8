"""The decoded tree (docs/semantics.md) through a real mount, seen with `find`, `ls -R`, `cat` and
`getfattr`: a hierarchy written by zarr-python with nested groups, an implicit group, v2
and v3 nodes lists exactly its nodes and files; `info` and the extended attributes say
what zarr-python's metadata says."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402

# legacy-tool views appear where the format can show the array; they are tested elsewhere
LEGACY = {"data.tif", "data.nhdr", "data.hdr", "data.csv", "preview.png"}
ATTRIBUTES = {
    "title": 'Sea "surface" température\nline two',
    "scale": 0.5,
    "tags": ["a", "b"],
    "nested": {"x": None, "n": [1, 2.5]},
    "flag": True,
}


def write_hierarchy(root: Path) -> dict[str, zarr.Array]:
    """Groups, nested groups, an implicit group, v2 and v3 nodes; returns the arrays by path."""
    top = zarr.open_group(str(root), mode="w", attributes=ATTRIBUTES)
    b = top.create_group("a").create_group("b", attributes={"level": 2})
    arrays = {}
    arrays["a/b/temp"] = b.create_array(
        "temp",
        shape=(5, 4),
        chunks=(2, 3),
        dtype="float32",
        compressors=[zc.ZstdCodec(level=3)],
        attributes={"units": "K"},
        dimension_names=["y", "x"],
    )
    old = zarr.open_group(str(root / "old"), mode="w", zarr_format=2, attributes={"legacy": True})
    arrays["old/x"] = old.create_array("x", shape=(6,), chunks=(4,), dtype="<i2", attributes={"v": 2})
    arrays["imp/y"] = zarr.create_array(str(root / "imp" / "y"), shape=(3, 3, 2), chunks=(2, 2, 2), dtype="uint8")
    arrays["names"] = top.create_array("names", shape=(4,), chunks=(2,), dtype=str)
    arrays["scalar"] = top.create_array("scalar", shape=(), dtype="int32")
    arrays["sharded"] = top.create_array("sharded", shape=(8, 6), chunks=(2, 3), shards=(4, 6), dtype="int16")
    for array in arrays.values():
        if array.dtype == np.dtype("O") or str(array.dtype).startswith("<U") or "str" in str(array.dtype).lower():
            array[...] = np.array([f"s{i}" for i in range(math.prod(array.shape))], dtype=object).reshape(array.shape)
        else:
            array[...] = np.arange(math.prod(array.shape)).reshape(array.shape).astype(array.dtype)
    return arrays


def expected_listing(root: Path, arrays: dict[str, zarr.Array]) -> set[str]:
    """Every path below the mount root, by the contract: groups with their documents as
    stored (and dataset.nc where their arrays name dimensions), arrays with their documents,
    info, data files and one file per chunk."""
    paths: set[str] = set()

    def add(path: str) -> None:
        while path and path not in paths:
            paths.add(path)
            path = path.rpartition("/")[0]

    for document in ("zarr.json", ".zgroup", ".zattrs", ".zarray"):
        for found in root.rglob(document):
            add(found.relative_to(root).as_posix())
    for path, array in arrays.items():
        if array.metadata.zarr_format == 3 and array.metadata.dimension_names:
            add(path.rpartition("/")[0] + "/dataset.nc")  # a group of named dimensions: netCDF
        add(f"{path}/info")
        if array.dtype.kind in "OT" or "str" in str(array.dtype).lower():
            add(f"{path}/data.jsonl")
            continue
        add(f"{path}/data")
        add(f"{path}/data.npy")
        if array.shape:
            grid = [math.ceil(n / c) for n, c in zip(array.shape, array.chunks)]
            for coords in np.ndindex(*grid):
                add(f"{path}/chunks/" + "/".join(map(str, coords)))
    return paths


@pytest.fixture(scope="module")
def hierarchy(tmp_path_factory, module_mount):
    root = tmp_path_factory.mktemp("tree") / "h.zarr"
    arrays = write_hierarchy(root)
    return root, arrays, module_mount(root)


def _without_legacy(paths: set[str]) -> set[str]:
    legacy = {p for p in paths if p.rpartition("/")[2] in LEGACY}
    assert all(p.rpartition("/")[0] in ("a/b/temp", "old/x", "imp/y", "sharded") for p in legacy), legacy
    return paths - legacy


def test_find_lists_exactly_the_hierarchy(hierarchy):
    root, arrays, m = hierarchy
    out = subprocess.run(["find", ".", "-mindepth", "1"], cwd=m.path, capture_output=True, text=True, check=True)
    found = {line[2:] for line in out.stdout.splitlines()}
    assert _without_legacy(found) == expected_listing(root, arrays)


def test_ls_recursive_lists_exactly_the_hierarchy(hierarchy):
    root, arrays, m = hierarchy
    out = subprocess.run(["ls", "-R", "-A"], cwd=m.path, capture_output=True, text=True, check=True)
    found, directory = set(), ""
    for line in out.stdout.splitlines():
        if line.endswith(":") and line.startswith("."):
            directory = line[:-1].removeprefix(".").strip("/")
        elif line:
            found.add(f"{directory}/{line}" if directory else line)
    assert _without_legacy(found) == expected_listing(root, arrays)


def test_node_kinds_are_directories_and_files(hierarchy):
    _, _, m = hierarchy
    for directory in ("a", "a/b", "old", "imp", "a/b/temp", "a/b/temp/chunks", "a/b/temp/chunks/2", "scalar"):
        assert (m / directory).is_dir(), directory
    for file in ("zarr.json", "a/b/temp/data", "a/b/temp/chunks/2/1", "old/.zgroup", "old/x/.zarray"):
        assert (m / file).is_file(), file
    assert not (m / "scalar" / "chunks").exists()
    assert not (m / "a/b/temp/chunks/3").exists() and not (m / "a/b/temp/chunks/01").exists()


def test_metadata_documents_read_as_stored(hierarchy):
    root, _, m = hierarchy
    for document in (
        "zarr.json",
        "a/b/zarr.json",
        "a/b/temp/zarr.json",
        "old/.zgroup",
        "old/.zattrs",
        "old/x/.zarray",
        "old/x/.zattrs",
    ):
        assert (m / document).read_bytes() == (root / document).read_bytes(), document


def _info_fields(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        match = re.match(r"^([a-z][a-z /]*[a-z]):\s+(.*)$", line)
        if match:
            fields.setdefault(match[1], match[2])
    return fields


def _codec_words(document: dict) -> list[str]:
    """The codec's name and its scalar parameters as `key=value`."""
    if "name" in document:  # v3
        config = document.get("configuration") or {}
    else:  # v2 numcodecs: the id beside the parameters
        config = {k: v for k, v in document.items() if k != "id"}
    words = [document.get("name", document.get("id"))]
    for key, value in config.items():
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            words.append(f"{key}={value}")
    return words


@pytest.mark.parametrize("path", ["a/b/temp", "old/x", "imp/y", "sharded"])
def test_cat_info_says_what_zarr_python_metadata_says(hierarchy, path):
    _, _arrays, m = hierarchy
    array = zarr.open_array(str(hierarchy[0] / path), mode="r")
    out = subprocess.run(["cat", str(m / path / "info")], capture_output=True, text=True, check=True).stdout
    fields = _info_fields(out)
    assert fields["shape"] == str(tuple(array.shape)), out
    assert str(array.dtype).lstrip("<>|") in fields["data type"] or np.dtype(array.dtype).name in fields["data type"], (
        out
    )
    if array.shards:
        assert fields["shard shape"] == str(tuple(array.shards)), out
        assert fields["inner chunk shape"] == str(tuple(array.chunks)), out
    else:
        assert fields["chunk shape"] == str(tuple(array.chunks)), out
    if array.metadata.zarr_format == 3:
        documents = [c.to_dict() for c in array.metadata.codecs]
    else:
        documents = [f.get_config() for f in array.metadata.filters or ()] + (
            [array.metadata.compressor.get_config()] if array.metadata.compressor else []
        )
    assert documents
    for document in documents:
        for word in _codec_words(document):
            assert word in fields["codecs"], f"{word!r} not in codecs of {path}:\n{out}"


def _getfattr(path: Path) -> dict[str, bytes]:
    """`getfattr -d -m - PATH` parsed: name -> value (getfattr's text escapes undone)."""
    out = subprocess.run(
        ["getfattr", "-d", "-m", "-", "--absolute-names", str(path)], capture_output=True, check=True
    ).stdout
    values = {}
    for line in out.splitlines():
        if not line or line.startswith(b"#"):
            continue
        name, _, quoted = line.partition(b"=")
        assert quoted.startswith(b'"') and quoted.endswith(b'"'), line
        values[name.decode()] = re.sub(
            rb'\\(\\|"|[0-7]{3})',
            lambda mo: bytes([int(mo[1], 8)]) if mo[1].isdigit() else mo[1],
            quoted[1:-1],
        )
    return values


@pytest.mark.parametrize(
    ("path", "attributes"),
    [
        ("", ATTRIBUTES),
        ("a/b", {"level": 2}),
        ("a/b/temp", {"units": "K"}),
        ("old", {"legacy": True}),
        ("old/x", {"v": 2}),
        ("imp", {}),
    ],
)
def test_getfattr_shows_attributes_as_json(hierarchy, path, attributes):
    _, _, m = hierarchy
    shown = _getfattr(m / path)
    assert set(shown) == {f"user.zarr.{k}" for k in attributes}
    for key, value in attributes.items():
        assert json.loads(shown[f"user.zarr.{key}"].decode()) == value, key


def test_stat_sizes_are_exact(hierarchy):
    root, arrays, m = hierarchy
    temp = arrays["a/b/temp"]
    assert os.stat(m / "a/b/temp/data").st_size == 5 * 4 * 4
    assert os.stat(m / "a/b/temp/chunks/2/1").st_size == 2 * 3 * 4
    assert os.stat(m / "a/b/temp/zarr.json").st_size == (root / "a/b/temp/zarr.json").stat().st_size
    header = len((m / "a/b/temp/data.npy").read_bytes()) - temp.nbytes
    assert os.stat(m / "a/b/temp/data.npy").st_size == header + temp.nbytes
    assert os.stat(m / "scalar/data").st_size == 4
    info = m / "a/b/temp/info"
    assert len(info.read_bytes()) == os.stat(info).st_size
