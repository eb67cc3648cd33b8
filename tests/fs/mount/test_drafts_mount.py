"""Pre-final Zarr v3 draft layouts mounted through the command line: the 2019–2021 corpus
`zarrita.zr3` shows the same decoded tree as its v2 copy (every array's `data` and every
chunk file), the 2022 draft's examples read as written, nodes the drafts say to refuse
fail with EIO beside readable siblings, and the mount is read-only from the start."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

from tests.format.draft_fixtures import (
    CORPUS_2019,
    CORPUS_ARRAYS,
    CORPUS_CODECS,
    CORPUS_V2,
    REFUSED_2022,
    write_draft_2022,
)

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def zarr_python_image(path: str) -> np.ndarray:
    return np.asarray(zarr.open_array(str(CORPUS_V2 / CORPUS_ARRAYS[path]), mode="r")[...])


@pytest.fixture(scope="module")
def corpus(module_mount):
    return module_mount(CORPUS_2019)


@pytest.fixture(scope="module")
def draft_2022(module_mount, tmp_path_factory):
    root = tmp_path_factory.mktemp("draft2022")
    expected = write_draft_2022(root)
    return module_mount(root), expected


# ------------------------------------------------------------ 2019–2021: the corpus


def test_ls_shows_blosc_as_a_group_and_lz4_as_an_array(corpus):
    assert sorted(os.listdir(corpus.path)) == ["blosc", "gzip", "raw", "zarr.json", "zlib"]
    assert os.listdir(corpus / "blosc") == ["lz4"]
    assert {"array.json", "chunks", "data", "data.npy", "info"} <= set(os.listdir(corpus / "blosc/lz4"))
    assert (corpus / "blosc").is_dir() and (corpus / "blosc/lz4/chunks").is_dir()
    assert (corpus / "zarr.json").read_bytes() == (CORPUS_2019 / "zarr.json").read_bytes()
    assert (corpus / "blosc/lz4/array.json").read_bytes() == (
        CORPUS_2019 / "meta/root/blosc/lz4.array.json"
    ).read_bytes()


@pytest.mark.parametrize("path", list(CORPUS_ARRAYS))
def test_corpus_data_equals_the_v2_copy_read_by_zarr_python(corpus, path):
    expected = zarr_python_image(path)
    assert (corpus / path / "data").read_bytes() == expected.tobytes()
    assert np.array_equal(np.load(corpus / path / "data.npy", mmap_mode="r"), expected)


@pytest.mark.parametrize("path", list(CORPUS_ARRAYS))
def test_corpus_chunk_files_are_the_stored_chunks_with_overhanging_edges(corpus, path):
    expected = zarr_python_image(path)
    codec = CORPUS_CODECS[path]
    assert sorted(os.listdir(corpus / path / "chunks"), key=int) == [str(i) for i in range(6)]
    for i in range(6):
        for j in range(6):
            for k in range(3):
                ours = (corpus / path / f"chunks/{i}/{j}/{k}").read_bytes()
                stored = (CORPUS_2019 / "data/root" / path / f"c{i}/{j}/{k}").read_bytes()
                assert ours == (stored if codec is None else bytes(codec.decode(stored))), (i, j, k)
                chunk = np.frombuffer(ours, dtype="u1").reshape(100, 100, 1)
                inside = expected[i * 100 : (i + 1) * 100, j * 100 : (j + 1) * 100, k : k + 1]
                assert np.array_equal(chunk[: inside.shape[0], : inside.shape[1]], inside), (i, j, k)


def test_corpus_info_names_the_draft(corpus):
    text = (corpus / "gzip/info").read_text()
    assert "format:             Zarr v3 draft (2019–2021 core protocol)" in text
    assert "gzip(level=1)" in text


# ------------------------------------------------------------ 2022: the draft's examples


def test_2022_tree_has_explicit_and_implicit_groups(draft_2022):
    mount, _ = draft_2022
    assert sorted(os.listdir(mount.path)) == ["datetimes", "foo", "fortran", "refused", "specials", "zarr.json"]
    assert sorted(os.listdir(mount / "foo")) == ["bar", "baz"]
    assert os.listdir(mount / "foo/bar") == ["group.json"]
    assert json.loads((mount / "foo/bar/group.json").read_text()) == {"attributes": {"spam": "ham", "eggs": 42}}
    assert os.listdir(mount / "foo/baz") == ["qux"]


@pytest.mark.parametrize("path", ["foo/baz/qux", "datetimes", "fortran", "specials"])
def test_2022_array_data_is_what_was_written(draft_2022, path):
    mount, expected = draft_2022
    assert (mount / path / "data").read_bytes() == expected[path].tobytes()


def test_2022_refused_nodes_fail_with_eio_beside_readable_siblings(draft_2022):
    mount, _ = draft_2022
    assert sorted(os.listdir(mount / "refused")) == sorted(REFUSED_2022)
    for name in REFUSED_2022:
        with pytest.raises(OSError) as info:
            os.listdir(mount / "refused" / name)
        assert info.value.errno == errno.EIO, name
    assert (mount / "foo/baz/qux/data").stat().st_size == 20 * 10 * 8
    assert "must be understood" in mount.log_text()


# ------------------------------------------------------------ read-only


def test_writes_fail_with_erofs_and_leave_the_store_unchanged(mount, tmp_path):
    root = tmp_path / "copy.zr3"
    shutil.copytree(CORPUS_2019, root)
    before = sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    m = mount(root)
    assert "pre-final Zarr v3 draft layout" in m.log_text()
    attempts = [
        ["touch", str(m / "new")],
        ["mkdir", str(m / "newgroup")],
        ["sh", "-c", f"printf abc > {m / 'raw/data'}"],
        ["sh", "-c", f"printf abc > {m / 'raw/chunks/0/0/0'}"],
        ["rm", str(m / "raw/chunks/0/0/0")],
        ["mv", str(m / "gzip"), str(m / "moved")],
    ]
    for command in attempts:
        result = subprocess.run(command, capture_output=True, text=True)
        assert result.returncode != 0 and "Read-only file system" in result.stderr, command
    with pytest.raises(OSError) as info:
        os.open(m / "raw/data", os.O_WRONLY)
    assert info.value.errno == errno.EROFS
    m.unmount()
    after = sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    assert after == before
    lines = [line for line in m.log_text().splitlines() if "read-only" in line]
    assert len(lines) == 1 and "reads but does not write" in lines[0]
