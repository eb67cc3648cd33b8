"""A hierarchy in a draft layout, with the interface of `Hierarchy`: nodes by path,
children from listing the metadata prefix (explicit and implicit), and writes refused.

Nodes show their documents under the names `array.json` and `group.json` (the stored
keys are `<name>.array.json` beside their siblings'); the root also shows the entry
point `zarr.json`, which defines it, so a draft's root is never an implicit group."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from ...store import Store
from ..array import Array
from ..context import IOContext
from ..errors import MetadataError, NodeNotFoundError, ReadOnlyFormatError, UnsupportedError
from ..hierarchy import Hierarchy
from ..metadata import ArrayMetadata, GroupMetadata, load_json
from ..nodes import Group
from .layout import DraftLayout
from .metadata import parse_draft_array, parse_draft_group

if TYPE_CHECKING:
    from ..consolidation import ConsolidatedUpkeep


class DraftArray(Array):
    """An array whose chunks live under its layout's data prefix, apart from its metadata."""

    def __init__(
        self, store: Store, path: str, metadata: ArrayMetadata, context: IOContext | None, data_prefix: str
    ) -> None:
        super().__init__(store, path, metadata, context)
        self.data_prefix = data_prefix

    def stored_key(self, stored_coords: tuple[int, ...]) -> str:
        return self.data_prefix + self.metadata.chunk_key_encoding.chunk_key(stored_coords)

    def holds_data(self) -> bool:
        return bool(self.store.list_prefix(self.data_prefix))

    def stored_chunks(self) -> tuple[int, int]:
        sizes = self.store.list_prefix_sizes(self.data_prefix)
        return len(sizes), sum(sizes.values())


class DraftHierarchy:
    """The nodes of a store in a draft layout. Thread-safe; caches nothing (the tree
    above it caches nodes for the metadata ttl). Read-only whatever the store allows."""

    def __init__(self, store: Store, layout: DraftLayout, context: IOContext | None = None) -> None:
        self.store = store
        self.layout = layout
        self.context = context or IOContext()
        self.remote = store.remote
        self.read_only = True
        self.read_only_reason = (
            f"{getattr(store, 'url', 'the store')} is a pre-final Zarr v3 draft layout "
            f"({layout.draft_text}), which zarrfs reads but does not write"
        )

    def forget_consolidated(self) -> None:
        """The drafts have no consolidated metadata: nothing to forget."""

    def keep_fetched(self, path: str, docs: dict[str, bytes | None], read: float | None = None) -> None:
        """Nothing read ahead is kept here: each node is read when it is opened."""

    def read_ahead(self, paths: list[str]) -> None:
        """Nothing is read ahead here: each node is read when it is opened."""

    upkeep: ConsolidatedUpkeep | None = None  # read-only: no consolidated metadata to keep

    def needs_verifying(self, path: str) -> bool:
        """Nodes are read from their own documents: nothing to check them against."""
        return False

    def verify_node(self, path: str) -> bool:
        return True

    # ------------------------------------------------------------------ nodes
    def open_node(self, path: str) -> Array | Group:
        """The node at `path` ("" is the root). Raises NodeNotFoundError, MetadataError,
        UnsupportedError."""
        path = path.strip("/")
        layout = self.layout
        array_key, group_key = layout.metadata_key(path, "array"), layout.metadata_key(path, "group")
        array_raw, group_raw = self.store.get_partial_values([(array_key, None), (group_key, None)])
        documents = {} if path else {"zarr.json": layout.entry_point}
        if array_raw is not None:
            meta = parse_draft_array(load_json(array_raw, array_key), layout.dialect, array_key)
            try:
                array = DraftArray(self.store, path, meta, self.context, layout.data_prefix(path))
            except (MetadataError, UnsupportedError) as exc:  # the codec chain does not build
                raise type(exc)(f"{array_key}: {exc}") from None
            array.documents = {**documents, "array.json": array_raw}
            return array
        if group_raw is not None:
            meta = parse_draft_group(load_json(group_raw, group_key), layout.dialect, group_key)
            return Group(path, meta, {**documents, "group.json": group_raw})
        if not path:
            return Group(path, GroupMetadata(3, {}, dialect=layout.dialect), documents)
        keys, prefixes = self.store.list_dir(layout.children_prefix(path))
        if keys or prefixes:
            return Group(path, GroupMetadata(3, {}, dialect=layout.dialect), {}, implicit=True)
        raise NodeNotFoundError(f"no array or group at /{path}")

    def children(self, path: str, known: Collection[str] = ()) -> list[str]:
        """Names of the nodes directly below the group at `path`, sorted: one per array or
        group document, and one per prefix (a group implied by its descendants). (`known`
        is of no use here: a listing reads no document.)"""
        keys, prefixes = self.store.list_dir(self.layout.children_prefix(path.strip("/")))
        names = {name for name in map(self.layout.child_name, keys) if name}
        return sorted(names | set(prefixes))

    exists = Hierarchy.exists

    # ----------------------------------------------------------------- writes
    def _refuse(self) -> ReadOnlyFormatError:
        return ReadOnlyFormatError(self.read_only_reason)

    def create_group(self, path: str, attributes: dict[str, Any] | None = None, zarr_format: int = 3) -> Group:
        raise self._refuse()

    def create_array(
        self,
        path: str,
        document: dict[str, Any],
        fill: Callable[[Array], None] | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> Array:
        raise self._refuse()

    def replace_document(self, path: str, name: str, raw: bytes, based_on: object = None) -> Array | Group:
        raise self._refuse()

    def erase_node(self, path: str) -> None:
        raise self._refuse()

    def move_node(self, src: str, dst: str) -> None:
        raise self._refuse()
