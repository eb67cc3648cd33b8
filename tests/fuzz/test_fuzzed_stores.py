"""The structured fuzzer's fixed run (docs/reliability.md): generated stores — valid
hierarchies spoiled by drawn mutations (tests/fuzz/mutations.py) — mounted through the
kernel-free core and walked whole (tests/fuzz/walk.py): no unexpected exception, only
documented errno values, no hang, bounded memory, nothing written, and every array no
mutation touched reads as zarr-python read it. The seed and count are fixed; bench/fuzz.py
runs the same with other seeds, for longer."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, seed, settings

from tests.fuzz.mutations import apply, plans
from tests.fuzz.stores import discard, make_case, write_references
from tests.fuzz.walk import walk_within_limits

STORES = 500  # generated stores per run
SEED = 49
_cases = itertools.count()


def check_plan(directory, plan) -> None:
    """Build the store `plan` describes under `directory`, walk it, fail with what went wrong."""
    kind, mutations, references = plan
    directory.mkdir(parents=True)
    try:
        case = make_case(kind, directory)
        apply(case, mutations)
        if kind == "references":
            write_references(case, directory, references)
        report = walk_within_limits(case, directory / "mnt")
        assert not report.problems, "\n".join([f"store {kind}, mutations:", *case.done, "found:", *report.problems])
    finally:
        discard(directory)  # (in the background)


@seed(SEED)
@settings(max_examples=STORES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(plans())
def test_generated_stores_fail_only_as_documented_and_valid_parts_read_right(tmp_path_factory, plan):
    check_plan(tmp_path_factory.getbasetemp() / f"fuzz-{next(_cases)}", plan)
