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
