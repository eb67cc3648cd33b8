"""Reading a root's consolidated metadata (v3 `consolidated_metadata` in its zarr.json,
or v2 `.zmetadata`): every node's documents, parsed once, and each group's children,
indexed for listing. Keeping it true after changes is consolidation.py's."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from .errors import MetadataError, UnsupportedError
from .metadata import METADATA_NAMES, load_json, parse_v2_consolidated, parse_v3


class Consolidated:
    """A root's consolidated metadata, indexed once: each node's documents, parsed (never
    changed after), and each group's children, implicit groups between included; a
    document's bytes (as its node shows them) are made when the node is first opened.
    Built in one pass, so a hierarchy of any size lists each group in its own time."""

    def __init__(self, source: tuple[bytes | None, bytes | None], parsed_docs: dict[str, dict[str, Any]]) -> None:
        self.source = source  # (the root's zarr.json, .zmetadata) it was parsed from
        self.parsed_docs = parsed_docs  # path -> {document name -> parsed document}
        self._encoded: dict[str, Mapping[str, bytes]] = {}
        children: dict[str, set[str]] = {}
        for node in parsed_docs:
            path = node
            while path:
                parent, _, name = path.rpartition("/")
                siblings = children.setdefault(parent, set())
                if name in siblings:
                    break  # this path's ancestors are indexed already
                siblings.add(name)
                path = parent
        self.children = {p: sorted(names) for p, names in children.items()}

    @classmethod
    def parsed(cls, root_json: bytes | None, zmetadata: bytes | None) -> Consolidated:
        """From the root's zarr.json, else its .zmetadata; empty where neither holds any,
        or either is unreadable (the root itself reports that when opened)."""
        docs: dict[str, dict[str, Any]] = {}
        root = None
        try:
            if root_json is not None:
                root = load_json(root_json, "zarr.json")
                meta = parse_v3(root)
                for path, doc in (getattr(meta, "consolidated", None) or {}).items():
                    docs.setdefault(path.strip("/"), {})["zarr.json"] = doc
            elif zmetadata is not None:
                for key, doc in parse_v2_consolidated(load_json(zmetadata, ".zmetadata")).items():
                    path, _, name = key.rpartition("/")
                    if name in METADATA_NAMES:
                        docs.setdefault(path, {})[name] = doc
        except (MetadataError, UnsupportedError):
            docs = {}
        docs = {path: d for path, d in docs.items() if _listable_path(path)}
        root_as_stored = root_json if docs and "" not in docs else None
        if root_as_stored is not None:
            docs[""] = {"zarr.json": root}
        consolidated = cls((root_json, zmetadata if root_json is None else None), docs)
        if root_as_stored is not None:
            consolidated._encoded[""] = {"zarr.json": root_as_stored}  # as stored, parsed once
        return consolidated

    def documents(self, path: str) -> Mapping[str, bytes]:
        """The node's documents as bytes, each rendered when first asked for (listing a
        group opens its children, whose documents are then not read)."""
        encoded = self._encoded.get(path)
        if encoded is None:
            encoded = self._encoded[path] = RenderedDocuments(self.parsed_docs[path])
        return encoded


def _listable_path(path: str) -> bool:
    """Whether a path from consolidated metadata can name a node below the root: its
    names are non-empty, not "." or "..", hold no NUL and fit a file name (255 bytes).
    Others are left out, so that one hostile key cannot spoil its group's listing."""
    if path == "":
        return True
    return all(
        name not in ("", ".", "..") and "\0" not in name and len(name.encode("utf-8", "surrogateescape")) <= 255
        for name in path.split("/")
    )


class RenderedDocuments(Mapping[str, bytes]):
    """Documents known parsed (from consolidated metadata), as bytes: rendered when first
    asked for as zarr-python writes them (two-space indents, no final newline), so that an
    array's zarr.json is byte for byte, and as long as, the object zarr-python wrote beside
    the consolidated metadata. Two of them holding the same parsed documents are equal without
    rendering any; unhashable, as a dict is."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, parsed: dict[str, Any]) -> None:
        self._parsed = parsed
        self._rendered: dict[str, bytes] = {}

    def __getitem__(self, name: str) -> bytes:
        raw = self._rendered.get(name)
        if raw is None:  # (a bare NaN, which Python's json reads, is shown as read)
            raw = self._rendered[name] = json.dumps(self._parsed[name], indent=2).encode()
        return raw

    def estimated_bytes(self) -> int:
        """About the documents' bytes, none rendered to learn it (the compact form, which
        C encodes: a listing opens every child, and memory accounting asks this of each)."""
        rendered = self._rendered
        return sum(len(rendered[n]) if n in rendered else len(json.dumps(d)) for n, d in self._parsed.items())

    def __contains__(self, name: object) -> bool:  # (Mapping's would render the document)
        return name in self._parsed

    def __iter__(self) -> Iterator[str]:
        return iter(self._parsed)

    def __len__(self) -> int:
        return len(self._parsed)

    def __eq__(self, other: object) -> bool:
        if (
            isinstance(other, RenderedDocuments)
            and self._parsed.keys() == other._parsed.keys()
            and all(self._parsed[n] is other._parsed[n] for n in self._parsed)
        ):
            return True
        return super().__eq__(other)


NO_CONSOLIDATED = Consolidated((None, None), {})


def same_document(raw: bytes | None, parsed: Any) -> bool:
    """Whether a node's own document, as stored, says what consolidated metadata holds
    of it (both absent, or the same JSON)."""
    if raw is None or parsed is None:
        return raw is None and parsed is None
    try:
        return bool(json.loads(raw) == parsed)
    except ValueError:
        return False
