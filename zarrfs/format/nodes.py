"""What a node is: a group, or an array (array.py), made from its metadata documents;
the names a node may have and the documents that make one. Arrays (numpy, the codecs)
are imported with the first array parsed: a mount whose root is a group is served
before."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..store import Store
from .consolidated_reads import RenderedDocuments
from .context import IOContext
from .errors import InvalidWriteError, MetadataError, UnsupportedError
from .metadata import METADATA_NAMES, ArrayMetadata, GroupMetadata, load_json, parse_v2_array, parse_v2_group, parse_v3

if TYPE_CHECKING:
    from .array import Array

# A metadata document larger than this is refused unread (consolidated metadata of tens of
# thousands of arrays fits; JSON costs ten times its size in memory once parsed).
MAX_DOCUMENT_BYTES = 64 << 20
NODE_NAMES = ("zarr.json", ".zarray", ".zgroup")
V2_NAMES = (".zarray", ".zgroup", ".zattrs")
# the spec's node name rules: not empty, no "/", not periods only, no "__" prefix
_BAD_NAME = re.compile(r"^$|/|^\.+$|^__")


@dataclass
class Group:
    path: str
    metadata: GroupMetadata
    documents: Mapping[str, bytes] = field(default_factory=dict)  # name -> bytes as stored
    implicit: bool = False

    @property
    def attributes(self) -> dict[str, Any]:
        return self.metadata.attributes


def validate_node_name(name: str) -> None:
    if _BAD_NAME.search(name) or name.startswith(".zarrfs-") or name in METADATA_NAMES:
        raise InvalidWriteError(f"invalid node name {name!r}")


def parse_node(
    path: str, docs: Mapping[str, bytes | None], context: IOContext, store: Store, parsed: dict[str, Any] | None = None
) -> Array | Group | None:
    """The node the documents describe (`parsed`: those of them parsed already, as in
    consolidated metadata). Whatever they hold, this raises only MetadataError or
    UnsupportedError: one hostile node must not take its parent's listing with it."""
    try:
        return _parse_documents(path, docs, context, store, parsed or {})
    except (MetadataError, UnsupportedError):
        raise
    except (ValueError, TypeError, OverflowError, KeyError, IndexError, RecursionError) as exc:
        # numpy and numcodecs raise these on values the checks above did not foresee
        where = f"/{path}" if path else "/"
        raise MetadataError(f"{where}: invalid metadata ({type(exc).__name__}: {exc})") from None


def _parse_documents(
    path: str, docs: Mapping[str, bytes | None], context: IOContext, store: Store, parsed: dict[str, Any]
) -> Array | Group | None:
    where = f"/{path}" if path else ""  # the root's documents are /zarr.json, …

    def present(name: str) -> bool:  # (a document known parsed is not rendered to learn that)
        return name in parsed or docs.get(name) is not None

    def loaded(name: str) -> Any:
        if name in parsed:
            return parsed[name]
        raw = docs[name]
        assert raw is not None  # asked only of present documents
        return load_json(raw, f"{where}/{name}")

    def size(name: str) -> int:  # as stored; 0 for those held parsed (consolidated metadata)
        raw = None if name in parsed else docs.get(name)
        return 0 if raw is None else len(raw)

    def kept(names: tuple[str, ...]) -> Mapping[str, bytes]:
        if isinstance(docs, RenderedDocuments):
            return docs  # rendered when asked for
        return {n: raw for n in names if (raw := docs.get(n)) is not None}

    if present("zarr.json"):
        meta = parse_v3(loaded("zarr.json"), f"{where}/zarr.json", size("zarr.json"))
        documents = kept(("zarr.json",))
    elif present(".zarray") or present(".zgroup"):
        attrs = loaded(".zattrs") if present(".zattrs") else None
        if present(".zarray"):
            meta = parse_v2_array(loaded(".zarray"), attrs, f"{where}/.zarray", size(".zattrs"))
        else:
            meta = parse_v2_group(loaded(".zgroup"), attrs, f"{where}/.zgroup", size(".zattrs"))
        documents = kept((".zarray", ".zgroup", ".zattrs"))
    else:
        return None
    if isinstance(meta, ArrayMetadata):
        from .array import Array

        array = Array(store, path, meta, context)
        array.documents = documents
        return array
    return Group(path, meta, documents)


def node_replaced(context: IOContext, path: str, old: Array | Group | None, new: Array | Group | None) -> bool:
    """The node at `path` was replaced (`new` None: by one that cannot be opened): what is
    decoded of it and of the arrays below it is forgotten, unless a group stays a group,
    whose own documents alone changed (attributes, consolidated metadata: the arrays below
    it keep theirs). Whether it was forgotten."""
    if isinstance(old, Group) and isinstance(new, Group):
        return False
    context.invalidate(path)
    return True
