"""The `info` file: a short human-readable summary of a node (docs/semantics.md), rendered on read.
Rendering lists the array's stored chunks, so the fs layer calls it from a worker thread;
its size is known without that listing (InfoView)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ..format import Array, Group
from ..format.drafts import DIALECT_NAMES
from ..store import StoreError
from . import ometiff, zarr_v2
from .base import BytesView, FileView, Neighbours
from .conventions import parse_conventions
from .georef import Georeference, describe, georeference, overview_levels
from .info_text import array_data_type, codec_chain, count_text, format_fill_value, json_line, v2_codec_chain
from .netcdf import narrowed, read_values
from .ngff import Image, NotAnImage, collection_line, image_of
from .preview import NAME as PREVIEW
from .preview import PreviewView, array_preview, image_preview, picture_axes

if TYPE_CHECKING:
    from ..format.chunk_grid import RectilinearChunkGrid
    from ..format.metadata import ArrayMetadata, GroupMetadata


log = logging.getLogger(__name__)

# attributes beyond this many bytes of pretty JSON are cut at a line boundary
ATTRIBUTES_LIMIT = 4096
_LABEL_WIDTH = 18


class InfoView(FileView):
    """`info`, whose size is known without listing the store: the stored-chunk figures
    are right-aligned to the widest they can be, so the text is as long before they are
    counted as after. They are counted (one listing) when the file is first read."""

    def __init__(self, node: Array | Group, path: str, neighbours: Neighbours | None = None) -> None:
        self._node, self._path = node, path
        self._size: int | None = None
        # what the views carry, as the array's neighbours say: metadata alone, but theirs
        self._views: _ViewLines | _ImageLines | None = None
        if isinstance(node, Array) and neighbours is not None:
            self._views = _ViewLines(node, neighbours)
        elif neighbours is not None:
            self._views = _ImageLines(node, path, neighbours)
        self._content = BytesView(self._render)

    def _render(self) -> bytes:
        return (render_info(self._node, self._path) + self._views_text(True)).encode()

    def text(self) -> str:
        return self._content.content().decode()

    def _views_text(self, resolved: bool) -> str:
        return self._views.text(resolved) if self._views is not None else ""

    def size(self) -> int:
        if self._size is None:
            self._size = info_size(self._node, self._path) + len(self._views_text(False).encode())
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        return self._content.read(offset, size)

    def read_cached(self, offset: int, size: int) -> bytes | None:
        return self._content.read_cached(offset, size)


class _ViewLines:
    """`info`'s lines on what the views carry from the conventions (the georeferencing of
    `data.tif` and its overviews, the array's place in its group's `dataset.nc`), found once. Lines whose
    values need chunks (a transform read from coordinates) are as long before as after."""

    def __init__(self, array: Array, neighbours: Neighbours) -> None:
        self._array, self._neighbours = array, neighbours
        self._found: tuple[Any, ...] | None = None
        self._preview: PreviewView | None = None

    def text(self, resolved: bool) -> str:
        if self._found is None:  # (two threads may both look: they find the same)
            found = georeference(self._array, self._neighbours)
            levels = overview_levels(self._array, found, self._neighbours) if isinstance(found, Georeference) else []
            self._found = (found, levels, _netcdf_line(self._array, self._neighbours))
        found, levels, netcdf = self._found
        lines = describe(found, resolved) if found is not None else []
        if levels:
            lines.append(
                ("overviews", ", ".join(f"/{a.path} ({a.shape[found.x_dim]}x{a.shape[found.y_dim]})" for a in levels))
            )
        if netcdf is not None:
            lines.append(("dataset.nc", netcdf))
        if self._preview is None and picture_axes(self._array) is not None:
            self._preview = array_preview(self._array, self._neighbours.chunks_of(self._array), self._neighbours)
        if self._preview is not None:
            lines.append((PREVIEW, self._preview.describe(resolved)))
        lines.append(("zarr v2 view", zarr_v2.info_line(self._array, self._neighbours.path)))
        return _printable("".join(_field(label, value) + "\n" for label, value in lines))


class _ImageLines:
    """`info`'s lines on what a group's `image.ome.tif` says (its OME-XML), or why it has
    none, or where a plate's, a well's or a labels group's images are."""

    def __init__(self, group: Group, path: str, neighbours: Neighbours) -> None:
        self._group, self._path, self._neighbours = group, path.strip("/"), neighbours
        self._text: str | None = None
        self._preview: PreviewView | None = None

    def text(self, resolved: bool) -> str:
        if self._text is None:
            lines = []
            image = image_of(self._group, self._path, self._neighbours)
            if isinstance(image, Image):
                lines = ometiff.describe(image)
                self._preview = image_preview(image, self._group.attributes, self._neighbours.chunks_of)
            elif isinstance(image, NotAnImage):
                lines = [(ometiff.NAME, "none: " + image.reason)]
            collection = collection_line(self._group.attributes)
            if collection is not None:
                lines.append(("OME-Zarr", collection))
            self._text = _printable("".join(_field(label, value) + "\n" for label, value in lines))
        if self._preview is None:
            return self._text
        return self._text + _printable(_field(PREVIEW, self._preview.describe(resolved)) + "\n")


def _netcdf_line(array: Array, neighbours: Neighbours) -> str | None:
    """Whether the array is a variable of its group's dataset.nc, or why it is left out."""
    plan = neighbours.netcdf_plan()
    if plan is None or not plan.shown:
        return None
    name = array.path.rpartition("/")[2]
    variable = plan.by_name.get(name)
    if (variable is None and name not in plan.left_out) or (variable is not None and variable.path != array.path):
        return None  # not one of the group's arrays (as last listed)
    if name in plan.left_out:
        return f"left out: {plan.left_out[name]}"
    plan = narrowed(plan, lambda a: read_values(a, neighbours.chunks_of(a)))
    form = "CDF-5" if plan.version == 5 else "64-bit offset"
    return f"variable {name!r} (netCDF-3 {form}{': ' + plan.why if plan.why else ''})"


# length of the text after the path line, by what the node is made of: the nodes of a
# hierarchy are often alike, and a listing asks for the size of every array's `info`
_rest_sizes: dict[tuple[Any, ...], int] = {}
_REST_SIZES_KEPT = 1024
_REST_SIZES_DOCUMENT = 64 << 10  # nodes of larger documents are measured each time


def info_size(node: Array | Group, path: str) -> int:
    """len(render_info(node, path, count_stored=False).encode()): the path line, then the
    rest, which the node's documents alone decide, measured once for nodes alike."""
    path_size = len(_printable(_field("path", "/" + path.strip("/")) + "\n").encode())
    key = (type(node), getattr(node, "implicit", False), tuple(sorted(node.documents.items())))
    if sum(len(raw) for _, raw in key[2]) > _REST_SIZES_DOCUMENT:  # not kept alive here
        return len(render_info(node, path, count_stored=False).encode())
    rest = _rest_sizes.get(key)
    if rest is None:
        rest = len(render_info(node, path, count_stored=False).encode()) - path_size
        if len(_rest_sizes) >= _REST_SIZES_KEPT:
            _rest_sizes.clear()
        _rest_sizes[key] = rest
    return path_size + rest


def render_info(node: Array | Group, path: str, count_stored: bool = True) -> str:
    """The `info` text of the array or group `node` found at `path`. Without
    `count_stored`, the stored-chunk figures are blanks of the same width."""
    where = "/" + path.strip("/")
    lines = _array_lines(node, where, count_stored) if isinstance(node, Array) else _group_lines(node, where)
    document = _attributes_document(node)
    attributes = node.metadata.attributes  # (parsed here, where they are kept as JSON)
    lines += _convention_lines(attributes)
    lines += _attribute_lines(attributes, document)
    return _printable("\n".join(lines) + "\n")


# ------------------------------------------------------------------ nodes


def _array_lines(array: Array, where: str, count_stored: bool) -> list[str]:
    m = array.metadata
    lines = [
        _field("path", where),
        _field("node type", "array"),
        _field("format", _format_name(m)),
        _field("shape", _tuple(m.shape)),
        _field("data type", array_data_type(array)),
        _field("fill value", format_fill_value(m.fill_value, m.dtype.numpy, m.dtype.kind)),
    ]
    if array.sharding is not None:
        if array.stored_grid.regular:
            lines.append(_field("shard shape", _tuple(array.stored_grid.chunk_shape)))
        else:
            lines.append(_field("shard sizes", _edge_sizes(array.stored_grid)))
        lines.append(_field("inner chunk shape", _tuple(array.chunk_grid.chunk_shape)))
        lines.append(
            _field(
                "chunk grid",
                (
                    f"{_tuple(array.chunk_grid.grid_shape)}, {count_text(array.chunk_grid.chunk_count, 'inner chunk')}"
                    f" in {_tuple(array.stored_grid.grid_shape)}, {count_text(array.stored_grid.chunk_count, 'shard')}"
                ),
            )
        )
    else:
        if array.chunk_grid.regular:
            lines.append(_field("chunk shape", _tuple(m.chunk_shape)))
        else:
            lines.append(_field("chunk sizes", _edge_sizes(array.chunk_grid)))
        lines.append(
            _field(
                "chunk grid",
                f"{_tuple(array.chunk_grid.grid_shape)}, {count_text(array.chunk_grid.chunk_count, 'chunk')}",
            )
        )
    keys = m.chunk_key_encoding
    lines.append(_field("chunk key encoding", f"{keys.name}, separator {keys.separator!r}"))
    if m.zarr_format == 2:
        lines.append(_field("codecs", v2_codec_chain(m.filters, m.compressor)))
        lines.append(_field("memory order", m.order))
    else:
        lines.append(_field("codecs", codec_chain(m.codecs)))
    if m.dimension_names is not None:
        lines.append(_field("dimension names", json_line(list(m.dimension_names))))
    if not m.dtype.variable_length:
        lines.append(_field("data size", _bytes(m.size * m.dtype.itemsize)))
    lines += _stored_lines(array, count_stored)
    return lines


def _edge_sizes(grid: RectilinearChunkGrid) -> str:
    """A rectilinear grid's chunk sizes, per dimension in run-length form (a size, or
    [size, count]): those of the chunks that overlap the array."""
    return "rectilinear " + json_line([edges.json() for edges in grid.edges])


def _group_lines(group: Group, where: str) -> list[str]:
    lines = [_field("path", where), _field("node type", "group")]
    if group.implicit:
        lines.append(_field("format", "implicit group (a prefix that holds nodes, no metadata document)"))
    else:
        lines.append(_field("format", _format_name(group.metadata)))
    return lines


def _format_name(metadata: ArrayMetadata | GroupMetadata) -> str:
    """`Zarr v3`, `Zarr v2`, or which pre-final v3 draft the node's layout follows."""
    return DIALECT_NAMES.get(metadata.dialect, f"Zarr v{metadata.zarr_format}")


def _attributes_document(node: Array | Group) -> str:
    """The file that holds the node's attributes."""
    if node.metadata.zarr_format == 2:
        return ".zattrs"
    if node.metadata.dialect in DIALECT_NAMES:
        return "array.json" if isinstance(node, Array) else "group.json"
    return "zarr.json"


def _stored_lines(array: Array, count: bool) -> list[str]:
    """Stored objects and bytes, each right-aligned to the widest it can be (so that the
    text's length does not depend on them; a hostile store's oversized objects aside)."""
    what = "shards stored" if array.sharding is not None else "chunks stored"
    total = array.stored_grid.chunk_count
    count_width = 2 * len(str(total)) + 3
    bytes_width = len(f"{total * array.pipeline.max_encoded_size:,} bytes (1024.0 TiB)")
    if not count:
        return [_field(what, " " * count_width), _field("bytes stored", " " * bytes_width)]
    try:
        stored, size = array.stored_chunks()
    except (StoreError, OSError) as exc:
        # a failing listing costs these two lines, not the whole file
        log.warning("info of /%s: cannot list stored chunks: %s", array.path, exc)
        return [_field(what, "unknown".rjust(count_width)), _field("bytes stored", "unknown".rjust(bytes_width))]
    return [
        _field(what, f"{stored} / {total}".rjust(count_width)),
        _field("bytes stored", _bytes(size).rjust(bytes_width)),
    ]


def _convention_lines(attributes: dict[str, Any]) -> list[str]:
    conventions, problems = parse_conventions(attributes)
    if not conventions and not problems:
        return []
    lines = ["conventions:"]
    lines += [f"  {' '.join(filter(None, (c.display_name, c.version)))} ({c.identifier})" for c in conventions]
    lines += [f"  malformed: {p}" for p in problems]
    return lines


def _attribute_lines(attributes: dict[str, Any], document: str) -> list[str]:
    if not attributes:
        return [_field("attributes", "none")]
    text = _printable(json.dumps(attributes, indent=2, ensure_ascii=False))
    size = len(text.encode())
    if size > ATTRIBUTES_LIMIT:
        kept, used = [], 0
        for line in text.splitlines():
            used += len(line.encode()) + 1
            if used > ATTRIBUTES_LIMIT:
                break
            kept.append(line)
        shown = "\n".join(kept)
        text = f"{shown}\n... {size - len(shown.encode())} more bytes; the whole document is in {document}"
    return ["attributes:"] + ["  " + line for line in text.splitlines()]


# ------------------------------------------------------------------ layout


def _field(label: str, value: str) -> str:
    return f"{label + ':':<{_LABEL_WIDTH + 1}} {value}"


def _tuple(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _bytes(n: int) -> str:
    """`1,234,567 bytes (1.2 MiB)`."""
    if n < 1024:
        return f"{n:,} bytes"
    scaled, units = n / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while scaled >= 1024 and len(units) > 1:
        scaled /= 1024
        units.pop(0)
    return f"{n:,} bytes ({scaled:.1f} {units[0]})"


def _printable(text: str) -> str:
    """Escape what a terminal would act on or UTF-8 cannot hold (control and format
    characters, lone surrogates from JSON), keeping newlines and readable Unicode."""
    if text.replace("\n", "").isprintable():  # (the common case, at C speed)
        return text
    return "".join(
        c if c.isprintable() or c == "\n" else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}"
        for c in text
    )
