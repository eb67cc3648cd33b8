"""The pre-final Zarr v3 draft layouts (the core protocol drafts of 2019–2021 and the core
specification draft of 2022), read into the format layer's own metadata, arrays and
groups. zarrfs reads these layouts and never writes them. Recognising one (layout.py)
is cheap; the hierarchy and its arrays are imported when a store holds one."""

from typing import Any

from .layout import DIALECT_NAMES, DRAFT_2019, DRAFT_2022, DraftLayout, draft_layout

__all__ = ["DIALECT_NAMES", "DRAFT_2019", "DRAFT_2022", "DraftArray", "DraftHierarchy", "DraftLayout", "draft_layout"]


def __getattr__(name: str) -> Any:
    if name in ("DraftArray", "DraftHierarchy"):
        from . import hierarchy

        return getattr(hierarchy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
