"""Property tests: for arbitrary shapes, chunk and shard shapes and selections, a region
read equals numpy indexing of what zarr-python wrote, and a region write lands where
numpy assignment puts it."""

from __future__ import annotations

import uuid
import warnings

import numpy as np
from format_oracle import assert_same_values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zarrfs.format import Hierarchy, IOContext
from zarrfs.store import open_store

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402
import zarr.codecs as zc  # noqa: E402


@st.composite
def layouts(draw):
    """(shape, chunks, inner chunks or None, selection)."""
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0, 9)) for _ in range(ndim))
    inner = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    sharded = ndim > 0 and draw(st.booleans())
    chunks = tuple(i * draw(st.integers(1, 3)) for i in inner) if sharded else inner
    selection = []
    for n in shape:
        if n and draw(st.booleans()):
            selection.append(draw(st.integers(-n, n - 1)))
        else:
            start = draw(st.integers(-n - 2, n + 2))
            stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            selection.append(slice(start, stop))
    return shape, chunks, inner if sharded else None, tuple(selection)


def _memory_url() -> str:
    return f"memory://zarrfs-props-{uuid.uuid4().hex}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts(), fill=st.sampled_from([0, -3]), seed=st.integers(0, 2**16))
def test_region_read_equals_numpy_indexing(layout, fill, seed):
    shape, chunks, inner, selection = layout
    url = _memory_url()
    options = {"shards": chunks, "chunks": inner} if inner else {"chunks": chunks}
    theirs = zarr.create_array(url, shape=shape, dtype="<i4", fill_value=fill, compressors=[zc.ZstdCodec()], **options)
    values = np.random.default_rng(seed).integers(-100, 100, size=shape, dtype="<i4")
    if shape and all(shape):
        holes = tuple(slice(0, max(1, n // 2)) for n in shape)
        written = values.copy()
        written[holes] = fill  # whole chunks of fill are not stored
        theirs[...] = written
    else:
        written = np.full(shape, fill, dtype="<i4")
    ours = Hierarchy(open_store(url)).open_node("")
    assert_same_values(ours.read(selection), written[selection], f"{shape} {chunks} {inner} {selection}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts(), seed=st.integers(0, 2**16))
def test_region_write_equals_numpy_assignment(layout, seed):
    shape, chunks, inner, selection = layout
    url = _memory_url()
    options = {"shards": chunks, "chunks": inner} if inner else {"chunks": chunks}
    zarr.create_array(url, shape=shape, dtype="<f8", fill_value=np.nan, **options)
    expected = np.full(shape, np.nan)
    rng = np.random.default_rng(seed)
    ours = Hierarchy(open_store(url), IOContext()).open_node("")
    first = rng.normal(size=shape)
    ours.write((), first)
    expected[()] = first
    values = rng.normal(size=expected[selection].shape)
    ours.write(selection, values)
    expected[selection] = values
    assert_same_values(np.asarray(zarr.open_array(url, mode="r")[...]), expected, f"{shape} {selection}")
