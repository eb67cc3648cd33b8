"""`data.jsonl` holds one JSON value per element of zarr-python's values, C order, at any
offset and read in any pieces; its size (0: unknown, the file is read to its end) costs
no chunk, and a read holds the blocks of elements it covers, not the whole text."""

from __future__ import annotations

import base64
import json
import tracemalloc
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.store import open_store
from zarrfs.views import jsonl

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

SHAPES = [((13, 11), (4, 5), "str"), ((40,), (7,), "bytes"), ((), (), "str"), ((3, 0), (2, 2), "str")]


@pytest.fixture(scope="module")
def executor():
    with ThreadPoolExecutor(2) as pool:
        yield pool


def _open(path, executor, name: str = "a"):
    context = IOContext(executor=executor, cache=ChunkCache(16 << 20))
    return Hierarchy(open_store(str(path), None, read_only=True), context).open_node(name)


def _expected(values: np.ndarray) -> bytes:
    """The lines the contract asks for, from zarr-python's values."""

    def line(v) -> str:
        return json.dumps(base64.standard_b64encode(v).decode() if isinstance(v, bytes) else v, ensure_ascii=False)

    return "".join(line(v) + "\n" for v in np.asarray(values, dtype=object).reshape(-1)).encode()


@pytest.mark.parametrize(("shape", "chunks", "kind"), SHAPES, ids=str)
def test_reads_in_any_pieces_at_any_offset_are_the_lines_of_zarr_pythons_values(
    tmp_path, executor, monkeypatch, shape, chunks, kind
):
    monkeypatch.setattr(jsonl, "BLOCK_ELEMENTS", 6, raising=False)  # many blocks, and reads across them
    rng = np.random.default_rng(5)
    count = int(np.prod(shape))
    if kind == "str":
        values = np.array(
            [('é"\\\n' if i % 3 else "") + "x" * int(rng.integers(0, 9)) for i in range(count)], dtype=object
        )
    else:
        values = np.array(
            [bytes(rng.integers(0, 256, int(rng.integers(0, 9)), dtype="u1")) for _ in range(count)], dtype=object
        )
    array = zarr.create_array(str(tmp_path / "a"), shape=shape, chunks=chunks or "auto", dtype=kind)
    if count:
        array[...] = values.reshape(shape)
    expected = _expected(zarr.open_array(str(tmp_path / "a"), mode="r")[...])
    node = _open(tmp_path, executor)
    for piece in (1, 5, 64, 1 << 20):
        view, parts, offset = jsonl.jsonl_view(node), [], 0
        while part := view.read(offset, piece):
            parts.append(part)
            offset += len(part)
        assert b"".join(parts) == expected
    view = jsonl.jsonl_view(node)
    for _ in range(40):  # a fresh view read at random: the blocks before an offset are rendered then
        offset, size = int(rng.integers(0, len(expected) + 3)), int(rng.integers(1, 40))
        assert view.read(offset, size) == expected[offset : offset + size]
        cached = view.read_cached(offset, size)
        assert cached is None or cached == expected[offset : offset + size]


def test_its_size_costs_no_chunk_and_a_read_holds_a_block_not_the_whole_text(tmp_path, executor):
    n = 1 << 19
    zarr.create_array(str(tmp_path / "s"), shape=(n,), chunks=(1 << 13,), dtype=str)[...] = np.array(
        [f"value number {i:08d}" for i in range(n)], dtype=object
    )
    node = _open(tmp_path, executor, "s")
    view = jsonl.jsonl_view(node)
    assert view.size() == 0 and view.cached_size() == 0
    assert node.context.stats.snapshot().get("cache_misses", 0) == 0  # nothing decoded for it
    expected = _expected(zarr.open_array(str(tmp_path / "s"), mode="r")[:4000])
    tracemalloc.start()
    try:
        head = view.read(0, 1 << 16)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert head == expected[: 1 << 16]
    total = n * len('"value number 00000000"\n')
    assert peak < total // 6, f"{peak >> 10} KiB held to read 64 KiB of {total >> 10} KiB"
