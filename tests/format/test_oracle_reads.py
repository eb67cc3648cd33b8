"""What zarr-python and tensorstore write, our format layer reads bit for bit: whole
arrays, random regions, and every chunk of the finest grid."""

from __future__ import annotations

import numpy as np
import pytest
from format_oracle import ALL_CASES, assert_same_values, case_seed, open_oracle, oracle_fill_value

from zarrfs.format import Array
from zarrfs.format.fill_values import fill_array
from zarrfs.format.reads import faulted_in

CASES = [pytest.param(case, id=case.id) for case in ALL_CASES]


@pytest.fixture
def reference(oracle_root, open_hierarchy, request):
    """(our Array, the oracle's reader, the case) for the parametrized case."""
    root, errors = oracle_root
    case = request.param
    if case.name in errors:
        pytest.fail(f"the oracle could not write {case.name}: {errors[case.name]}")
    node = open_hierarchy(root, read_only=True).open_node(case.name)
    assert isinstance(node, Array)
    return node, open_oracle(root, case), case


def _random_selection(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple:
    selection = []
    for n in shape:
        kind = rng.integers(0, 4) if n else 0
        if kind == 0:
            selection.append(slice(None))
        elif kind == 1:
            selection.append(int(rng.integers(-n, n)))
        else:
            start = int(rng.integers(0, n))
            selection.append(slice(start, int(rng.integers(start, n + 1))))
    return tuple(selection)


@pytest.mark.parametrize("reference", CASES, indirect=True)
def test_whole_array_matches_oracle(reference):
    array, oracle, case = reference
    assert array.shape == case.shape
    values = array.read()
    assert values.dtype == (object if array.dtype.variable_length else array.dtype.numpy)
    assert_same_values(values, oracle(...), case.name)


@pytest.mark.parametrize("reference", CASES, indirect=True)
def test_random_regions_match_oracle(reference):
    array, oracle, case = reference
    rng = np.random.default_rng(case_seed(case))
    for _ in range(6):
        selection = _random_selection(rng, case.shape)
        assert_same_values(array.read(selection), oracle(selection), f"{case.name}[{selection}]")


@pytest.mark.parametrize("reference", CASES, indirect=True)
def test_fill_value_matches_oracle(reference, oracle_root):
    array, _, case = reference
    expected = oracle_fill_value(oracle_root[0], case)
    if array.dtype.variable_length:
        assert type(array.fill_value) is type(expected) and array.fill_value == expected
    else:
        assert_same_values(np.asarray(array.fill_value), np.asarray(expected), case.name)


@pytest.mark.parametrize("reference", CASES, indirect=True)
def test_every_chunk_is_its_region_padded_with_fill(reference, oracle_root):
    array, oracle, case = reference
    if not case.shape:
        return  # 0-d arrays have no chunk files
    whole = oracle(...)
    fill = oracle_fill_value(oracle_root[0], case)
    coords_list = list(array.chunk_grid.all_chunks())
    for coords, chunk in zip(coords_list, array.read_chunks(coords_list)):
        region = array.chunk_grid.chunk_region(coords)
        expected = fill_array(array.chunk_shape, array.dtype, fill)
        expected[tuple(slice(0, r.stop - r.start) for r in region)] = whole[region]
        assert_same_values(chunk, expected, f"{case.name} chunk {coords}")


def test_every_chunk_decoded_into_memory_made_ahead_is_the_chunk_decoded_alone(oracle_root, open_hierarchy):
    """Reads from a bucket decode zstd and blosc chunks into memory made while they were
    fetched (format/reads.py): for every case that can, each stored chunk decodes to the
    same values that way, and an absent one is the same fill chunk, whatever its data
    type, byte order or memory order."""
    root, _ = oracle_root
    hierarchy = open_hierarchy(root, read_only=True)
    checked, into = set(), set()
    for case in ALL_CASES:
        try:
            array = hierarchy.open_node(case.name)
        except Exception:  # cases the oracle could not write fail in the tests above
            continue
        pipeline = array.pipeline
        if not case.shape or array.sharding is not None or pipeline.decoded_size is None:
            continue
        # a chunk absent from the store is the fill value, one element broadcast
        coords = (0,) * len(case.shape)
        assert_same_values(array.absent_chunk(coords), array.fill_chunk(coords), f"{case.name} absent chunk")
        for coords in array.chunk_grid.all_chunks():
            raw = array.get_batch([(array.stored_key(coords), None)], pipeline.max_encoded_size)[0]
            if raw is None:
                continue
            out = faulted_in(pipeline.decoded_size)
            ours = pipeline.decode(raw, out)
            assert_same_values(ours, pipeline.decode(raw), f"{case.name} chunk {coords}")
            checked.add(case.name)
            if np.may_share_memory(ours, out):  # not where the stored type converts (a copy)
                into.add(case.name)
    assert len(checked) >= 80 and len(into) >= 80, (sorted(checked), sorted(into))
