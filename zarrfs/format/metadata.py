"""Node metadata: parse and validate Zarr v3 `zarr.json` and Zarr v2 `.zarray`/`.zgroup`/
`.zattrs` documents into frozen dataclasses, and build new documents. Data types and fill
values (numpy) are imported with the first array document: groups need neither."""

from __future__ import annotations

import functools
import json
import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from .chunk_grid import ChunkKeyEncoding
from .errors import MetadataError, UnsupportedError

if TYPE_CHECKING:
    from .dtypes import DataType
    from .fill_values import ByteOrder

# the documents a node's metadata is stored in (v3; v2 array, group, attributes)
METADATA_NAMES = ("zarr.json", ".zarray", ".zgroup", ".zattrs")

_V3_ARRAY_FIELDS = {
    "zarr_format",
    "node_type",
    "shape",
    "data_type",
    "chunk_grid",
    "chunk_key_encoding",
    "fill_value",
    "codecs",
    "attributes",
    "dimension_names",
    "storage_transformers",
}
_V3_GROUP_FIELDS = {"zarr_format", "node_type", "attributes", "consolidated_metadata"}
# Hostile documents (docs/errors.md): deeper nesting than this is refused, so that nothing that
# renders a document later (info, xattrs, consolidated metadata) runs out of stack, and
# an array or chunk of more bytes than this is refused, so that no size overflows.
MAX_JSON_DEPTH = 128
MAX_ARRAY_BYTES = 1 << 62


@functools.cache
def _max_ndim() -> int:
    """The most dimensions numpy supports."""
    import numpy as np

    for ndim in (64, 32):  # numpy 2 and numpy 1
        try:
            np.empty((1,) * ndim, dtype="u1")
            return ndim
        except ValueError:
            continue
    return 32


# The attributes of a document longer than this are kept as JSON (compact) and parsed each
# time they are asked for: parsed, JSON costs 8 to 20 times its bytes in Python objects, and
# every node opened is kept (docs/errors.md, Bounded memory). Smaller ones are kept parsed.
ATTRIBUTES_KEPT_PARSED = 64 << 10


def kept_attributes(attributes: dict[str, Any], document_size: int) -> dict[str, Any] | bytes:
    """What a node's metadata keeps of the attributes of a document of `document_size`
    bytes (0: one held parsed elsewhere, as consolidated metadata is); `KeepsAttributes.attributes`
    gives them back."""
    if document_size <= ATTRIBUTES_KEPT_PARSED or not attributes:
        return attributes
    return json.dumps(attributes, separators=(",", ":"), ensure_ascii=False).encode()


class KeepsAttributes:
    """The attributes of a node's metadata, kept parsed or as their JSON (kept_attributes)."""

    kept_attributes: dict[str, Any] | bytes

    @property
    def attributes(self) -> dict[str, Any]:
        kept = self.kept_attributes
        return json.loads(kept) if isinstance(kept, bytes) else kept


@dataclass(frozen=True)
class GroupMetadata(KeepsAttributes):
    zarr_format: int
    kept_attributes: dict[str, Any] | bytes = field(default_factory=dict, compare=False, repr=False)
    # path (relative to this group) -> metadata document, when consolidated metadata exists
    consolidated: dict[str, Any] | None = field(default=None, compare=False)
    dialect: str = "v3"


@dataclass(frozen=True)
class ArrayMetadata(KeepsAttributes):
    zarr_format: int
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    dtype: DataType
    fill_value: Any
    chunk_key_encoding: ChunkKeyEncoding
    codecs: tuple[Any, ...] = ()  # v3 codec documents, outermost (array side) first
    dimension_names: tuple[Any, ...] | None = None
    kept_attributes: dict[str, Any] | bytes = field(default_factory=dict, compare=False, repr=False)
    order: str = "C"  # v2 only; v3 expresses memory order with `transpose`
    filters: tuple[Any, ...] = ()  # v2 numcodecs configurations
    compressor: dict[str, Any] | None = None  # v2 numcodecs configuration
    dialect: str = "v3"
    # a rectilinear grid's chunk sizes as declared, per dimension: one size repeated, or
    # runs of (size, count); None for a regular grid. `chunk_shape` is then the largest
    # chunk size of each dimension.
    chunk_runs: tuple[Any, ...] | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def is_metadata_key(key: str) -> bool:
    """Whether a store key holds metadata rather than a chunk: a node's documents,
    consolidated metadata and other hidden files, the pre-final drafts' `*.json`."""
    name = key.rsplit("/", 1)[-1]
    return name in METADATA_NAMES or name.startswith(".") or name.endswith(".json")


# Documents larger than this are parsed one at a time: while one is parsed, its Python
# objects take 8 to 20 times its bytes, and many requests may open nodes at once.
PARSED_ONE_AT_A_TIME = 1 << 20
_parsing_alone = threading.Lock()


def load_json(raw: bytes, what: str) -> Any:
    """Decode a JSON document, turning every failure into MetadataError: invalid JSON or
    UTF-8, integers too long to convert, and nesting deeper than MAX_JSON_DEPTH."""
    if len(raw) > PARSED_ONE_AT_A_TIME:
        with _parsing_alone:
            return _load_json(raw, what)
    return _load_json(raw, what)


def _load_json(raw: bytes, what: str) -> Any:
    try:
        document = json.loads(raw)
    except RecursionError:
        raise MetadataError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, integer digit limit
        raise MetadataError(f"{what} is not valid JSON: {exc}") from None
    # nesting deeper than MAX_JSON_DEPTH takes more opening brackets than that: counted in
    # C, a node's small document is not walked in Python (most of its parse, once)
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH:
        _check_depth(document, what)
    return document


_CONTAINERS = frozenset((dict, list))  # what json.loads nests (exactly these types)


def _check_depth(document: Any, what: str) -> None:
    # level by level: consolidated metadata of tens of thousands of nodes has millions of values
    level = [document] if type(document) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise MetadataError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
        below: list[Any] = []
        for value in level:
            below += [c for c in (value.values() if type(value) is dict else value) if type(c) in _CONTAINERS]
        level = below


def dump_json(document: Any) -> bytes:
    return (json.dumps(document, indent=2, allow_nan=False) + "\n").encode()


def check_unknown_fields(doc: dict[str, Any], known: set[str], what: str) -> None:
    for name, value in doc.items():
        if name in known:
            continue
        if isinstance(value, dict) and value.get("must_understand") is False:
            continue
        raise UnsupportedError(f"{what}: unknown field {name!r} that must be understood")


def int_tuple(value: Any, what: str, *, positive: bool = False) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise MetadataError(f"{what} must be a list of integers, got {value!r}")
    if any(v < 0 or (positive and v == 0) for v in value):
        raise MetadataError(f"{what} has invalid entries: {value!r}")
    return tuple(value)


def check_sizes(shape: tuple[int, ...], chunk_shape: tuple[int, ...], dtype: DataType, what: str) -> None:
    """Refuse shapes whose bytes (or whose chunks' bytes) no file size or index can hold."""
    if len(shape) > _max_ndim():
        raise UnsupportedError(f"{what}: {len(shape)} dimensions, more than the {_max_ndim()} numpy supports")
    itemsize = max(1, dtype.itemsize)
    for name, dims in (("shape", shape), ("chunk shape", chunk_shape)):
        # zero-length dimensions count as one: the others still index elements
        if math.prod(max(1, n) for n in dims) * itemsize > MAX_ARRAY_BYTES:
            raise MetadataError(f"{what}: {name} {list(dims)} of {dtype.name} is more than 2**62 bytes")


def _extension_name(value: Any, what: str) -> tuple[str, dict[str, Any]]:
    """A v3 extension point value: a plain name or {"name": ..., "configuration": {...}}."""
    if isinstance(value, str):
        return value, {}
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        config = value.get("configuration", {})
        if not isinstance(config, dict):
            raise MetadataError(f"{what} configuration must be an object")
        return value["name"], config
    raise MetadataError(f"{what} must be a name or an object with a name, got {value!r}")


def parse_dimension_names(names: Any, ndim: int, what: str) -> tuple[Any, ...] | None:
    """`dimension_names`: absent, or one name (or null) per dimension."""
    if names is None:
        return None
    if not isinstance(names, list) or len(names) != ndim or not all(n is None or isinstance(n, str) for n in names):
        raise MetadataError(f"{what}: dimension_names must list one name or null per dimension")
    return tuple(names)


def parse_v3(doc: Any, what: str = "zarr.json", size: int = 0) -> ArrayMetadata | GroupMetadata:
    """A parsed `zarr.json` (of `size` bytes as stored, 0 where unknown) to array or group
    metadata."""
    if not isinstance(doc, dict):
        raise MetadataError(f"{what} must be a JSON object")
    if doc.get("zarr_format") != 3:
        raise MetadataError(f"{what}: zarr_format must be 3, got {doc.get('zarr_format')!r}")
    attributes = doc.get("attributes", {})
    if not isinstance(attributes, dict):
        raise MetadataError(f"{what}: attributes must be an object")
    node_type = doc.get("node_type")
    if node_type == "group":
        check_unknown_fields(doc, _V3_GROUP_FIELDS, what)
        return GroupMetadata(
            3, kept_attributes(attributes, size), _parse_consolidated_v3(doc.get("consolidated_metadata"), what)
        )
    if node_type != "array":
        raise MetadataError(f"{what}: node_type must be 'array' or 'group', got {node_type!r}")
    check_unknown_fields(doc, _V3_ARRAY_FIELDS, what)
    from .dtypes import parse_v3_data_type
    from .fill_values import parse_fill_value

    for required in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"):
        if required not in doc:
            raise MetadataError(f"{what}: required field {required!r} is missing")
    shape = int_tuple(doc["shape"], "shape")
    dtype = parse_v3_data_type(doc["data_type"])

    grid_name, grid_config = _extension_name(doc["chunk_grid"], "chunk_grid")
    chunk_runs = None
    if grid_name == "rectilinear":
        chunk_runs, chunk_shape = _parse_rectilinear(grid_config, shape, what)
    elif grid_name == "regular":
        chunk_shape = int_tuple(grid_config.get("chunk_shape"), "chunk_shape", positive=True)
    else:
        raise UnsupportedError(f"{what}: unsupported chunk grid {grid_name!r}")
    if len(chunk_shape) != len(shape):
        raise MetadataError(f"{what}: chunk_shape {chunk_shape} does not match shape {shape}")
    check_sizes(shape, chunk_shape, dtype, what)

    cke_name, cke_config = _extension_name(doc["chunk_key_encoding"], "chunk_key_encoding")
    if cke_name not in ("default", "v2"):
        raise UnsupportedError(f"{what}: unsupported chunk key encoding {cke_name!r}")
    separator = cke_config.get("separator", "/" if cke_name == "default" else ".")
    if separator not in ("/", "."):
        raise MetadataError(f"{what}: chunk key separator must be '/' or '.', got {separator!r}")

    codecs = doc["codecs"]
    if not isinstance(codecs, list) or not codecs:
        raise MetadataError(f"{what}: codecs must be a non-empty list")
    for codec in codecs:
        _extension_name(codec, "codec")

    transformers = doc.get("storage_transformers", [])
    if not isinstance(transformers, list):
        raise MetadataError(f"{what}: storage_transformers must be a list")
    if transformers:
        names = [_extension_name(t, "storage transformer")[0] for t in transformers]
        raise UnsupportedError(f"{what}: unsupported storage transformers {names}")

    names = parse_dimension_names(doc.get("dimension_names"), len(shape), what)
    return ArrayMetadata(
        zarr_format=3,
        shape=shape,
        chunk_shape=chunk_shape,
        dtype=dtype,
        fill_value=parse_fill_value(doc["fill_value"], dtype, 3, _bytes_codec_order(codecs)),
        chunk_key_encoding=ChunkKeyEncoding(cke_name, separator),
        codecs=tuple(codecs),
        dimension_names=names,
        kept_attributes=kept_attributes(attributes, size),
        chunk_runs=chunk_runs,
    )


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _parse_rectilinear(
    config: dict[str, Any], shape: tuple[int, ...], what: str
) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """The `rectilinear` grid's `chunk_shapes` (kind `inline`): per dimension a size
    repeated, or a list of sizes and [size, count] runs, reaching at least the extent.
    Returns the declared runs (ArrayMetadata.chunk_runs) and the largest chunk shape."""
    from .chunk_grid import RectilinearChunkGrid

    if config.get("kind") != "inline":
        raise UnsupportedError(
            f"{what}: rectilinear chunk grid of kind {config.get('kind')!r} (only 'inline' is known)"
        )
    declared = config.get("chunk_shapes")
    if not isinstance(declared, list) or len(declared) != len(shape):
        raise MetadataError(f"{what}: chunk_shapes must list the chunk sizes of each of the {len(shape)} dimensions")
    runs_per_dim: list[Any] = []
    for d, sizes in enumerate(declared):
        if _positive_int(sizes):
            runs_per_dim.append(sizes)
            continue
        if not isinstance(sizes, list) or not sizes:
            raise MetadataError(f"{what}: chunk_shapes[{d}] must be a positive integer or a non-empty list")
        runs = []
        for item in sizes:
            if _positive_int(item):
                runs.append((item, 1))
            elif isinstance(item, list) and len(item) == 2 and all(_positive_int(v) for v in item):
                runs.append((item[0], item[1]))
            else:
                raise MetadataError(f"{what}: chunk_shapes[{d}] holds {item!r}: neither a size nor a [size, count] run")
        runs_per_dim.append(tuple(runs))
    try:
        grid = RectilinearChunkGrid.of(shape, tuple(runs_per_dim))
    except ValueError as exc:
        raise MetadataError(f"{what}: {exc}") from None
    return tuple(runs_per_dim), grid.chunk_shape


def _bytes_codec_order(codecs: list[Any]) -> ByteOrder:
    """The byte order a `bytes` codec in the chain declares ("<" when none does): base64
    fill values of structured types are in it."""
    for codec in codecs:
        name, config = _extension_name(codec, "codec")
        if name == "bytes":
            return ">" if config.get("endian") == "big" else "<"
    return "<"


def _parse_consolidated_v3(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("metadata"), dict):
        raise MetadataError(f"{what}: consolidated_metadata must hold a 'metadata' object")
    if value.get("kind", "inline") != "inline":
        return None
    return cast("dict[str, Any] | None", value["metadata"])


def parse_v2_array(doc: Any, attributes: Any, what: str = ".zarray", attributes_size: int = 0) -> ArrayMetadata:
    """A parsed `.zarray` (plus `.zattrs`, or None, of `attributes_size` bytes as stored)
    to array metadata."""
    if not isinstance(doc, dict) or doc.get("zarr_format") != 2:
        raise MetadataError(f"{what}: not a Zarr v2 array document")
    from .dtypes import parse_v2_dtype
    from .fill_values import parse_fill_value

    for required in ("shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters"):
        if required not in doc:
            raise MetadataError(f"{what}: required field {required!r} is missing")
    shape = int_tuple(doc["shape"], "shape")
    chunks = int_tuple(doc["chunks"], "chunks", positive=True)
    if len(chunks) != len(shape):
        raise MetadataError(f"{what}: chunks {chunks} do not match shape {shape}")
    filters = doc["filters"] or []
    if not isinstance(filters, list) or not all(isinstance(f, dict) and isinstance(f.get("id"), str) for f in filters):
        raise MetadataError(f"{what}: filters must be null or a list of codec objects")
    compressor = doc["compressor"]
    if compressor is not None and not (isinstance(compressor, dict) and isinstance(compressor.get("id"), str)):
        raise MetadataError(f"{what}: compressor must be null or a codec object")
    dtype = parse_v2_dtype(doc["dtype"], filters)
    check_sizes(shape, chunks, dtype, what)
    order = doc["order"]
    if order not in ("C", "F"):
        raise MetadataError(f"{what}: order must be 'C' or 'F', got {order!r}")
    separator = doc.get("dimension_separator", ".")
    if separator not in ("/", "."):
        raise MetadataError(f"{what}: dimension_separator must be '/' or '.'")
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise MetadataError(f"{what}: .zattrs must be a JSON object")
    return ArrayMetadata(
        zarr_format=2,
        shape=shape,
        chunk_shape=chunks,
        dtype=dtype,
        fill_value=parse_fill_value(doc["fill_value"], dtype, 2),
        chunk_key_encoding=ChunkKeyEncoding("v2", separator),
        kept_attributes=kept_attributes(attributes, attributes_size),
        order=order,
        filters=tuple(filters),
        compressor=compressor,
        dialect="v2",
    )


def parse_v2_group(doc: Any, attributes: Any, what: str = ".zgroup", attributes_size: int = 0) -> GroupMetadata:
    if not isinstance(doc, dict) or doc.get("zarr_format") != 2:
        raise MetadataError(f"{what}: not a Zarr v2 group document")
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        raise MetadataError(f"{what}: .zattrs must be a JSON object")
    return GroupMetadata(2, kept_attributes(attributes, attributes_size), dialect="v2")


def parse_v2_consolidated(doc: Any) -> dict[str, Any]:
    """`.zmetadata` to {key: document} (keys like `a/b/.zarray`)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        raise MetadataError(".zmetadata must hold a 'metadata' object")
    return cast("dict[str, Any]", doc["metadata"])
