"""Open a store's hierarchy in whichever dialect it holds: the entry point `zarr.json`
says when it is a pre-final v3 draft layout; anything else (final v3, v2, implicit
groups) is the final-format `Hierarchy`'s. Never guessed from key names alone."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Protocol

from ..defaults import METADATA_TTL
from ..store import Store
from .context import IOContext
from .drafts.layout import draft_layout
from .hierarchy import Hierarchy
from .nodes import Group

if TYPE_CHECKING:
    from .array import Array
    from .consolidation import ConsolidatedUpkeep


class AnyHierarchy(Protocol):
    """What the filesystem asks of a hierarchy in any dialect: `Hierarchy` (final v3, v2)
    and `drafts.DraftHierarchy` (the pre-final v3 layouts, read-only)."""

    store: Store
    context: IOContext
    remote: bool
    read_only: bool  # the format refuses every write, whatever the store allows
    read_only_reason: str
    upkeep: ConsolidatedUpkeep | None

    def open_node(self, path: str) -> Array | Group: ...
    def children(self, path: str, known: Collection[str] = ()) -> list[str]: ...
    def exists(self, path: str) -> bool: ...
    def keep_fetched(self, path: str, docs: dict[str, bytes | None], read: float | None = None) -> None: ...
    def read_ahead(self, paths: list[str]) -> None: ...
    def forget_consolidated(self) -> None: ...
    def needs_verifying(self, path: str) -> bool: ...
    def verify_node(self, path: str) -> bool: ...
    def create_group(self, path: str, attributes: dict[str, Any] | None = None, zarr_format: int = 3) -> Group: ...
    def create_array(
        self,
        path: str,
        document: dict[str, Any],
        fill: Callable[[Array], None] | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> Array: ...
    def replace_document(self, path: str, name: str, raw: bytes, based_on: object = ...) -> Array | Group: ...
    def erase_node(self, path: str) -> None: ...
    def move_node(self, src: str, dst: str) -> None: ...


def open_hierarchy(
    store: Store, context: IOContext | None = None, consolidated: str = "auto", metadata_ttl: float = METADATA_TTL
) -> AnyHierarchy:
    """The hierarchy of `store`. Raises UnsupportedError or MetadataError when the entry
    point names a draft layout zarrfs cannot read (unknown format URI, metadata encoding
    or extension that must be understood), StoreError when the store fails."""
    root_json = store.get("zarr.json")
    layout = draft_layout(root_json)
    if layout is not None:
        from .drafts.hierarchy import DraftHierarchy

        return DraftHierarchy(store, layout, context)
    hierarchy = Hierarchy(store, context, consolidated=consolidated, metadata_ttl=metadata_ttl)
    if root_json is not None:
        hierarchy.keep_fetched("", {"zarr.json": root_json})  # opening the root reads it once
    return hierarchy
