"""Convention metadata in attributes: what is read from a declaration, and each way a
declaration can break the conventions spec reported as a problem, never raised."""

from __future__ import annotations

import pytest

from zarrfs.views.conventions import Convention, parse_conventions

MINIMAL = "0396f4cd-47fa-4b09-8c79-9072d90ceed3"
PROJ = "f010a634-3525-416e-9320-8f44b5bc352c"


def declare(metadata, version="0.1.0") -> dict:
    return {"other": 1, "zarr_conventions_version": version, "zarr_conventions_metadata": metadata}


def test_attributes_without_conventions_declare_none():
    assert parse_conventions({"units": "K"}) == ([], [])


def test_minimal_convention_is_named_by_its_uuid():
    conventions, problems = parse_conventions(declare({MINIMAL: {"version": "0.1.0", "configuration": {}}}))
    assert conventions == [Convention(uuid=MINIMAL, version="0.1.0")]
    assert conventions[0].display_name == MINIMAL
    assert problems == []


def test_verbose_convention_keeps_name_description_schema_and_spec():
    entry = {
        "version": "0.1.0",
        "name": "geo:proj",
        "description": "Geospatial project information",
        "schema": "https://example.org/proj/schema.json",
        "spec": "https://example.org/proj/README.md",
        "configuration": {"code": "epsg:4326", "transform": [0, 0, 1, 1, 1, 1]},
    }
    conventions, problems = parse_conventions(declare({PROJ: entry}))
    assert conventions == [
        Convention(
            uuid=PROJ,
            version="0.1.0",
            name="geo:proj",
            description="Geospatial project information",
            schema="https://example.org/proj/schema.json",
            spec="https://example.org/proj/README.md",
        )
    ]
    assert problems == []


def test_conventions_come_sorted_by_uuid():
    entry = {"version": "1.0.0", "configuration": {}}
    conventions, _ = parse_conventions(declare({PROJ: entry, MINIMAL: entry}))
    assert [c.uuid for c in conventions] == [MINIMAL, PROJ]


@pytest.mark.parametrize(
    "entry, listed, complaint",
    [
        ({"configuration": {}}, False, "'version' is missing"),
        ({"version": "0.1.0"}, False, "'configuration' is missing"),
        ({"version": "one", "configuration": {}}, False, "semantic version"),
        ({"version": "0.1.0", "configuration": []}, False, "configuration must be an object"),
        ("0.1.0", False, "must be an object"),
        ({"version": "0.1.0", "configuration": {}, "name": 7}, True, "name must be a string"),
        ({"version": "0.1.0", "configuration": {}, "extra": True}, True, "not allowed"),
    ],
)
def test_faulty_entry_is_reported(entry, listed, complaint):
    conventions, problems = parse_conventions(declare({PROJ: entry}))
    assert [c.uuid for c in conventions] == ([PROJ] if listed else [])
    assert len(problems) == 1
    assert PROJ in problems[0] and complaint in problems[0]


def test_key_that_is_not_a_uuid_is_reported_and_others_kept():
    entry = {"version": "0.1.0", "configuration": {}}
    conventions, problems = parse_conventions(declare({"geo:proj": entry, MINIMAL: entry}))
    assert [c.uuid for c in conventions] == [MINIMAL]
    assert problems == ["convention key 'geo:proj' is not a UUID"]


def test_uuid_that_is_not_version_4_is_reported_but_listed():
    key = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"  # a version 1 UUID
    conventions, problems = parse_conventions(declare({key: {"version": "0.1.0", "configuration": {}}}))
    assert [c.uuid for c in conventions] == [key]
    assert len(problems) == 1 and "version 4" in problems[0]


@pytest.mark.parametrize(
    "attributes, complaint",
    [
        ({"zarr_conventions_metadata": {}}, "zarr_conventions_version is missing"),
        ({"zarr_conventions_version": "0.1.0"}, "zarr_conventions_metadata is missing"),
        (declare([]), "must be an object keyed by UUID"),
        (declare({}, version=1), "semantic version"),
    ],
)
def test_faulty_declaration_is_reported(attributes, complaint):
    conventions, problems = parse_conventions(attributes)
    assert conventions == []
    assert len(problems) == 1 and complaint in problems[0]


@pytest.mark.parametrize("attributes", [None, [], "x", {"zarr_conventions_metadata": {1: None, "a": None}}])
def test_odd_input_never_raises(attributes):
    parse_conventions(attributes)
