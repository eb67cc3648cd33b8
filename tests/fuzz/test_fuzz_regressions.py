"""What the fuzzer found, kept: each plan it drew that once went wrong, replayed as the
fixed run replays its own (tests/fuzz/test_fuzzed_stores.py), and where the cause is
clear, the behaviour itself checked directly."""

from __future__ import annotations

import errno
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.fuzz.test_fuzzed_stores import check_plan
from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.fs.errors import errno_for
from zarrfs.fs.mount import MountConfig, build_core
from zarrfs.store import StoreError, open_store

# (template kind, store mutations, reference mutations), as tests/fuzz/mutations.py draws them
FOUND = {
    # attributes holding lone surrogates (valid JSON: "\udcff"): listing them as extended
    # attributes raised UnicodeEncodeError
    "lone surrogates in attributes": ("v2", [("document", 0, ("edit", "odd attributes"))], []),
    # an array whose shape has a zero (its chunks still stored): decoding ahead of a reader
    # of data or data.npy divided by a row of zero bytes
    "empty array with chunks stored": ("v2", [("document", 1191, ("edit", "shape zero"))], []),
    # a reference whose size is no number ({}): listing the array's stored chunks for its
    # info raised TypeError
    "reference of no size": ("references", [], [(-1, ("be/99999999999999999999.0", [[], {"a": None}, {}]))]),
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


def test_an_array_of_zero_elements_whose_chunks_are_still_stored_reads_empty(tmp_path):
    import zarr

    root = tmp_path / "s"
    zarr.create_array(str(root), shape=(5, 6), chunks=(3, 4), dtype="<i4", zarr_format=2)[:] = 1
    document = json.loads((root / ".zarray").read_text())
    (root / ".zarray").write_text(json.dumps({**document, "shape": [0, 0]}))
    core, cleanup = build_core(MountConfig(str(root), str(tmp_path / "mnt")))
    try:
        for name, size in (("data", 0), ("data.npy", 128)):
            file = core.open(name, os.O_RDONLY)
            assert [len(file.read(0, 1 << 20)) for _ in range(2)] == [size, size]
            file.release()
    finally:
        cleanup()


def test_a_reference_whose_size_is_no_number_is_a_store_error(tmp_path):
    refs = {".zgroup": '{"zarr_format": 2}', "a/.zarray": "{}", "a/0": ["/nowhere", 0, {}]}
    (tmp_path / "refs.json").write_text(json.dumps({"version": 1, "refs": refs}))
    store = open_store(str(tmp_path / "refs.json"))
    with pytest.raises(StoreError) as info:
        store.list_prefix_sizes("a/")
    assert errno_for(info.value) == errno.EIO
