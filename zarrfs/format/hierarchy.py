"""A Zarr hierarchy in a store: find nodes by path, list a group's children (explicit,
implicit, and from consolidated metadata), create, replace, erase and move nodes.
Arrays (numpy, the codecs) are imported with the first array opened: a mount whose root
is a group is served before."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import weakref
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar

from ..defaults import METADATA_TTL
from ..store import KeyExistsError, Store, StoreError, ValueTooLargeError
from ..store.keys import join_path
from .consolidated_reads import NO_CONSOLIDATED, Consolidated, same_document
from .consolidated_writes import ANY, kept_consolidated, store_document
from .context import IOContext
from .documents import group_document_v3
from .errors import InvalidWriteError, MetadataError, NodeNotFoundError, ReadOnlyFormatError, UnsupportedError
from .fetched import FetchedDocuments, read_documents
from .metadata import METADATA_NAMES, ArrayMetadata, GroupMetadata, dump_json, parse_v2_array, parse_v3
from .node_writes import (
    MetadataChangeError,
    attributes_first,
    check_data_compatible,
    erase_after_shrink,
    stored_outside,
)
from .nodes import MAX_DOCUMENT_BYTES, NODE_NAMES, Group, node_replaced, parse_node, validate_node_name

if TYPE_CHECKING:
    from .array import Array
    from .consolidation import ConsolidatedUpkeep

_Node = TypeVar("_Node", "Array", "Group")
_Fill = Callable[["Array"], None] | None  # (create_array's)


class Hierarchy:
    """The nodes of one store. Thread-safe; holds no node cache of its own beyond the
    consolidated metadata snapshot, which it re-reads after `metadata_ttl` seconds (and
    the nodes others hold, each reused while its documents read the same: _parse_own)."""

    read_only = False  # writes are the store's to refuse
    read_only_reason = ""

    def __init__(
        self,
        store: Store,
        context: IOContext | None = None,
        consolidated: str = "auto",
        metadata_ttl: float = METADATA_TTL,
    ) -> None:
        if consolidated not in ("auto", "never"):
            raise ValueError("consolidated must be 'auto' or 'never'")
        self.store = store
        self.context = context or IOContext()
        self.use_consolidated = consolidated == "auto"
        self.remote = store.remote
        self.metadata_ttl = metadata_ttl
        self._consolidated: tuple[float, Consolidated] | None = None
        # documents read while listing a parent (or the root's while reading consolidated
        # metadata), kept for the one open_node that follows: each is read once
        self.fetched = FetchedDocuments(metadata_ttl, read=lambda paths: read_documents(self.store, paths))
        self._lock = threading.Lock()
        # told of each change of a node's documents or of the set of nodes, to keep the
        # consolidated metadata true (consolidation.py); None: nobody keeps it
        self.upkeep: ConsolidatedUpkeep | None = None
        # arrays of the consolidated metadata checked against their own documents (before
        # their data is read), and those found differing or gone: their own are used
        self._verified: set[str] = set()
        self._stale: set[str] = set()
        self._gone: set[str] = set()
        self._checked_source: tuple[bytes | None, bytes | None] = (None, None)  # what they were found in
        # the nodes last parsed from their own documents, by path, while something holds them
        self._parsed: weakref.WeakValueDictionary[str, Array | Group] = weakref.WeakValueDictionary()

    def _changed(self, path: str, subtree: bool = False) -> None:
        if self.upkeep is not None:
            self.upkeep.touched(path, subtree)

    def _leaving(self, path: str, erased: bool = False) -> contextlib.AbstractContextManager[object]:
        return self.upkeep.leaving(path, erased) if self.upkeep is not None else contextlib.nullcontext()

    # ------------------------------------------------------------ consolidated metadata
    def _consolidated_docs(self) -> Consolidated:
        """The root's consolidated metadata (empty where there is none, or not used)."""
        if not self.use_consolidated:
            return NO_CONSOLIDATED
        with self._lock:
            known = self._consolidated
            if known and time.monotonic() - known[0] < self.metadata_ttl:
                return known[1]
        fetched = self.fetched.peek("")
        if fetched is not None and fetched.get("zarr.json"):
            # a v3 root read a moment ago; .zmetadata counts only where there is none
            root_json, zmetadata = fetched["zarr.json"], None
        else:
            try:
                root_json, zmetadata = self.store.get_partial_values(
                    [("zarr.json", None), (".zmetadata", None)], max_size=MAX_DOCUMENT_BYTES
                )
            except ValueTooLargeError:
                root_json = zmetadata = None  # the root itself reports the problem when opened
        source = (root_json, zmetadata if root_json is None else None)
        # read again, unchanged: its nodes need not be parsed again
        consolidated = known[1] if known and known[1].source == source else Consolidated.parsed(root_json, zmetadata)
        with self._lock:
            if source != self._checked_source:  # what was found of the old one is moot
                self._verified, self._stale, self._gone = set(), set(), set()
                self._checked_source = source
            self._consolidated = (time.monotonic(), consolidated)
        if root_json is not None:
            self.fetched.keep({"": {"zarr.json": root_json}})
        return consolidated

    def keep_fetched(self, path: str, docs: dict[str, bytes | None], read: float | None = None) -> None:
        """Documents of the node at `path` read elsewhere (at `read`, a time.monotonic();
        None: now), for the open_node (and the consolidated metadata, for the root's
        zarr.json) that follows, within the ttl of their reading."""
        self.fetched.keep({path: docs}, read)

    def read_ahead(self, paths: list[str]) -> None:
        """Read the documents of the nodes at `paths` together, in parallel (one round
        trip on a remote store), for the open_node of each that follows within the ttl;
        those the consolidated metadata answers for are not read. Raises StoreError,
        MetadataError."""
        if self.remote:
            consolidated = self._consolidated_docs()
            paths = [p for p in paths if p not in consolidated.parsed_docs or p in self._stale]
        if not paths:
            return
        self.fetched.keep(read_documents(self.store, paths))

    def forget_consolidated(self) -> None:
        """Forget the consolidated metadata and the documents read ahead of their nodes."""
        with self._lock:
            self._consolidated = None
        self.fetched.clear()

    # ------------------------------------------------------------------ nodes
    def open_node(self, path: str) -> Array | Group:
        """The node at `path` ("" is the root). Raises NodeNotFoundError, MetadataError,
        UnsupportedError."""
        path = path.strip("/")
        consolidated = self._consolidated_docs() if self.remote else NO_CONSOLIDATED
        if path in consolidated.parsed_docs and path not in self._stale:
            node = parse_node(
                path, consolidated.documents(path), self.context, self.store, consolidated.parsed_docs[path]
            )
            if node is not None:
                return node
        prefix = path + "/" if path else ""
        docs = self.fetched.take(path)
        if docs is None or (docs.get("zarr.json") is None and ".zarray" not in docs):
            docs = read_documents(self.store, [path])[path]
        node = self._parse_own(path, docs)
        if node is not None:
            return node
        if path == "" or self._holds_nodes(prefix):
            return Group(path, GroupMetadata(3, {}, dialect="implicit"), {}, implicit=True)
        raise NodeNotFoundError(f"no array or group at /{path}")

    def _parse_own(self, path: str, docs: dict[str, bytes | None]) -> Array | Group | None:
        """The node its own documents describe: the one parsed from the same bytes before,
        while anything still holds it and (an array) no invalidation of its node came
        since (Array.current); else parsed now. Re-reading an unchanged node, as each is
        once the metadata ttl expires, then costs its read, not its parse (JSON, codecs)."""
        own = {name: raw for name, raw in docs.items() if raw is not None}
        if "zarr.json" in own:
            own = {"zarr.json": own["zarr.json"]}  # (what a node keeps: v2 documents beside it are not its)
        with self._lock:
            known = self._parsed.get(path)
        if known is not None and known.documents == own and (isinstance(known, Group) or known.current()):
            return known
        node = parse_node(path, docs, self.context, self.store)
        if node is not None:
            with self._lock:
                self._parsed[path] = node
        return node

    def needs_verifying(self, path: str) -> bool:
        """Whether the array at `path` was opened from consolidated metadata on a remote
        store and not yet checked against its own documents (verify_node)."""
        if not (self.remote and self.use_consolidated):
            return False
        with self._lock:
            known = self._consolidated
            if known is None or path in self._verified or path in self._stale:
                return False
        docs = known[1].parsed_docs.get(path)
        if not docs:
            return False
        return ("zarr.json" in docs and docs["zarr.json"].get("node_type") == "array") or ".zarray" in docs

    def verify_node(self, path: str) -> bool:
        """Check an array of the consolidated metadata against its own documents, once per
        snapshot of it (another writer may have changed or erased the array without
        consolidating again). True where they agree; else False, and from now on the
        array's own documents are used (a gone one is not listed): reading it is never
        worse than with consolidated metadata unused."""
        consolidated = self._consolidated_docs()
        known = consolidated.parsed_docs.get(path)
        if known is None:
            return True
        own = read_documents(self.store, [path])[path]
        agree = all(
            same_document(own.get(name), known.get(name))
            for name in set(known) | {n for n in ("zarr.json", ".zarray", ".zattrs") if own.get(n) is not None}
        )
        with self._lock:
            if agree:
                self._verified.add(path)
                return True
            self._stale.add(path)
            if own.get("zarr.json") is None and own.get(".zarray") is None and own.get(".zgroup") is None:
                self._gone.add(path)
        return False

    def _holds_nodes(self, prefix: str) -> bool:
        if self.remote and prefix.rstrip("/") in self._consolidated_docs().children:
            return True
        return any(k.rsplit("/", 1)[-1] in NODE_NAMES for k in self.store.list_prefix(prefix))

    def children(self, path: str, known: Collection[str] = ()) -> list[str]:
        """Names of the nodes directly below the group at `path`, sorted. `known`: names
        found nodes by an earlier listing, which stay nodes while the store still lists
        them, their documents not read again (each is read when its node is opened: a
        group of N listed again costs one listing, not N reads)."""
        path = path.strip("/")
        prefix = path + "/" if path else ""
        consolidated = self._consolidated_docs()
        names = set(consolidated.children.get(path, ()))
        if consolidated.parsed_docs and self.remote:
            return sorted(n for n in names if join_path(path, n) not in self._gone)
        _, prefixes = self.store.list_dir(prefix)
        # listing is the truth here: consolidated metadata may name nodes since erased
        names &= set(prefixes)
        if known:
            names |= set(known).intersection(prefixes)
        candidates = [p for p in prefixes if p not in names]
        if candidates:
            # the documents are read whole, in parallel, and kept for opening the nodes
            try:
                found = read_documents(self.store, [join_path(path, c) for c in candidates])
            except (
                MetadataError,
                StoreError,
            ):  # a hostile document or a failing read: each node reports its own when opened
                found = {join_path(path, c): {} for c in candidates}
            self.fetched.keep(found)
            for c in candidates:
                docs = found[join_path(path, c)]
                if any(docs.get(n) is not None for n in NODE_NAMES) or self._holds_nodes(f"{prefix}{c}/"):
                    names.add(c)
        return sorted(names)

    # ----------------------------------------------------------------- writes
    def _check_writable(self) -> None:
        if self.store.read_only:
            raise ReadOnlyFormatError("the store is read-only")
        # about to change nodes: consolidated metadata would no longer describe them, so
        # from here on the store itself is read and listed
        with self._lock:
            self.use_consolidated = False
            self._consolidated = None
        self.fetched.clear()

    def create_group(self, path: str, attributes: dict[str, Any] | None = None, zarr_format: int = 3) -> Group:
        path = path.strip("/")
        self._check_writable()
        validate_node_name(path.rpartition("/")[2])
        self._check_place(path)
        prefix = path + "/"
        if zarr_format == 2:  # its attributes first (node_writes.attributes_first)
            self.context.stats.add("bytes_stored", attributes_first(self.store, prefix, attributes))
            self._create_document(prefix + ".zgroup", dump_json({"zarr_format": 2}))
        else:
            self._create_document(prefix + "zarr.json", dump_json(group_document_v3(attributes)))
        self._changed(path)
        return self._open_created(path, Group)

    def exists(self, path: str) -> bool:
        """True when a node (readable or not) is at `path`."""
        try:
            self.open_node(path)
        except NodeNotFoundError:
            return False
        except (MetadataError, UnsupportedError):
            pass
        return True

    def _check_place(self, path: str) -> None:
        """A new node may go at `path`: nothing is there, and no ancestor is an array
        (arrays have no children; their keys are chunks)."""
        if self.exists(path):
            raise FileExistsError(f"/{path} already exists")
        from .array import Array

        parent = path.rpartition("/")[0]
        while parent:
            try:
                node = self.open_node(parent)
            except NodeNotFoundError:
                parent = parent.rpartition("/")[0]
                continue
            if isinstance(node, Array):
                raise InvalidWriteError(f"/{parent} is an array: it cannot hold /{path}")
            return

    def create_array(
        self, path: str, document: dict[str, Any], fill: _Fill = None, attributes: dict[str, Any] | None = None
    ) -> Array:
        """Create an array from a v3 `zarr.json` or v2 `.zarray` document (validated first), with v2
        `attributes` (`.zattrs`). `fill` stores its values, then the `.zattrs`, before the document (a kill
        leaves keys of no node, never a node without them; after it on Icechunk); what they stored goes if they fail."""
        path = path.strip("/")
        self._check_writable()
        validate_node_name(path.rpartition("/")[2])
        raw = dump_json(document)
        v2 = document.get("zarr_format") == 2
        name = ".zarray" if v2 else "zarr.json"
        meta = (
            parse_v2_array(json.loads(raw), None, f"/{path}/.zarray")
            if v2
            else parse_v3(json.loads(raw), f"/{path}/zarr.json")
        )
        if not isinstance(meta, ArrayMetadata):
            raise MetadataError("not an array document")
        from .array import Array

        unpublished = Array(self.store, path, meta, self.context)  # codecs must build
        self._check_place(path)
        first = fill is not None and self.store.chunks_need_their_node
        if first:
            self._create_document(f"{path}/{name}", raw)
        try:
            if fill is not None:
                fill(unpublished)
            if v2:
                self.context.stats.add("bytes_stored", attributes_first(self.store, path + "/", attributes))
        except BaseException as exc:  # (not another writer's node, FileExistsError)
            if not isinstance(exc, FileExistsError) and (fill is not None or attributes):
                self.store.erase_prefix(path + "/")
            raise
        if not first:
            self._create_document(f"{path}/{name}", raw)
        self._changed(path)
        return self._open_created(path, Array)

    def _create_document(self, key: str, raw: bytes) -> None:
        """Store a new node's document where none is: of two writers creating one node at
        once (another mount of the store), one makes it and the other gets FileExistsError."""
        try:
            self.store.create(key, raw)
        except KeyExistsError:
            raise FileExistsError(f"/{key.rpartition('/')[0]} was created by another writer meanwhile") from None
        self.context.stats.add("bytes_stored", len(raw))

    def _open_created(self, path: str, kind: type[_Node]) -> _Node:
        """The node just created at `path`: FileExistsError where another writer created
        one of the other kind there meanwhile (and its document is the one read)."""
        node = self.open_node(path)
        if not isinstance(node, kind):
            raise FileExistsError(f"/{path} was created by another writer meanwhile")
        return node

    def replace_document(self, path: str, name: str, raw: bytes, based_on: object = ANY) -> Array | Group:
        """Store a new metadata document for an existing node after validating it.
        Arrays that hold data may change only attributes, shape and dimension_names.
        `based_on`: the document the change was made to (consolidated_writes.store_document)."""
        path = path.strip("/")
        self._check_writable()
        if name not in METADATA_NAMES:
            raise InvalidWriteError(f"{name!r} is not a metadata document name")
        old = self.open_node(path)
        if name == "zarr.json":
            raw = self._consolidated_kept(path, raw)
        # a v2 node is an array or a group, never both: a .zarray written over a group (as
        # `mkdir` then `.zarray` makes an array) replaces its .zgroup, and the reverse
        other = {".zarray": ".zgroup", ".zgroup": ".zarray"}.get(name)
        if name == "zarr.json":
            docs = {"zarr.json": raw}
        else:  # a v2 document: the node is what the v2 documents say
            docs = {n: v for n, v in getattr(old, "documents", {}).items() if n not in ("zarr.json", other)}
            docs[name] = raw
        new = parse_node(path, {n: docs.get(n) for n in METADATA_NAMES}, self.context, self.store)
        if new is None:
            raise MetadataError(f"/{path}/{name} does not describe a node")
        from .array import Array

        held, outside = stored_outside(old, new)  # (one listing of an array's keys)
        if isinstance(old, Array):
            if not isinstance(new, Array):
                if held:
                    raise MetadataChangeError(f"/{path} holds data: it cannot become a group")
            elif held:
                check_data_compatible(old.metadata, new.metadata, path)
        elif isinstance(new, Array) and self.children(path):
            raise MetadataChangeError(f"/{path} has children: it cannot become an array")
        prefix = path + "/" if path else ""
        if outside:  # a grow: it shows no chunk that a shrink cut short left
            self.store.erase_values(outside)
        store_document(self.store, prefix + name, raw, based_on)  # on the version read, where it must be
        self.context.stats.add("bytes_stored", len(raw))
        if other is not None and other in getattr(old, "documents", {}):
            self.store.erase(prefix + other)
        self._changed(path)
        erase_after_shrink(old, new)
        node_replaced(self.context, path, old, new)
        return self.open_node(path)

    def _consolidated_kept(self, path: str, raw: bytes) -> bytes:
        """`raw` with the consolidated metadata the store holds (kept_consolidated)."""
        stored = self.store.get((path + "/" if path else "") + "zarr.json", max_size=MAX_DOCUMENT_BYTES)
        return kept_consolidated(raw, stored)

    def erase_node(self, path: str) -> None:
        path = path.strip("/")
        self._check_writable()
        if not path:
            raise InvalidWriteError("the root cannot be erased")
        self.open_node(path)
        try:
            with self._leaving(path, erased=True):  # consolidated metadata first drops it
                self.store.erase_prefix(path + "/")
        finally:  # some of it may be gone
            self._changed(path, subtree=True)
        self.context.invalidate(path)

    def move_node(self, src: str, dst: str) -> None:
        src, dst = src.strip("/"), dst.strip("/")
        self._check_writable()
        validate_node_name(dst.rpartition("/")[2])
        if dst == src or dst.startswith(src + "/"):
            raise InvalidWriteError(f"/{src} cannot move into itself")
        self.open_node(src)
        self._check_place(dst)
        try:
            with self._leaving(src):
                self.store.move(src, dst)
        finally:  # some of it may have moved
            self._changed(src, subtree=True)
            self._changed(dst, subtree=True)
        self.context.invalidate(src)
        self.context.invalidate(dst)  # nothing kept of a node that was there before may be served
