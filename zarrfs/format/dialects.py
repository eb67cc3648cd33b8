"""Open a store's hierarchy in whichever dialect it holds: the entry point `zarr.json`
says when it is a pre-final v3 draft layout; anything else (final v3, v2, implicit
groups) is the final-format `Hierarchy`'s. Never guessed from key names alone."""

from __future__ import annotations

from ..defaults import METADATA_TTL
from ..store import Store
from .context import IOContext
from .drafts.layout import draft_layout
from .hierarchy import AnyHierarchy, Hierarchy


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
