"""What the fuzzer found, kept: each plan it drew that once went wrong, replayed as the
fixed run replays its own (tests/fuzz/test_fuzzed_stores.py), and where the cause is
clear, the behaviour itself checked directly."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.fuzz.test_fuzzed_stores import check_plan
from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.store import open_store

# (template kind, store mutations, reference mutations), as tests/fuzz/mutations.py draws them
FOUND = {
    # attributes holding lone surrogates (valid JSON: "\udcff"): listing them as extended
    # attributes raised UnicodeEncodeError
    "lone surrogates in attributes": ("v2", [("document", 0, ("edit", "odd attributes"))], []),
}


@pytest.mark.parametrize("plan", FOUND.values(), ids=FOUND.keys())
def test_plans_that_once_went_wrong(tmp_path, plan):
    check_plan(tmp_path / "case", plan)


def test_attributes_holding_lone_surrogates_show_escaped_and_unnameable_keys_are_left_out(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    (root / ".zgroup").write_text('{"zarr_format": 2}')
    (root / ".zattrs").write_text(json.dumps({"units": "\udcff K", "\ud800": 1, "plain": "é"}))
    with ThreadPoolExecutor(2) as pool:
        context = IOContext(executor=pool, cache=ChunkCache(1 << 20))
        core = DecodedCore(open_hierarchy(open_store(str(root)), context, metadata_ttl=0), read_only=True)
        shown = core.xattrs("")
        core.close()
    assert shown == {"user.zarr.units": b'"\\udcff K"', "user.zarr.plain": '"é"'.encode()}
