"""A core call made as the adapter makes it on its event loop first: `wait=False`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zarrfs.fs.core import NotAtHand

NOT_AT_HAND = object()  # what `at_hand` answers where the call raised NotAtHand


def at_hand(call: Callable[..., Any], *args: Any) -> Any:
    """call(*args, wait=False), or NOT_AT_HAND where it would need a store call or a wait."""
    try:
        return call(*args, wait=False)
    except NotAtHand:
        return NOT_AT_HAND
