"""Writing metadata documents while other writers (mounts on other nodes) rewrite them
too: each write is conditional on the version read (Store.set_if). One that carries
consolidated metadata is made again on top of the other writer's, a bounded number of
times; a node's own document changed since the change read it is refused
(DocumentChangedError), for the caller to make its change again on the new one."""

from __future__ import annotations

import json
import random
import time
from typing import Any

from ..store import Store
from .errors import FormatError, MetadataError
from .metadata import dump_json, load_json
from .nodes import MAX_DOCUMENT_BYTES

# a document that other writers keep replacing while it is rewritten is read and
# rewritten this many times at most, pausing up to RETRY_PAUSE * 2**attempt seconds
# (drawn at random, so that writers that collided part) before each new try
WRITE_ATTEMPTS = 10
RETRY_PAUSE = 0.02


class ConsolidationConflictError(FormatError):
    """Other writers replaced a consolidated document every time it was rewritten."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


class DocumentChangedError(FormatError):
    """Another writer replaced the document since the change being stored read it."""


# store_document's `based_on` when the write replaces whatever is there
ANY = object()


def pause(attempt: int) -> None:
    """Wait before try `attempt` + 2 of a write another writer forestalled."""
    time.sleep(random.uniform(0, RETRY_PAUSE * 2**attempt))


def conflict(key: str) -> ConsolidationConflictError:
    return ConsolidationConflictError(
        f"/{key}: other writers replaced it {WRITE_ATTEMPTS} times while it was being rewritten", key
    )


def _consolidated(raw: bytes | None) -> tuple[Any, Any]:
    """(the document, its consolidated metadata) of a zarr.json; None where either is not."""
    if raw is None:
        return None, None
    try:
        document = load_json(raw, "zarr.json")
    except MetadataError:
        return None, None
    if not isinstance(document, dict) or not isinstance(document.get("consolidated_metadata"), dict):
        return document, None
    return document, document["consolidated_metadata"]


def kept_consolidated(raw: bytes, stored: bytes | None) -> bytes:
    """A group's zarr.json written with consolidated metadata keeps the consolidated
    metadata the store holds (`stored`), which the mounts keep true (docs/semantics.md): the
    writer's copy is what it read, maybe before nodes were made, moved or removed (an
    edited copy of the document, an older one put back). A document written without any
    stays so."""
    document, mine = _consolidated(raw)
    _, held = _consolidated(stored)
    if mine is None or not isinstance(held, dict) or held == mine:
        return raw
    try:
        return dump_json(dict(document, consolidated_metadata=held))
    except ValueError:  # a bare NaN, which JSON lacks: refused as it is parsed
        return raw


def store_document(store: Store, key: str, raw: bytes, based_on: object = ANY) -> None:
    """Store the metadata document `raw` at `key`. `based_on`: the document the change
    was made to (None: there was none), which the store must still hold
    (DocumentChangedError where it does not); ANY: whatever is there is replaced. A
    zarr.json that carries consolidated metadata keeps the store's, on the version read
    (ConsolidationConflictError where other writers kept replacing it)."""
    carries = _consolidated(raw)[1] is not None
    if based_on is ANY and not carries:
        store.set(key, raw)
        return
    for attempt in range(WRITE_ATTEMPTS):
        stored, version = store.get_versioned(key)
        if based_on is not ANY and _own(stored) != _own(based_on):  # type: ignore[arg-type]
            raise DocumentChangedError(f"/{key} was changed by another writer since it was read")
        if store.set_if(key, kept_consolidated(raw, stored) if carries else raw, version):
            return
        if not carries:
            raise DocumentChangedError(f"/{key} was changed by another writer while it was written")
        pause(attempt)
    raise conflict(key)


def _own(raw: bytes | None) -> Any:
    """A document as its node has it: a zarr.json without the consolidated metadata that
    other writers keep rewriting (bytes as they are where it is no such document)."""
    document, held = _consolidated(raw)
    return raw if held is None else {k: v for k, v in document.items() if k != "consolidated_metadata"}


NOT_CONSOLIDATED = object()  # (a rewrite: the document carries none)


def dump_consolidated(document: Any, indent: int | None) -> bytes:
    # allow_nan: a node document read with a bare NaN is carried over as it was read
    return json.dumps(document, indent=indent, allow_nan=True).encode()


def found_nothing(paths: list[str]) -> dict[str, tuple[Any, bool]]:
    """A reading of node documents that finds none (the nodes are leaving)."""
    return {}


def relative_to(path: str, group: str) -> str | None:
    """`path` as named inside `group` ("" for the group itself); None outside it."""
    if not group:
        return path
    if path == group:
        return ""
    return path[len(group) + 1 :] if path.startswith(group + "/") else None


def group_document(store: Store, group: str) -> tuple[str, bytes | None, str | None, bool]:
    """The document of `group` that may hold consolidated metadata, as stored now: (its
    key, its bytes or None, their version, whether v2): its zarr.json, else its .zmetadata."""
    prefix = f"{group}/" if group else ""
    raw, version = store.get_versioned(prefix + "zarr.json", max_size=MAX_DOCUMENT_BYTES)
    if raw is not None:
        return prefix + "zarr.json", raw, version, False
    raw, version = store.get_versioned(prefix + ".zmetadata", max_size=MAX_DOCUMENT_BYTES)
    return prefix + ".zmetadata", raw, version, True
