"""Decode-ahead over a sharded array whose shards are large against the window's share of
the cache (bench/remote.py's dd-shard: shards of 32 chunk rows of 1 MiB, a 512 MiB cache)
while the file is followed as several readers, as one `dd` is once the kernel's reads
ahead of it land out of order: each shard is still asked for whole. (Before: the share
split between the readers left each a window shorter than a shard row, and every shard
past the first few was read as its index and a ranged GET per piece, 58-65 requests
through the S3 proxy where tensorstore makes 9.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fs.core.test_sequential_reads import _ShardedData
from zarrfs.views.ahead.policy import DecodeAhead, _Stream

ROWS, PER_SHARD = 256, 32


def _big_shards() -> _ShardedData:
    data = _ShardedData(busy=0)
    data.array.shape = (ROWS * 256, 1024)
    data.array.chunk_grid = SimpleNamespace(grid_shape=(ROWS, 1))
    data.array.sharding = SimpleNamespace(chunks_per_shard=(PER_SHARD, 1))
    return data


@pytest.mark.parametrize("readers", [1, 2, 5, 8])
def test_each_shard_is_asked_for_whole_however_many_readers_share_the_file(readers):
    data = _big_shards()
    asks: list[list[int]] = []
    data.start_decoding = lambda coords_list: (
        asks.append([row for row, _ in coords_list]),
        data.asked.extend(coords_list),
    )
    ahead = DecodeAhead(data)
    streams = [_Stream() for _ in range(readers)]
    for other in streams[:-1]:  # readers elsewhere in the file, streaming
        other.runs = SimpleNamespace(grow=lambda: 8 << 20, streams=True)
    stream = streams[-1]
    stream.runs = SimpleNamespace(grow=lambda: 64 << 20, streams=True)
    ahead._streams = streams
    assert sum(s.runs.streams for s in ahead._streams) == readers
    for row in range(ROWS):
        ahead._decode_after(stream, data, row << 20, (row + 1) << 20)
    assert sorted(row for ask in asks for row in ask) == list(range(ROWS))
    for ask in asks:  # whole shard rows, each from its first chunk row
        assert len(ask) % PER_SHARD == 0 and all(row % PER_SHARD == i % PER_SHARD for i, row in enumerate(ask)), asks


@pytest.mark.parametrize("busy", [128, 1000])
def test_a_read_entering_a_shard_not_started_has_it_asked_for_whole_whatever_the_budget(busy):
    """The reader reached a shard row decode-ahead has not started, while the bytes in
    flight are at their bound: the read's own shard row is still started, whole (one GET),
    rather than left to the read, which would fetch it in pieces (its index, then a
    ranged GET each: 14 requests where 9 do in bench/remote.py's dd-shard); nothing
    past it."""
    data = _ShardedData(busy=busy)  # 64 chunk rows of 1 MiB, shards of 8 rows
    ahead = DecodeAhead(data)
    stream = _Stream()
    stream.runs = SimpleNamespace(grow=lambda: 64 << 20, streams=True)
    stream.decoded_rows = 16  # rows 0-15 (two shards) started before
    ahead._streams = [stream]
    ahead._decode_after(stream, data, 16 << 20, (16 << 20) + (128 << 10))
    assert [row for row, _ in data.asked] == list(range(16, 24))
    ahead._decode_after(stream, data, 17 << 20, (17 << 20) + (128 << 10))  # the shard's next read
    assert [row for row, _ in data.asked] == list(range(16, 24))  # asked once


def test_a_pass_through_a_sharded_array_with_one_shard_in_flight_reads_the_array(tmp_path, monkeypatch):
    """The same through a real array, the bytes in flight bounded to one shard (every read
    that enters a shard finds the bound reached, and starts its shard past it): the bytes
    read are numpy's."""
    import numpy as np
    import zarr

    from tests.fs.core.test_sequential_reads import kernel_reads
    from zarrfs.format import ChunkCache, Hierarchy, IOContext
    from zarrfs.fs.decoded.view_files import ViewFile
    from zarrfs.store import open_store
    from zarrfs.views.ahead import policy
    from zarrfs.views.data import DataView

    monkeypatch.setattr(policy, "AHEAD_MOST_REQUESTS", 1)
    values = np.random.default_rng(7).integers(0, 1 << 30, size=(4096, 256)).astype("<i4")  # 4 MiB
    zarr.create_array(str(tmp_path / "a"), shape=values.shape, chunks=(16, 256), shards=(512, 256), dtype="<i4")[
        ...
    ] = values
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as codecs, ThreadPoolExecutor(8) as io_stage:
        context = IOContext(executor=codecs, io_executor=io_stage, cache=ChunkCache(64 << 20))
        view = DataView(Hierarchy(open_store(str(tmp_path), None, read_only=True), context).open_node("a"))
        file = ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view))
        pieces = {o: bytes(file.read(o, n)) for o, n in kernel_reads(0, view.size())}
    assert b"".join(pieces[o] for o in sorted(pieces)) == values.tobytes()
