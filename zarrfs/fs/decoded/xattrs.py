"""Attributes as extended attributes (docs/semantics.md): `user.zarr.<key>` with JSON values; a value
that is not JSON is kept as a JSON string (`setfattr -n user.zarr.units -v K`)."""

from __future__ import annotations

import errno
import json
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from ...format import AnyHierarchy, Group
from ...format.consolidated_writes import WRITE_ATTEMPTS, DocumentChangedError, conflict, pause
from ...format.metadata import dump_json, load_json
from ..errors import FsError

if TYPE_CHECKING:
    from ...format import Array
    from .documents import DocumentLocks
    from .tree import Tree

XATTR_PREFIX = "user.zarr."


def listed(attributes: dict[Any, Any]) -> dict[str, bytes]:
    """The attributes as extended attributes. JSON may hold lone surrogates (`"\\udcff"`),
    which UTF-8 cannot: such a value shows them escaped, as its document holds them, and
    such a key, which no attribute name can spell (key_of refuses it), is left out."""
    shown = {}
    for key, value in attributes.items():
        if not _is_text(key):
            continue
        text = json.dumps(value, ensure_ascii=False)
        shown[XATTR_PREFIX + key] = (text if _is_text(text) else json.dumps(value)).encode()
    return shown


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def key_of(name: str) -> str:
    if not name.startswith(XATTR_PREFIX) or len(name) == len(XATTR_PREFIX):
        raise FsError(errno.ENOTSUP, "only user.zarr.<key> attributes are kept")
    key = name[len(XATTR_PREFIX) :]
    if not _is_text(key):  # os.fsdecode keeps undecodable bytes as lone surrogates
        raise FsError(errno.EINVAL, "the attribute name is not UTF-8 text")
    return key


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(number: str) -> float:
    value = float(number)
    if not math.isfinite(value):  # 1e999
        raise ValueError(f"{number} is past the largest float")
    return value


def parsed(value: bytes) -> Any:
    try:
        text = value.decode()
    except UnicodeDecodeError:
        raise FsError(errno.EINVAL, "the value is not UTF-8 text") from None
    try:
        # what a document cannot hold (dump_json refuses NaN and infinities) is kept as
        # the string, as a value that is not JSON is
        return json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except ValueError:  # not JSON (setfattr -v K), NaN, 1e999, an integer past Python's digit limit
        return text
    except RecursionError:
        raise FsError(errno.EINVAL, "the value nests too deeply") from None


def remove(attributes: dict[Any, Any], key: str) -> None:
    if key not in attributes:
        raise FsError(errno.ENODATA, f"no attribute {key!r}")
    del attributes[key]


def attributes_of(node: Array | Group) -> dict[Any, Any]:
    return cast("dict[Any, Any]", node.attributes if isinstance(node, Group) else node.metadata.attributes)


def rewrite(hierarchy: AnyHierarchy, path: str, change: Callable[[dict[Any, Any]], None]) -> None:
    """Rewrite the attributes of the node at `path` through its metadata document, as
    stored now (never as the tree cached it: another program's change would be undone).
    Made on the document as read, stored only if it is still that one: where another
    writer (a mount on another node) changed it between, made again."""
    for attempt in range(WRITE_ATTEMPTS):
        node = hierarchy.open_node(path)
        name, document = changed_document(node.documents, change)
        try:
            hierarchy.replace_document(path, name, dump_json(document), node.documents.get(name))
            return
        except DocumentChangedError:
            pause(attempt)
    raise conflict(f"{path}/{name}".lstrip("/"))


def changed_document(documents: Mapping[str, bytes], change: Callable[[dict[Any, Any]], None]) -> tuple[str, Any]:
    """(document name, new document) with the node's attributes changed: `zarr.json`'s
    `attributes` (v3), or `.zattrs` (v2)."""
    if "zarr.json" in documents:
        document = load_json(documents["zarr.json"], "zarr.json")
        change(document.setdefault("attributes", {}))
        return "zarr.json", document
    if documents:
        document = load_json(documents[".zattrs"], ".zattrs") if ".zattrs" in documents else {}
        change(document)
        return ".zattrs", document
    raise FsError(errno.ENOTSUP, "an implicit group has no metadata to hold attributes")


class NodeXattrs:
    """The extended attributes of the nodes of a decoded tree. `node_of(path)`: the path of
    the group or array whose attributes those at `path` are (None: it has none); `tree`
    gives its attributes as cached; a change is told first to `changing` (which may
    refuse it), made under the node's lock of `documents`, then told to `stored`.
    Thread-safe: each rewrite under its node's document lock."""

    def __init__(
        self,
        hierarchy: AnyHierarchy,
        tree: Tree,
        documents: DocumentLocks,
        node_of: Callable[[str], str | None],
        changing: Callable[[str], None],
        stored: Callable[[str], None],
    ) -> None:
        self._hierarchy, self._tree, self._documents = hierarchy, tree, documents
        self._node_of, self._changing, self._stored = node_of, changing, stored

    def listed(self, path: str) -> dict[str, bytes]:
        node = self._node_of(path)
        return listed({} if node is None else attributes_of(self._tree.node(node)))

    def set(self, path: str, name: str, value: bytes) -> None:
        key, new = key_of(name), parsed(value)
        self._update(path, lambda attributes: attributes.__setitem__(key, new))

    def remove(self, path: str, name: str) -> None:
        key = key_of(name)
        self._update(path, lambda attributes: remove(attributes, key))

    def _update(self, path: str, change: Callable[[dict[Any, Any]], None]) -> None:
        node = self._node_of(path)
        if node is None:
            raise FsError(errno.ENOTSUP, "attributes belong to arrays and groups")
        self._changing(node)
        with self._documents.held((node,)):
            rewrite(self._hierarchy, node, change)
        self._stored(node)
