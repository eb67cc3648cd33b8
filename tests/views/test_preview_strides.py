"""preview.py's plan of a regular grid is worked out in numpy, all positions at once (a
listing asks `info`'s size, which makes one): the same chunks and places as the
position-by-position rule it replaces, which rectilinear grids still follow."""

from __future__ import annotations

import random

from zarrfs.format.chunk_grid import RegularChunkGrid
from zarrfs.views import preview


def test_a_regular_grid_gives_what_the_rule_gives_position_by_position():
    rng = random.Random(7)
    cases = [(100, 50, 100, 1), (100, 50, 100, 2), (7, 7, 7, 1), (1000, 1, 512, 3), (512, 1000, 512, 1)]
    for _ in range(400):
        extent = rng.randint(1, 5000)
        cases.append((extent, rng.randint(1, 700), rng.randint(1, min(extent, 512)), rng.randint(1, 12)))
    for extent, size, count, stride in cases:
        grid = RegularChunkGrid((extent,), (size,))
        positions = preview._positions(extent, count)
        expected = preview._strided_each(grid, 0, extent, positions, stride)
        assert preview._strided(grid, 0, extent, positions, stride) == expected, (extent, size, count, stride)
        assert all(isinstance(v, int) for v in preview._strided(grid, 0, extent, positions, stride)[1])


def test_lengths_past_an_int64_product_follow_the_rule_position_by_position():
    extent = 1 << 40
    grid = RegularChunkGrid((extent,), (3 << 33,))
    positions = preview._positions(extent, 512)
    assert preview._strided(grid, 0, extent, positions, 1) == preview._strided_each(grid, 0, extent, positions, 1)
