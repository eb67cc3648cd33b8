"""Read-only views for legacy tools (TIFF, NRRD, ENVI, CSV) over the same bytes as `data`."""

from __future__ import annotations

from typing import Callable

from ...format import Array
from ..base import FileView


def legacy_views(array: Array) -> dict[str, Callable[[], FileView]]:
    """The legacy-format files this array can be shown as, by name."""
    return {}
