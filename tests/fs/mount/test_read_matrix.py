"""Through a real mount, every reference array written by zarr-python and tensorstore reads
as the oracle reads it: `data` and `data.npy` byte for byte, chunk files as their region
padded with the fill value, random `pread`s, exact sizes, and `data.jsonl` for
variable-length types (docs/semantics.md)."""

from __future__ import annotations

import base64
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.format.format_oracle import (
    ALL_CASES,
    assert_same_values,
    canonical,
    case_seed,
    open_oracle,
    oracle_fill_value,
    write_case,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore::Warning:zarr"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]

FIXED = [pytest.param(c, id=c.id) for c in ALL_CASES if c.dtype not in ("str", "bytes")]
VARIABLE = [pytest.param(c, id=c.id) for c in ALL_CASES if c.dtype in ("str", "bytes")]
CHUNK_SAMPLE = 12  # chunk files checked per array (all of them for smaller grids)
PREADS = 25


@pytest.fixture(scope="module")
def matrix(tmp_path_factory, module_mount):
    """(written root, mount, {case: writer error}): every case written once, mounted once."""
    root = tmp_path_factory.mktemp("matrix")
    errors = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in ALL_CASES:
            try:
                write_case(root, case)
            except Exception as exc:  # reported by the case's own tests
                errors[case.name] = f"{type(exc).__name__}: {exc}"
    return root, module_mount(root), errors


@pytest.fixture
def reference(matrix, request):
    """(oracle values in C order, the case's directory in the mount, root, case)."""
    root, m, errors = matrix
    case = request.param
    if case.name in errors:
        pytest.fail(f"the oracle could not write {case.name}: {errors[case.name]}")
    return np.asarray(open_oracle(root, case)(...)), m / case.name, root, case


def little_endian_bytes(values: np.ndarray) -> bytes:
    return canonical(values).tobytes()


def finest_chunk_shape(root: Path, case) -> tuple[int, ...]:
    """The chunk shape of the finest grid as zarr-python sees it (inner chunks of shards)."""
    path = root / (case.name + ".twin" if case.reader == "twin" else case.name)
    if case.reader == "tensorstore":  # zarr-python cannot open every type tensorstore writes
        import tensorstore as ts

        spec = {"driver": case.options["driver"], "kvstore": {"driver": "file", "path": str(path)}}
        if isinstance(case.dtype, list):
            spec["field"] = case.dtype[0][0]
        return tuple(ts.open(spec, open=True).result().chunk_layout.read_chunk.shape)[: len(case.shape)]
    return tuple(zarr.open_array(str(path), mode="r").chunks)


def fill_chunk(shape: tuple[int, ...], fill, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "V":
        return (
            np.frombuffer(bytes(np.asarray(fill, dtype=dtype).tobytes()) * math.prod(shape), dtype)
            .reshape(shape)
            .copy()
        )
    return np.full(shape, fill, dtype=dtype)


@pytest.mark.parametrize("reference", FIXED, indirect=True)
def test_data_is_the_whole_array_little_endian(reference):
    values, node, _, case = reference
    expected = little_endian_bytes(values)
    assert os.stat(node / "data").st_size == len(expected)
    assert (node / "data").read_bytes() == expected, case.name


@pytest.mark.parametrize("reference", FIXED, indirect=True)
def test_data_npy_loads_with_mmap_as_the_array(reference):
    values, node, _, case = reference
    loaded = np.load(node / "data.npy", mmap_mode="r")
    # the oracle's own dtype, little-endian (types numpy lacks: as_plain_numpy's)
    assert loaded.dtype == values.dtype.newbyteorder("<"), (loaded.dtype, values.dtype)
    assert_same_values(np.array(loaded), values, case.name)
    header = len((node / "data.npy").read_bytes()) - values.nbytes
    assert os.stat(node / "data.npy").st_size == header + values.nbytes


@pytest.mark.parametrize("reference", FIXED, indirect=True)
def test_chunk_files_are_regions_padded_with_fill(reference):
    values, node, root, case = reference
    if not case.shape:
        assert not (node / "chunks").exists(), "0-d arrays have no chunk files"
        return
    chunk_shape = finest_chunk_shape(root, case)
    grid = tuple(math.ceil(n / c) for n, c in zip(case.shape, chunk_shape))
    all_coords = list(np.ndindex(*grid))
    rng = np.random.default_rng(case_seed(case))
    if len(all_coords) > CHUNK_SAMPLE:  # the corners and a random sample
        picks = {0, len(all_coords) - 1, *rng.choice(len(all_coords), CHUNK_SAMPLE - 2, replace=False).tolist()}
        all_coords = [all_coords[i] for i in sorted(picks)]
    fill = oracle_fill_value(root, case)
    itemsize = values.dtype.itemsize
    for coords in all_coords:
        region = tuple(slice(c * n, min((c + 1) * n, s)) for c, n, s in zip(coords, chunk_shape, case.shape))
        expected = fill_chunk(chunk_shape, fill, values.dtype)
        expected[tuple(slice(0, r.stop - r.start) for r in region)] = values[region]
        path = node / "chunks" / Path(*map(str, coords))
        assert os.stat(path).st_size == math.prod(chunk_shape) * itemsize
        assert path.read_bytes() == little_endian_bytes(expected), f"{case.name} chunk {coords}"


@pytest.mark.parametrize("reference", FIXED, indirect=True)
def test_random_preads_are_byte_slices(reference):
    values, node, _, case = reference
    expected = little_endian_bytes(values)
    npy = (node / "data.npy").read_bytes()
    header = len(npy) - len(expected)
    rng = np.random.default_rng(case_seed(case) + 1)
    for name, content in (("data", expected), ("data.npy", npy)):
        fd = os.open(node / name, os.O_RDONLY)
        try:
            for _ in range(PREADS):
                offset = int(rng.integers(0, len(content) + 8))
                size = int(rng.integers(1, max(2, len(content) // 2 + 2)))
                assert os.pread(fd, size, offset) == content[offset : offset + size], (
                    f"{case.name}/{name} pread({size}, {offset})"
                )
        finally:
            os.close(fd)
    assert npy[header:] == expected


@pytest.mark.parametrize("reference", VARIABLE, indirect=True)
def test_variable_length_arrays_show_data_jsonl_only(reference):
    values, node, _, case = reference
    names = set(os.listdir(node))
    assert "data.jsonl" in names
    assert not names & {"data", "data.npy", "chunks"}, names
    lines = (node / "data.jsonl").read_text(encoding="utf-8").splitlines()
    decoded = [json.loads(line) for line in lines]
    if case.dtype == "bytes":
        decoded = [base64.standard_b64decode(v) for v in decoded]
    ours = np.empty(len(decoded), dtype=object)
    ours[:] = decoded
    assert_same_values(ours.reshape(values.shape), values, case.name)
