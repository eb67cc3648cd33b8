"""The catalogue of virtual files (zarrfs/views/catalogue.py) without a kernel: a kind of
file registered there, and nowhere else, is listed, looked up, sized from the metadata
and read by the decoded core, for the arrays it says show it and for no others; a read
of it returns the very bytes its listed size promised."""

from __future__ import annotations

import errno
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import pytest

from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.fs.errors import FsError
from zarrfs.store import open_store
from zarrfs.views import catalogue
from zarrfs.views.base import BytesView

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def _shape_text(array) -> bytes:
    return ("x".join(map(str, array.shape)) + "\n").encode()


# the example of docs/development.md (`shape.txt`), here shown by arrays of two or more dimensions
SHAPE_TXT = catalogue.FileKind(
    ("shape.txt",),
    lambda array, path, around: ("shape.txt",) if len(array.shape) > 1 else (),
    lambda array, name, path, around: BytesView(lambda: _shape_text(array), cheap=True),
    lambda array, name: len(_shape_text(array)),
)


@pytest.fixture
def core(tmp_path, monkeypatch):
    monkeypatch.setattr(catalogue, "ARRAY_FILES", (*catalogue.ARRAY_FILES, SHAPE_TXT))
    root = zarr.open_group(str(tmp_path / "s"), mode="w")
    root.create_array("image", shape=(30, 400), chunks=(10, 100), dtype="uint8")
    root.create_array("line", shape=(7,), chunks=(7,), dtype="int16")
    with ThreadPoolExecutor(2) as pool:
        context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
        core = DecodedCore(open_hierarchy(open_store(str(tmp_path / "s")), context, metadata_ttl=0))
        yield core
        core.close()


def test_a_kind_registered_in_the_catalogue_alone_is_listed_looked_up_sized_and_read(core):
    listed = dict(core.list_dir("image"))
    assert "shape.txt" in listed and listed["shape.txt"].size == len(b"30x400\n")
    assert not listed["shape.txt"].writable and listed["shape.txt"].derived
    assert core.lookup("image/shape.txt").size == len(b"30x400\n")
    file = core.open("image/shape.txt", os.O_RDONLY)
    assert file.read(0, 100) == b"30x400\n"
    file.release()
    # the arrays it does not show have no such file
    assert "shape.txt" not in dict(core.list_dir("line"))
    assert core.lookup("line/shape.txt") is None
    # not `writable` in its row: an open for writing is refused
    with pytest.raises(FsError) as refused:
        core.open("image/shape.txt", os.O_WRONLY)
    assert refused.value.errno == errno.EACCES


def test_the_listed_size_of_every_kind_is_what_a_read_returns(core):
    for name, attributes in core.list_dir("image"):
        if attributes.is_dir:
            continue
        file = core.open(f"image/{name}", os.O_RDONLY)
        content = b""
        while part := file.read(len(content), 1 << 20):
            content += bytes(part)
        file.release()
        assert len(content) == attributes.size, name


class _Listing:
    """A layout of the whole hierarchy registered in the test alone: each node's directory
    holds `kind` (its kind, as a line) and the root `all` (every node's path); an array's
    chunk files are named `c<i>_<j>...`; arrays of one dimension are left out."""

    WHOLE = "all"

    @staticmethod
    def left_out(array):
        return "one dimension" if len(array.shape) < 2 else None

    @staticmethod
    def document_names(node, root):
        return ["kind", "all"] if root else ["kind"]

    @staticmethod
    def documents(node):
        return {"kind": type(node).__name__}

    @staticmethod
    def render(document):
        return (document + "\n").encode()

    @staticmethod
    def consolidated(nodes):
        return "".join(f"/{path}\n" for path, _ in nodes).encode()

    @staticmethod
    def chunk_name(coords):
        return "c" + "_".join(map(str, coords))

    @staticmethod
    def chunk_coords(name, grid):
        parts = name[1:].split("_") if name.startswith("c") else []
        if len(parts) != len(grid) or not all(p.isdigit() and int(p) < n for p, n in zip(parts, grid)):
            return None
        return tuple(map(int, parts))


def test_a_view_of_the_whole_hierarchy_registered_in_the_catalogue_alone_is_served(core, monkeypatch):
    monkeypatch.setattr(catalogue, "TREES", (*catalogue.TREES, catalogue.TreeKind("plain", lambda: _Listing)))
    assert {"v2", "plain"} <= {name for name, _ in core.list_dir(".zarrfs")}
    assert sorted(name for name, _ in core.list_dir(".zarrfs/plain")) == ["all", "image", "kind"]
    chunk_files = [name for name, _ in core.list_dir(".zarrfs/plain/image") if name.startswith("c")]
    assert len(chunk_files) == 3 * 4 and "c2_3" in chunk_files
    for path, content in [(".zarrfs/plain/kind", b"Group\n"), (".zarrfs/plain/image/kind", b"Array\n")]:
        assert core.lookup(path).size == len(content)
        file = core.open(path, os.O_RDONLY)
        assert file.read(0, 100) == content
        file.release()
    file = core.open(".zarrfs/plain/all", os.O_RDONLY)
    assert file.read(0, 100) == b"/\n/image\n"  # (line, of one dimension, left out)
    file.release()
    # a chunk file is the chunk `chunks/` shows
    chunk = core.open(".zarrfs/plain/image/c2_3", os.O_RDONLY)
    shown = core.open("image/chunks/2/3", os.O_RDONLY)
    assert chunk.read(0, 1 << 20) == shown.read(0, 1 << 20) and core.lookup(".zarrfs/plain/image/c2_3").size == 1000
    chunk.release()
    shown.release()
    assert core.lookup(".zarrfs/plain/line") is None and core.lookup(".zarrfs/plain/image/c3_0") is None
    with pytest.raises(FsError) as refused:
        core.create(".zarrfs/plain/new.npy")
    assert refused.value.errno == errno.EROFS
