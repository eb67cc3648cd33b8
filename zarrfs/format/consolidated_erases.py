"""Erases kept out of consolidated metadata (consolidation.py's `leaving`, for `rm -r`): an
erased node is taken out of the consolidated documents above it before its documents go,
at a cost that does not grow with the group. An erase alone (none below the group for
BURST seconds) rewrites the group's document without the node, reading no other node. In
a burst, the next erase strips the group's document of its consolidated metadata
(zarr-python then lists the store, as for any group that carries none) and what it held
is kept here; the erases that follow take their nodes out of what is kept, and write
nothing; a flush once the erases have paused (RESTORE_AFTER), or STRIPPED_MOST after the
strip, writes it back with the changes made since, each node it holds read again (other
writers' changes meanwhile were consolidated nowhere): once per burst, not per erase. So
`rm -r` of N nodes rewrites a large document three times, not N times; and a kill at any
point leaves consolidated metadata that lists no node whose document is gone (at worst,
none: `zarr.consolidate_metadata` writes it again)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Protocol

from .consolidated_writes import (
    NOT_CONSOLIDATED,
    WRITE_ATTEMPTS,
    conflict,
    dump_consolidated,
    found_nothing,
    group_document,
    pause,
    relative_to,
)
from .errors import MetadataError
from .metadata import load_json

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from ..store import Store


class ConsolidatedUpkeep(Protocol):
    """What this module reads and changes of consolidation.py's ConsolidatedUpkeep."""

    store: Store
    writes: int
    retries: int
    waiting: bool
    _lock: threading.Lock
    _rewriting: threading.Lock
    _stripped: dict[str, tuple[bool, dict[str, Any], list[float]]]
    _plain: dict[str, float]
    _erased: dict[str, float]

    def _rewritten_v2(
        self, group: str, raw: bytes, nodes: set[str], subtrees: set[str], read: Callable[..., Any], reconcile: bool
    ) -> Any: ...
    def _rewritten_v3(
        self, group: str, raw: bytes, nodes: set[str], subtrees: set[str], read: Callable[..., Any], reconcile: bool
    ) -> Any: ...


RESTORE_AFTER = 0.25  # seconds without an erase below a stripped group before it is written back
STRIPPED_MOST = 30.0  # seconds a group stays stripped at most while erases go on
WAIT = object()  # (kept: not yet)
# seconds a group's document found carrying no consolidated metadata is believed so (no
# read per erase); a change of it through the mount forgets that at once
PLAIN_FOR = 1.0
# seconds after an erase below a group within which the next one is taken for a burst
BURST = 2.0


def erasing(upkeep: ConsolidatedUpkeep, group: str, path: str) -> None:
    """Before the node at `path` is erased: take it out of the consolidated document of
    `group` (one of those above it), as the module says."""
    with upkeep._rewriting:
        _erasing(upkeep, group, path)


def _erasing(upkeep: ConsolidatedUpkeep, group: str, path: str) -> None:
    with upkeep._lock:
        kept = upkeep._stripped.get(group)
        now = time.monotonic()
        burst = now - upkeep._erased.get(group, -BURST) < BURST
        _remember(upkeep._erased, group, now)
        if kept is not None:  # stripped already: only what is kept loses the node
            _without(kept[1], kept[0], relative_to(path, group) or "")
            kept[2][1] = now
            return
        if now - upkeep._plain.get(group, -PLAIN_FOR) < PLAIN_FOR:
            return
    for attempt in range(WRITE_ATTEMPTS):
        key, raw, version, v2 = group_document(upkeep.store, group)
        if raw is None:
            _plain(upkeep, group)
            return
        try:
            rewritten = (upkeep._rewritten_v2 if v2 else upkeep._rewritten_v3)(
                group, raw, set(), {path}, found_nothing, False
            )
        except MetadataError:
            return
        if rewritten is NOT_CONSOLIDATED:
            _plain(upkeep, group)
        if rewritten is None or rewritten is NOT_CONSOLIDATED:
            return  # (it lists nothing of the node)
        if not burst:  # alone: the document without the node, no other node read
            if upkeep.store.set_if(key, rewritten, version):
                upkeep.writes += 1
                return
            upkeep.retries += 1
            pause(attempt)
            continue
        document = json.loads(rewritten)
        now = time.monotonic()
        with upkeep._lock:
            upkeep._stripped[group] = (v2, document, [now, now])
        if v2:
            upkeep.store.erase(key)
            upkeep.writes += 1
            return
        if upkeep.store.set_if(key, dump_consolidated(dict(document, consolidated_metadata=None), None), version):
            upkeep.writes += 1
            return
        with upkeep._lock:
            upkeep._stripped.pop(group, None)
        upkeep.retries += 1
        pause(attempt)
    raise conflict(key)


def _plain(upkeep: ConsolidatedUpkeep, group: str) -> None:
    with upkeep._lock:
        _remember(upkeep._plain, group, time.monotonic())


def _remember(times: dict[str, float], group: str, now: float) -> None:
    """Under the upkeep's lock: when `group` was last seen so (a bounded table)."""
    if len(times) > 4096:
        times.clear()
    times[group] = now


def _without(document: dict[str, Any], v2: bool, rel: str) -> None:
    """Take the node at `rel` (relative to the group) and those below it out of a kept
    consolidated document."""
    entries = document["metadata"] if v2 else document["consolidated_metadata"]["metadata"]
    for key in list(entries):
        node = key.rpartition("/")[0] if v2 else key
        if node == rel or node.startswith(rel + "/"):
            del entries[key]


def kept(upkeep: ConsolidatedUpkeep, group: str, raw: bytes | None, v2: bool, wait: bool = True) -> Any:
    """The consolidated document of a group an erase stripped, to write back: v3, the
    group's zarr.json as the store holds it now (`raw`: its attributes may have changed
    since), with the consolidated metadata kept (as a zarr.json written through the mount
    keeps the store's, consolidated_writes.kept_consolidated); v2, the .zmetadata kept,
    where none was written since. None where the group was not stripped, or cannot be
    written back so (then forgotten); WAIT, with `wait`, while erases below it go on."""
    with upkeep._lock:
        stripped = upkeep._stripped.get(group)
    if stripped is None:
        return None
    now, (since, last) = time.monotonic(), stripped[2]
    if wait and upkeep.waiting and now - last < RESTORE_AFTER and now - since < STRIPPED_MOST:
        return WAIT
    document = None
    if not v2 and raw is not None and not stripped[0]:
        try:
            document = load_json(raw, f"/{group}/zarr.json")
        except MetadataError:
            document = None
    with upkeep._lock:
        if stripped[0] and v2 and raw is None:
            return dump_consolidated(stripped[1], None)
        if isinstance(document, dict):
            held = stripped[1]["consolidated_metadata"]
            return dump_consolidated(dict(document, consolidated_metadata=held), None)
        upkeep._stripped.pop(group, None)
    return None


def held_nodes(upkeep: ConsolidatedUpkeep, group: str) -> set[str]:
    """The paths of the nodes directly below `group` that its stripped consolidated
    document holds, to be read again when it is written back."""
    with upkeep._lock:
        stripped = upkeep._stripped.get(group)
    if stripped is None:
        return set()
    v2, document = stripped[0], stripped[1]
    entries = document["metadata"] if v2 else document["consolidated_metadata"]["metadata"]
    tops = {(key.rpartition("/")[0] if v2 else key).partition("/")[0] for key in entries}
    return {f"{group}/{top}" if group else top for top in tops if top}
