"""Every kind of virtual file a node's directory shows beside its own documents and its
children, registered once: the names it shows and for which nodes, its size where the
metadata alone gives it, the view that reads it, and how the filesystem treats it
(written to, read at random, made again once older than the metadata ttl). The decoded
tree (fs/decoded/tree.py) asks here what a directory lists, what a name is, how large a
file is and which view reads it; it keeps no list of names of its own.

A kind's views are built in their own modules, imported with the first one made (numpy
comes with them: a mount is ready before). Adding a kind of file is its view's module and
one row of ARRAY_FILES or GROUP_FILES (docs/development.md shows one)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, cast

from .layout import data_size

if TYPE_CHECKING:
    from ..format import Array, Group
    from .base import FileView, Neighbours

DATASET_NC = "dataset.nc"  # a group's netCDF view; a child node of that name wins
OME_TIFF = "image.ome.tif"  # an OME-Zarr image group's OME-TIFF; a child node of that name wins
PREVIEW = "preview.png"  # an OME-Zarr image group's picture (and an array's); a child node wins


class Surroundings(Protocol):
    """What the tree gives a kind beyond its node: where an array's chunks are read from
    (its pending writes), what the node at `path` may consult beside it, and what a
    group's arrays make together (each kept by the tree, once per state of the group)."""

    def chunks_of(self, array: Array) -> Any:
        """Where a view reads that array's chunks (as DataView takes them)."""

    def neighbours(self, path: str) -> Neighbours:
        """What a view of the node at `path` may consult beside it (views/georef.py)."""

    def netcdf_plan(self, path: str) -> Any:
        """The plan of the group's dataset.nc (views/netcdf.py); None where it shows none."""

    def ome_image(self, path: str) -> Any:
        """The OME-Zarr image the group holds (views/ngff.py); None where it shows none."""


Node = Any  # an Array or a Group (format/): its views import numpy, this module does not


@dataclass(frozen=True)
class FileKind:
    """One kind of virtual file. `names` are those it may have; `shows(node, path,
    around)` says which of them the node's directory holds (metadata only: a listing asks
    it); `make(node, name, path, around)` builds the view; `size(node, name)` gives the
    size from the metadata alone, without building the view (None: the view is asked)."""

    names: tuple[str, ...]
    shows: Callable[[Node, str, Surroundings], Iterable[str]]
    make: Callable[[Node, str, str, Surroundings], FileView]
    size: Callable[[Node, str], int | None] = lambda node, name: None
    writable: bool = False  # a write goes to the array (fs/decoded/files.py buffers it)
    hot: bool = False  # random readers' windows go to the kernel's pages whole (fs/decoded/hot.py)
    whole: bool = False  # the one whole view of the data: its blocks are counted (not derived)
    direct: bool = False  # its length is not known ahead of the reads: never in the kernel's pages
    renewed: bool = False  # shows what is stored now: made again once older than the ttl
    follows_members: bool = False  # made again as soon as the group's arrays change


def _always(name: str) -> Callable[[Node, str, Surroundings], Iterable[str]]:
    return lambda node, path, around: (name,)


def _fixed_length(name: str) -> Callable[[Node, str, Surroundings], Iterable[str]]:
    """Shown by arrays of fixed-length types (their `data` is a flat run of elements)."""
    return lambda array, path, around: () if array.dtype.variable_length else (name,)


# ------------------------------------------------------------------ array files
def _info(node: Node, name: str, path: str, around: Surroundings) -> FileView:
    from .info import InfoView

    return InfoView(node, "/" + path, around.neighbours(path))


def _data(array: Array, name: str, path: str, around: Surroundings) -> FileView:
    from .data import DataView

    return DataView(array, around.chunks_of(array))


def _data_size(array: Array, name: str) -> int:
    return data_size(array)


def _npy(array: Array, name: str, path: str, around: Surroundings) -> FileView:
    from .npy import NpyView

    return NpyView(array, around.chunks_of(array))


def _npy_size(array: Array, name: str) -> int:
    from .npy import npy_size

    return npy_size(array)


def _jsonl(array: Array, name: str, path: str, around: Surroundings) -> FileView:
    from .jsonl import jsonl_view

    return jsonl_view(array)


# the legacy formats (views/legacy/), each shown where its rule says
def _tiff_shown(array: Array, path: str, around: Surroundings) -> Iterable[str]:
    from .legacy import shows_tiff

    return ("data.tif",) if shows_tiff(array) else ()


def _tiff(array: Array, name: str, path: str, around: Surroundings) -> FileView:
    from .legacy import tiff_view

    return tiff_view(array, around.chunks_of(array), around.neighbours(path))


def _nhdr_shown(array: Array, path: str, around: Surroundings) -> Iterable[str]:
    from .legacy import shows_nhdr

    return ("data.nhdr",) if shows_nhdr(array) else ()


def _nhdr(array: Array, name: str, path: str, around: Surroundings) -> FileView:
    from .legacy import nhdr_view

    return nhdr_view(array, around.neighbours(path))


def _hdr_shown(array: Array, path: str, around: Surroundings) -> Iterable[str]:
    from .legacy import shows_hdr

    return ("data.hdr",) if shows_hdr(array) else ()


def _hdr(array: Array, name: str, path: str, around: Surroundings) -> FileView:
    from .legacy.envi import hdr_view

    return hdr_view(array)


def _csv_shown(array: Array, path: str, around: Surroundings) -> Iterable[str]:
    from .legacy import shows_csv

    return ("data.csv",) if shows_csv(array) else ()


def _csv(array: Array, name: str, path: str, around: Surroundings) -> FileView:
    from .legacy.csv import CsvView

    return CsvView(array, around.chunks_of(array))


def _csv_size(array: Array, name: str) -> int:
    from .legacy.csv import csv_size

    return csv_size(array)


def _preview_shown(array: Array, path: str, around: Surroundings) -> Iterable[str]:
    from .preview import picture_axes

    return (PREVIEW,) if picture_axes(array) is not None else ()


def _preview(array: Array, name: str, path: str, around: Surroundings) -> FileView:
    from .preview import array_preview

    return array_preview(array, around.chunks_of(array), around.neighbours(path))


def _preview_size(array: Array, name: str) -> int | None:
    from .preview import preview_size

    return preview_size(array)


ARRAY_FILES: tuple[FileKind, ...] = (
    FileKind(("info",), _always("info"), _info, direct=True, renewed=True),
    FileKind(
        ("data.jsonl",),
        lambda array, path, around: ("data.jsonl",) if array.dtype.variable_length else (),
        _jsonl,
        whole=True,
        direct=True,
    ),
    FileKind(("data",), _fixed_length("data"), _data, _data_size, writable=True, hot=True, whole=True),
    FileKind(("data.npy",), _fixed_length("data.npy"), _npy, _npy_size, hot=True),
    # (data.tif's size is not the metadata's alone: its georeferencing tags depend on the array's neighbours)
    FileKind(("data.tif",), _tiff_shown, _tiff),
    FileKind(("data.nhdr",), _nhdr_shown, _nhdr),
    FileKind(("data.hdr",), _hdr_shown, _hdr),
    FileKind(("data.csv",), _csv_shown, _csv, _csv_size),
    FileKind((PREVIEW,), _preview_shown, _preview, _preview_size),
)


# ------------------------------------------------------------------ group files
def _netcdf_shown(group: Group, path: str, around: Surroundings) -> Iterable[str]:
    return (DATASET_NC,) if around.netcdf_plan(path) is not None else ()


def _netcdf(group: Group, name: str, path: str, around: Surroundings) -> FileView:
    from .netcdf import NetcdfView

    return NetcdfView(around.netcdf_plan(path), around.chunks_of)


def _image_shown(name: str) -> Callable[[Node, str, Surroundings], Iterable[str]]:
    return lambda group, path, around: (name,) if around.ome_image(path) is not None else ()


def _ome_tiff(group: Group, name: str, path: str, around: Surroundings) -> FileView:
    from .ometiff import ome_tiff_view

    return ome_tiff_view(around.ome_image(path), around.chunks_of)


def _image_preview(group: Group, name: str, path: str, around: Surroundings) -> FileView:
    from .preview import image_preview

    return image_preview(around.ome_image(path), group.attributes, around.chunks_of)


GROUP_FILES: tuple[FileKind, ...] = (
    FileKind((DATASET_NC,), _netcdf_shown, _netcdf, renewed=True, follows_members=True),
    FileKind((OME_TIFF,), _image_shown(OME_TIFF), _ome_tiff, renewed=True),
    FileKind((PREVIEW,), _image_shown(PREVIEW), _image_preview, renewed=True),
)


GROUP_FILE_NAMES = frozenset(name for kind in GROUP_FILES for name in kind.names)


# ------------------------------------------------------------------ views of the whole hierarchy
class TreeLayout(Protocol):
    """What a view of the whole hierarchy in another layout says of each node (the module
    of views/ that a TreeKind names; views/zarr_v2.py for v2)."""

    WHOLE: str  # the name of the root's document of every node shown (made again once older than the ttl)

    def left_out(self, array: Array) -> str | None:
        """Why the array is not in the view (None where it is)."""

    def document_names(self, node: Node, root: bool) -> list[str]:
        """The documents of the node's directory there, in order (`root`: the view's root)."""

    def documents(self, node: Node) -> dict[str, Any]:
        """The node's documents by name, each as `render` takes it."""

    def render(self, document: Any) -> bytes: ...

    def consolidated(self, nodes: Iterable[tuple[str, Node]]) -> bytes:
        """The document WHOLE of these nodes, by their paths from the view's root."""

    def chunk_name(self, coords: tuple[int, ...]) -> str: ...

    def chunk_coords(self, name: str, grid: tuple[int, ...]) -> tuple[int, ...] | None:
        """The chunk a file name names in the grid (None where it names none)."""


@dataclass(frozen=True)
class TreeKind:
    """A view of the whole hierarchy in another layout: the directory `name` of /.zarrfs/,
    read-only, its nodes' directories at their paths below it, an array's holding its
    chunk files (each what `chunks/` shows). `layout()` imports the module that says what
    each node shows there (numpy comes with it); fs/decoded/tree_views.py serves it."""

    name: str
    layout: Callable[[], TreeLayout]


def _zarr_v2() -> TreeLayout:
    from . import zarr_v2

    return cast("TreeLayout", zarr_v2)


TREES: tuple[TreeKind, ...] = (TreeKind("v2", _zarr_v2),)


def tree_kind(name: str) -> TreeKind | None:
    return next((kind for kind in TREES if kind.name == name), None)


# ------------------------------------------------------------------ asking
def kinds_of(node: Node) -> tuple[FileKind, ...]:
    return GROUP_FILES if isinstance(node, _group_class()) else ARRAY_FILES


@cache
def _group_class() -> type[Group]:
    """The format's Group, imported once it is first asked for (a walk asks per entry)."""
    from ..format import Group

    return Group


def kind_of(node: Node, name: str) -> FileKind | None:
    """The kind a file `name` of the node's directory would be (whether shown or not);
    None for a name no kind has (a document, a child, a store key)."""
    for kind in kinds_of(node):
        if name in kind.names:
            return kind
    return None


def shown(node: Node, path: str, around: Surroundings) -> list[str]:
    """The names of the files of these kinds that the node's directory holds, in order."""
    return [name for kind in kinds_of(node) for name in kind.shows(node, path, around)]


def chunk_view(array: Array, coords: tuple[int, ...], chunks_of: Callable[[Array], Any]) -> FileView:
    """The file `chunks/<coords>`: one decoded chunk (views/chunk.py), read where
    `chunks_of` says the array's chunks are."""
    from .chunk import ChunkView

    return ChunkView(array, coords, chunks_of(array))


def chunk_size(array: Array, coords: tuple[int, ...]) -> int:
    from .chunk import chunk_size

    return chunk_size(array, coords)


def size(node: Node, name: str) -> int | None:
    """The size of the file `name` of the node when the metadata alone gives it, without
    building the view (a listing tells the kernel every file's size: `ls -l` of an array
    directory builds none of its views); else None. Each is computed by the very function
    the view's own `size` calls, so a later read returns exactly that many bytes."""
    if name in node.documents:
        return len(node.documents[name])
    kind = kind_of(node, name)
    return None if kind is None else kind.size(node, name)


def by_name(name: str) -> FileKind | None:
    """The kind of an array's file `name`, else of a group's; None for a name no kind has.
    (For what a file's name alone settles: how its opens are read.)"""
    return next((k for k in (*ARRAY_FILES, *GROUP_FILES) if name in k.names), None)
