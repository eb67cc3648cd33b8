"""The order in which an object store's move (copy, then delete) takes a node's keys:
chunks and other values first, the node documents after them, so that a move cut short
(a killed daemon) never leaves a document at the new name over chunks not yet copied
(a node that reads as fill values). The deletes take the documents first, then the rest,
so that what a delete cut short leaves under the old name is no node."""

from __future__ import annotations

DOCUMENTS = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def documents_last(keys: list[str]) -> tuple[list[str], list[str]]:
    """(the keys that are no node document, those that are)."""
    documents = [key for key in keys if key.rpartition("/")[2] in DOCUMENTS]
    return [key for key in keys if key.rpartition("/")[2] not in DOCUMENTS], documents
