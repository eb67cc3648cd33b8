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
    ("entry", "listed", "complaint"),
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
    ("attributes", "complaint"),
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


# ----------------------------------------------- the zarr_conventions list (today's spec)
GEO_PROJ = {
    "uuid": "f17cb550-5864-4468-aeb7-f3180cfb622f",
    "schema_url": "https://raw.githubusercontent.com/zarr-experimental/geo-proj/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-experimental/geo-proj/blob/v1/README.md",
    "name": "proj:",
    "description": "Coordinate reference system information for geospatial data",
}


def test_listed_conventions_are_read_with_every_field_and_sorted_by_identifier():
    by_schema = {"schema_url": "https://example.com/my-convention/v1/schema.json"}
    by_spec = {"spec_url": "https://example.com/other/v1/README.md", "name": "other"}
    conventions, problems = parse_conventions({"zarr_conventions": [GEO_PROJ, by_spec, by_schema], "proj:code": "x"})
    assert problems == []
    assert conventions == [
        Convention(
            uuid=GEO_PROJ["uuid"],
            name="proj:",
            description=GEO_PROJ["description"],
            schema=GEO_PROJ["schema_url"],
            spec=GEO_PROJ["spec_url"],
        ),
        Convention(uuid=None, schema=by_schema["schema_url"]),
        Convention(uuid=None, name="other", spec=by_spec["spec_url"]),
    ]
    # identified by the uuid, else the schema's URL, else the spec's; named by it without a name
    assert [c.identifier for c in conventions] == [GEO_PROJ["uuid"], by_schema["schema_url"], by_spec["spec_url"]]
    assert conventions[1].display_name == by_schema["schema_url"]


def test_both_forms_at_once_are_both_listed():
    attributes = {**declare({MINIMAL: {"version": "0.1.0", "configuration": {}}}), "zarr_conventions": [GEO_PROJ]}
    conventions, problems = parse_conventions(attributes)
    assert [c.identifier for c in conventions] == [MINIMAL, GEO_PROJ["uuid"]] and problems == []


@pytest.mark.parametrize(
    ("listed", "kept", "complaint"),
    [
        ({"name": "x"}, 0, "none of uuid, schema_url or spec_url"),
        ({"uuid": "not-a-uuid"}, 0, "is not a UUID"),
        ({"uuid": "not-a-uuid", "spec_url": "https://e.org/s"}, 1, "is not a UUID"),
        ({**GEO_PROJ, "version": "1"}, 1, "fields not allowed"),
        ({**GEO_PROJ, "name": 5}, 1, "name must be a string"),
        ("proj:", 0, "must be an object"),
    ],
)
def test_a_faulty_listed_convention_is_reported(listed, kept, complaint):
    conventions, problems = parse_conventions({"zarr_conventions": [listed, GEO_PROJ]})
    assert len(conventions) == 1 + kept
    assert len(problems) == 1 and complaint in problems[0]


def test_a_list_that_is_not_a_list_is_reported():
    assert parse_conventions({"zarr_conventions": {"uuid": GEO_PROJ["uuid"]}})[1] == [
        "zarr_conventions must be an array of convention objects, got {'uuid': 'f17cb550-5864-4468-aeb7-f3180cfb622f'}"
    ]
