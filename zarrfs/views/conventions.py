"""Zarr conventions declared in a node's attributes, in either form the conventions spec
has had: `zarr_conventions`, a list of convention metadata objects each identified by its
`uuid`, else its `schema_url`, else its `spec_url` (the zarr-conventions spec as GeoZarr
data carries it), or the earlier `zarr_conventions_version` and `zarr_conventions_metadata`,
keyed by UUID. Conventions are safely ignorable, so a malformed declaration is reported as
a problem, never raised."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

VERSION_KEY = "zarr_conventions_version"
METADATA_KEY = "zarr_conventions_metadata"
LIST_KEY = "zarr_conventions"
_IDENTIFIERS = ("uuid", "schema_url", "spec_url")  # the first present identifies a listed one
_LISTED_FIELDS = (*_IDENTIFIERS, "name", "description")

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_REQUIRED = ("version", "configuration")
_OPTIONAL = ("name", "schema", "spec", "description")


@dataclass(frozen=True)
class Convention:
    """One convention metadata object, identified by its UUID (a listed one, without it,
    by its schema's URL, else its spec's)."""

    uuid: str | None
    version: str | None = None  # (the earlier form's)
    name: str | None = None
    description: str | None = None
    schema: str | None = None  # URL of the JSON schema of its `configuration`
    spec: str | None = None  # URL of the document that describes it

    @property
    def identifier(self) -> str:
        found = self.uuid or self.schema or self.spec
        assert found is not None  # (none is made without one)
        return found

    @property
    def display_name(self) -> str:
        # the spec: without a name, tools represent the convention by its identifier
        return self.name if self.name is not None else self.identifier


def parse_conventions(attributes: Any) -> tuple[list[Convention], list[str]]:
    """The conventions a node declares, sorted by UUID, and a problem for each way the
    declaration breaks the conventions spec. An entry whose UUID, `version` or
    `configuration` is unusable is left out; lesser faults only add a problem."""
    if not isinstance(attributes, dict):
        return [], []
    conventions, problems = _parse_listed(attributes)
    earlier, earlier_problems = _parse_keyed(attributes)
    return sorted(conventions + earlier, key=lambda c: c.identifier), problems + earlier_problems


def _parse_listed(attributes: dict[str, Any]) -> tuple[list[Convention], list[str]]:
    """The `zarr_conventions` form."""
    if LIST_KEY not in attributes:
        return [], []
    listed = attributes[LIST_KEY]
    if not isinstance(listed, list):
        return [], [f"{LIST_KEY} must be an array of convention objects, got {_show(listed)}"]
    conventions, problems = [], []
    for i, entry in enumerate(listed):
        label = f"{LIST_KEY}[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{label} must be an object, got {_show(entry)}")
            continue
        fields = {}
        for field in _LISTED_FIELDS:
            if field in entry:
                if isinstance(entry[field], str):
                    fields[field] = entry[field]
                else:
                    problems.append(f"{label}: {field} must be a string, got {_show(entry[field])}")
        if "name" in fields:
            label += f" ({_show(fields['name'])})"
        if "uuid" in fields and not _is_uuid(fields["uuid"]):
            problems.append(f"{label}: uuid {_show(fields['uuid'])} is not a UUID in canonical form")
            del fields["uuid"]
        extra = sorted(set(entry) - set(_LISTED_FIELDS), key=str)
        if extra:
            problems.append(f"{label}: fields not allowed by the conventions spec: {', '.join(map(_show, extra))}")
        if not any(field in fields for field in _IDENTIFIERS):  # (one that is there is faulty: said above)
            if not any(field in entry for field in _IDENTIFIERS):
                problems.append(f"{label}: has none of uuid, schema_url or spec_url to identify it")
            continue
        conventions.append(
            Convention(
                uuid=fields.get("uuid"),
                name=fields.get("name"),
                description=fields.get("description"),
                schema=fields.get("schema_url"),
                spec=fields.get("spec_url"),
            )
        )
    return conventions, problems


def _parse_keyed(attributes: dict[str, Any]) -> tuple[list[Convention], list[str]]:
    """The earlier `zarr_conventions_version` and `zarr_conventions_metadata` form."""
    has_version, has_metadata = VERSION_KEY in attributes, METADATA_KEY in attributes
    if not has_version and not has_metadata:
        return [], []
    problems: list[str] = []
    if not has_version:
        problems.append(f"{METADATA_KEY} is present but {VERSION_KEY} is missing")
    elif not _is_semver(attributes[VERSION_KEY]):
        got = _show(attributes[VERSION_KEY])
        problems.append(f"{VERSION_KEY} must be a semantic version string, got {got}")
    if not has_metadata:
        problems.append(f"{VERSION_KEY} is present but {METADATA_KEY} is missing")
        return [], problems
    metadata = attributes[METADATA_KEY]
    if not isinstance(metadata, dict):
        problems.append(f"{METADATA_KEY} must be an object keyed by UUID, got {_show(metadata)}")
        return [], problems
    conventions = []
    for key in sorted(metadata, key=str):
        convention = _parse_entry(key, metadata[key], problems)
        if convention is not None:
            conventions.append(convention)
    return conventions, problems


def _parse_entry(key: Any, entry: Any, problems: list[str]) -> Convention | None:
    try:
        parsed = uuid.UUID(key)
    except (ValueError, TypeError, AttributeError):
        problems.append(f"convention key {_show(key)} is not a UUID")
        return None
    if str(parsed) != key.lower():
        problems.append(f"convention key {_show(key)} is not a UUID in canonical form")
        return None
    if not isinstance(entry, dict):
        problems.append(f"convention {key}: metadata must be an object, got {_show(entry)}")
        return None
    label = f"convention {key}"
    if isinstance(entry.get("name"), str):
        label += f" ({_show(entry['name'])})"
    usable = True
    for field in _REQUIRED:
        if field not in entry:
            problems.append(f"{label}: required field {field!r} is missing")
            usable = False
    if "version" in entry and not _is_semver(entry["version"]):
        problems.append(f"{label}: version must be a semantic version string, got {_show(entry['version'])}")
        usable = False
    if "configuration" in entry and not isinstance(entry["configuration"], dict):
        problems.append(f"{label}: configuration must be an object, got {_show(entry['configuration'])}")
        usable = False
    optional = {}
    for field in _OPTIONAL:
        value = entry.get(field)
        if value is None and field not in entry:
            continue
        if isinstance(value, str):
            optional[field] = value
        else:
            problems.append(f"{label}: {field} must be a string, got {_show(value)}")
    extra = sorted(set(entry) - set(_REQUIRED) - set(_OPTIONAL))
    if extra:
        names = ", ".join(map(_show, extra))
        problems.append(f"{label}: fields not allowed by the conventions spec: {names}")
    if parsed.version != 4:
        problems.append(f"{label}: the UUID is not a version 4 UUID")
    if not usable:
        return None
    return Convention(uuid=key, version=entry["version"], **optional)


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value.lower()
    except ValueError:
        return False


def _is_semver(value: Any) -> bool:
    return isinstance(value, str) and _SEMVER.match(value) is not None


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
