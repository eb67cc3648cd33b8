"""Which chunks are all fill value (and so are erased rather than stored): bit for bit for
floats and compound types, by value for integers and booleans, however far into the chunk
the first difference lies. The expected answers come from numpy comparisons written out
here, not from the code under test."""

from __future__ import annotations

import numpy as np
import pytest

from zarrfs.format.dtypes import parse_v3_data_type
from zarrfs.format.fill_values import is_fill, parse_fill_value

N = 200_003  # more than one block of comparisons, and not a multiple of one


def _with_last(values: np.ndarray, last) -> np.ndarray:
    out = values.copy()
    out.reshape(-1)[-1] = last
    return out


CASES = [
    # (data type, JSON fill value, chunk, expected)
    ("float32", 0.0, np.zeros(N, "f4"), True),
    ("float32", 0.0, _with_last(np.zeros(N, "f4"), -0.0), False),  # -0.0 is not 0.0
    ("float32", 0.0, _with_last(np.zeros(N, "f4"), 1e-30), False),
    ("float32", -0.0, np.full(N, -0.0, "f4"), True),
    ("float32", "NaN", np.full(N, np.nan, "f4"), True),
    ("float64", "NaN", _with_last(np.full(N, np.nan), 0.0), False),
    ("float64", 1.5, np.random.default_rng(0).random(N), False),
    ("complex128", [0.0, 0.0], np.zeros(N, "c16"), True),
    ("complex128", [0.0, 0.0], _with_last(np.zeros(N, "c16"), 1j), False),
    ("complex64", [1.0, "NaN"], np.full(N, complex(1, np.nan), "c8"), True),
    ("int16", 3, np.full(N, 3, "i2"), True),
    ("int16", 3, _with_last(np.full(N, 3, "i2"), 4), False),
    ("uint64", 2**64 - 1, np.full(N, 2**64 - 1, "u8"), True),
    ("bool", False, np.zeros(N, "?"), True),
    ("bool", False, _with_last(np.zeros(N, "?"), True), False),
    ("uint8", 7, np.full((64, 64, 64), 7, "u1")[:, ::2], True),  # not contiguous
    ("float32", 0.0, _with_last(np.zeros((64, 64, 64), "f4"), 2.0)[:, ::2], True),  # the last is skipped
]


@pytest.mark.parametrize(("name", "fill", "chunk", "expected"), CASES)
def test_a_chunk_is_fill_only_when_every_element_is(name, fill, chunk, expected):
    dtype = parse_v3_data_type(name)
    assert is_fill(chunk, parse_fill_value(fill, dtype, 3), dtype) is expected


def test_a_structured_fill_is_compared_bit_for_bit():
    dtype = parse_v3_data_type("r48")  # 6-byte raw bits: compared as voids
    fill = parse_fill_value([1, 2, 3, 4, 5, 6], dtype, 3)
    chunk = np.full(N, fill, dtype=dtype.numpy)
    assert is_fill(chunk, fill, dtype)
    chunk[N // 2] = np.frombuffer(bytes([1, 2, 3, 4, 5, 7]), dtype=dtype.numpy)[0]
    assert not is_fill(chunk, fill, dtype)
