"""`info`'s transform line where the transform is read from coordinate values: its size is
known before any chunk is read, so the line is blanks of the widest the coordinates'
types can print it, and once read it says the transform (numpy's arithmetic on the
coordinates zarr-python reads back is the oracle) within that width."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from zarrfs.format import Hierarchy
from zarrfs.store import open_store
from zarrfs.views.georef import describe, georeference
from zarrfs.views.neighbours import HierarchyNeighbours

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def write_grid(root: Path, y: np.ndarray, x: np.ndarray) -> None:
    g = zarr.open_group(root, mode="w")
    g.create_array("t", shape=(len(y), len(x)), chunks=(2, 2), dtype="float32", dimension_names=["y", "x"])
    for name, values in (("y", y), ("x", x)):
        a = g.create_array(name, shape=values.shape, chunks=(2,), dtype=values.dtype, dimension_names=[name])
        a[:] = values


def lines(root: Path) -> tuple[str, str]:
    hierarchy = Hierarchy(open_store(str(root)))
    array = hierarchy.open_node("t")
    found = georeference(array, HierarchyNeighbours(hierarchy, "t"))
    return dict(describe(found, False))["transform"], dict(describe(found, True))["transform"]


# the widest "%.17g" numbers each type of coordinate can give: four numbers of the
# transform are computed from them, two are zero ("0")
@pytest.mark.parametrize(
    ("dtype", "start", "step", "widest"),
    [
        ("float64", -1.2345678901234567e-300, 1.1111111111111111e-301, 24),
        ("float32", -1.2345678e-30, 1.1111111e-31, 23),
        ("int32", -2_000_000_001, 3, 23),
    ],
)
def test_the_blank_line_is_as_wide_as_the_coordinates_types_can_print(tmp_path, dtype, start, step, widest):
    y = np.arange(5, dtype=dtype) * np.asarray(step, dtype) + np.asarray(start, dtype)
    x = np.arange(7, dtype=dtype) * np.asarray(step, dtype) + np.asarray(start, dtype)
    root = tmp_path / "s.zarr"
    write_grid(root, y, x)
    blank, text = lines(root)
    source = " (from regular coordinates 'y', 'x')"
    assert blank == " " * (2 + 4 * widest + 2 * len("0") + 5 * len(", ") + len(source))
    assert len(text) == len(blank)
    shown, _, rest = text.partition(source)
    assert rest.strip() == ""
    # numpy on the coordinates zarr-python reads back: pixel centres, so the corner is half a step out
    ys, xs = (np.asarray(zarr.open_array(root / n)[:], dtype=np.float64) for n in ("y", "x"))
    dy, dx = (ys[-1] - ys[0]) / (len(ys) - 1), (xs[-1] - xs[0]) / (len(xs) - 1)
    expected = (xs[0] - dx / 2, dx, 0.0, ys[0] - dy / 2, 0.0, dy)
    assert tuple(float(v) for v in shown.strip("()").split(", ")) == expected


def test_irregular_coordinates_say_so_within_the_width(tmp_path):
    root = tmp_path / "s.zarr"
    write_grid(root, np.array([0.0, 1.0, 5.0]), np.arange(4, dtype="float64"))
    blank, text = lines(root)
    assert len(text) == len(blank) and text.rstrip() == "none: coordinate 'y' is irregular: not georeferenced"
