"""Which draft layout a store's entry point `zarr.json` names, and where that layout keeps
node metadata and chunks:

    draft        entry point zarr_format                           node /a/b           root
    2019–2021    https://purl.org/zarr/spec/protocol/core/3.x      meta/root/a/b.array  meta/root.array
    2022         https://purl.org/zarr/spec/core/3.x               meta/a/b.array       meta/array

(`.group` likewise, each followed by the metadata key suffix); chunks of /a/b live under
`data/root/a/b/` (2019–2021) or `data/a/b/` (2022), named `c<i><sep><j>…`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import MetadataError, UnsupportedError

DRAFT_2019 = "v3-draft-2019"
DRAFT_2022 = "v3-draft-2022"

DRAFT_TEXTS = {DRAFT_2019: "2019–2021 core protocol", DRAFT_2022: "2022 core specification"}
DIALECT_NAMES = {dialect: f"Zarr v3 draft ({text})" for dialect, text in DRAFT_TEXTS.items()}

# the drafts promise that every 3.x of the same URI reads as 3.0 does
_FORMAT_URIS = (
    (re.compile(r"^https?://purl\.org/zarr/spec/protocol/core/3\.\d+$"), DRAFT_2019),
    (re.compile(r"^https?://purl\.org/zarr/spec/core/3\.\d+$"), DRAFT_2022),
)
# JSON as the 2019–2021 writers named it: the MIME type of the draft text, and the
# protocol URI that zarr-python 2 and zarrita wrote in its place
_JSON_ENCODINGS_2019 = {"application/json", "https://purl.org/zarr/spec/protocol/core/3.0"}

NODE_TYPES = ("array", "group")


@dataclass(frozen=True)
class DraftLayout:
    """One store's draft layout, from its entry point."""

    dialect: str
    suffix: str  # the metadata key suffix, e.g. ".json"
    entry_point: bytes  # zarr.json as stored

    @property
    def draft_text(self) -> str:
        """Which draft, in words: `2019–2021 core protocol`."""
        return DRAFT_TEXTS[self.dialect]

    @property
    def _meta_root(self) -> str:
        return "meta/root" if self.dialect == DRAFT_2019 else "meta"

    @property
    def _data_root(self) -> str:
        return "data/root" if self.dialect == DRAFT_2019 else "data"

    def metadata_key(self, path: str, node_type: str) -> str:
        """The key of the array or group document of the node at `path` ("" is the root)."""
        if path:
            return f"{self._meta_root}/{path}.{node_type}{self.suffix}"
        if self.dialect == DRAFT_2019:
            return f"meta/root.{node_type}{self.suffix}"
        return f"meta/{node_type}{self.suffix}"

    def children_prefix(self, path: str) -> str:
        """The prefix whose listing holds the documents and prefixes of the node's children."""
        return f"{self._meta_root}/{path}/" if path else f"{self._meta_root}/"

    def data_prefix(self, path: str) -> str:
        """The prefix of the chunk keys of the array at `path`."""
        return f"{self._data_root}/{path}/" if path else f"{self._data_root}/"

    def child_name(self, key_name: str) -> str | None:
        """The node a document name in a listing stands for (`x.array.json` -> `x`)."""
        for node_type in NODE_TYPES:
            ending = f".{node_type}{self.suffix}"
            if key_name.endswith(ending) and len(key_name) > len(ending):
                return key_name[: -len(ending)]
        return None


def draft_dialect(raw: bytes | None) -> str | None:
    """The draft an entry point names; None when `raw` is not a draft's entry point (no
    zarr.json, final v3, or something the final-format reader reports on). A format URI
    of no draft zarrfs knows raises UnsupportedError."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    uri = doc.get("zarr_format") if isinstance(doc, dict) else None
    if not isinstance(uri, str):
        return None
    for pattern, dialect in _FORMAT_URIS:
        if pattern.match(uri):
            return dialect
    if "://" in uri:
        raise UnsupportedError(f"zarr.json names the format {uri!r}, which zarrfs does not read")
    return None


def draft_layout(raw: bytes | None) -> DraftLayout | None:
    """The layout an entry point describes, or None when it is not a draft's entry point.
    Raises UnsupportedError for a metadata encoding other than JSON or an unknown
    extension that must be understood, MetadataError for a malformed entry point."""
    dialect = draft_dialect(raw)
    if dialect is None:
        return None
    assert raw is not None  # a dialect is named only by a document
    doc = json.loads(raw)
    encoding = doc.get("metadata_encoding")
    if dialect == DRAFT_2019:
        if encoding is not None and encoding not in _JSON_ENCODINGS_2019:
            raise UnsupportedError(f"zarr.json: metadata encoding {encoding!r} is not supported (only JSON)")
        suffix = doc.get("metadata_key_suffix", "")
    else:
        if encoding is None:
            encoding = {"type": "json", "metadata_key_suffix": ".json"}
        if not isinstance(encoding, dict):
            raise MetadataError(f"zarr.json: metadata_encoding must be an object, got {encoding!r}")
        if "extension" in encoding or encoding.get("type") != "json":
            raise UnsupportedError(f"zarr.json: metadata encoding {encoding!r} is not supported (only JSON)")
        suffix = encoding.get("metadata_key_suffix", ".json")
    if not isinstance(suffix, str) or "/" in suffix:
        raise MetadataError(f"zarr.json: invalid metadata key suffix {suffix!r}")
    check_extensions(doc.get("extensions"), "zarr.json")
    return DraftLayout(dialect, suffix, raw)


def check_extensions(value: Any, what: str) -> None:
    """Refuse an extension list that holds one zarrfs must understand: it knows none. An
    extension that does not say whether it must be understood is taken to say so."""
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise MetadataError(f"{what}: extensions must be a list of objects")
    for extension in value:
        if extension.get("must_understand", True) is not False:
            raise UnsupportedError(
                f"{what}: extension {extension.get('extension')!r} must be understood, and zarrfs does not know it"
            )
