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
