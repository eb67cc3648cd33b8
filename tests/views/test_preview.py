"""`preview.png` without a mount: the PNG writer (exact sizes known beforehand, the same
bytes every time, Pillow reads them back), which arrays show a picture, how few chunks a
huge array's picture reads, and how values become colours."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import pytest

from zarrfs.format import Hierarchy
from zarrfs.store import open_store
from zarrfs.views import png, preview_colours
from zarrfs.views.base import StoredChunks
from zarrfs.views.neighbours import HierarchyNeighbours
from zarrfs.views.preview import MAX_CHUNK_READS, Axes, array_preview, picture_axes, preview_size

Image = pytest.importorskip("PIL.Image")
warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def decoded(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGBA"))


@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (300, 512), (512, 512)])
def test_png_is_its_announced_size_the_same_every_time_and_pillow_reads_it(shape):
    rng = np.random.default_rng(1)
    palette = rng.integers(0, 256, (256, 4), dtype=np.uint8)
    index = rng.integers(0, 256, shape, dtype=np.uint8)
    data = png.encode(index, palette)
    assert len(data) == png.png_size(shape[1], shape[0], png.PALETTE) and data == png.encode(index, palette)
    assert np.array_equal(decoded(data), palette[index])
    rgba = rng.integers(0, 256, (*shape, 4), dtype=np.uint8)
    data = png.encode(rgba)
    assert len(data) == png.png_size(shape[1], shape[0], png.RGBA)
    assert np.array_equal(decoded(data), rgba)


def open_array(tmp_path, shape, chunks, dtype, **kwargs):
    zarr.create_array(str(tmp_path / "a.zarr"), shape=shape, chunks=chunks, dtype=dtype, **kwargs)
    hierarchy = Hierarchy(open_store(str(tmp_path / "a.zarr")))
    return hierarchy, hierarchy.open_node("")


@pytest.mark.parametrize(
    ("shape", "dtype", "axes"),
    [
        ((4, 5), "float32", Axes(0, 1)),
        ((3, 1, 6), "int16", Axes(0, 2)),
        ((9, 4, 5), "uint8", Axes(1, 2)),  # a stack: its middle plane
        ((4, 5, 3), "uint8", Axes(0, 1, 2)),  # RGB
        ((4, 5, 4), "uint16", Axes(0, 1, 2)),  # RGBA
        ((4, 5, 3), "int8", Axes(1, 2)),  # no RGB: signed
        ((4, 5), "bool", Axes(0, 1)),
        ((1, 1, 5), "float64", None),  # one dimension longer than 1
        ((4, 5), "str", None),
        ((4, 5), "complex64", None),
    ],
)
def test_which_arrays_show_a_picture(tmp_path, shape, dtype, axes):
    assert picture_axes(open_array(tmp_path, shape, shape, dtype)[1]) == axes


class CountedChunks(StoredChunks):
    def __init__(self, array) -> None:
        super().__init__(array)
        self.read: list[tuple[int, ...]] = []

    def read_chunks(self, coords_list, consume=None):
        self.read += coords_list
        return super().read_chunks(coords_list, consume)


def test_a_huge_array_is_pictured_from_at_most_64_whole_chunks(tmp_path):
    hierarchy, array = open_array(tmp_path, (3, 100_000, 50_000), (1, 100, 100), "float32", fill_value=float("nan"))
    chunks = CountedChunks(array)
    view = array_preview(array, chunks, HierarchyNeighbours(hierarchy, ""))
    data = view.read(0, view.size())
    assert len(data) == view.size() == preview_size(array)
    assert decoded(data).shape == (512, 256, 4)
    assert len(chunks.read) == len(set(chunks.read)) <= MAX_CHUNK_READS
    assert {c[0] for c in chunks.read} == {1}  # the middle plane alone
    assert not decoded(data)[..., 3].any()  # nothing written: all NaN, all transparent


def test_a_strided_picture_samples_each_chunk_read_at_its_runs_fraction(tmp_path):
    hierarchy, array = open_array(tmp_path, (2048, 2048), (16, 16), "int32")
    values = np.add.outer(np.arange(2048) * 10_000, np.arange(2048)).astype(np.int32)
    zarr.open_array(str(tmp_path / "a.zarr"))[:] = values
    chunks = CountedChunks(array)
    view = array_preview(array, chunks, HierarchyNeighbours(hierarchy, ""))
    picture = view.plan.read(chunks)
    assert picture.shape == (512, 512) and len(chunks.read) <= MAX_CHUNK_READS
    rows, columns = picture // 10_000, picture % 10_000
    # every value comes from the array, in order down and across
    assert (np.diff(rows, axis=0) >= 0).all() and (np.diff(columns, axis=1) >= 0).all()
    assert rows.min() < 16 and rows.max() >= 2048 - 256 and columns.max() >= 2048 - 256
    assert "64 chunks (1 in 16 of the 128 across, 1 in 16 of the 128 down)" in view.plan.describe()


def test_one_band_maps_robust_percentiles_through_viridis_nan_and_fill_transparent():
    values = np.linspace(0, 1, 100).reshape(10, 10)
    values[0, 0], values[0, 1], values[9, 9] = np.nan, -5.0, 1e9  # outliers: clipped, not stretched
    index, palette, window = preview_colours.one_band(values, -5.0)
    assert index[0, 0] == index[0, 1] == preview_colours.TRANSPARENT and palette[preview_colours.TRANSPARENT, 3] == 0
    assert window is not None and 0 < window[0] < 0.05 and 0.95 < window[1] < 1
    assert index[0, 2] == 0 and index[9, 9] == 254 and (np.diff(index.ravel()[2:]) >= 0).all()
    assert palette[0, :3].tolist() == [68, 1, 84] and palette[254, :3].tolist() == [253, 231, 37]  # viridis


def test_booleans_are_black_and_white():
    index, palette, _ = preview_colours.one_band(np.array([[True, False]]), False)
    assert palette[index].tolist() == [[[255, 255, 255, 255], [0, 0, 0, 255]]]


def test_channels_take_their_declared_colours_and_windows():
    omero = {
        "channels": [
            {"color": "FF0000", "window": {"start": 10, "end": 20}},
            {"color": "0000FF", "active": False},
            {"color": "00FF00"},
        ]
    }
    shown = preview_colours.active_channels(omero, 3, 8)
    channels = preview_colours.channels_of(omero, shown)
    assert shown == [0, 2] and channels[0] == preview_colours.Channel((255, 0, 0), (10.0, 20.0))
    values = np.array([[[15, 0], [20, 8]], [[0, 0], [5, 4]]], dtype=np.uint16)[..., [0, 1]]
    pixels, windows = preview_colours.composite(values, channels, 0)
    assert pixels[0, 0].tolist() == [128, 0, 0, 255]  # half way across the red window
    assert pixels[1, 0, 3] == 0  # every channel at the fill value
    assert windows[0] == (10.0, 20.0)


@pytest.mark.parametrize("name", ["issue_example", "overhanging", "partly_written", "sharded", "transposed_big_endian"])
def test_rectilinear_and_sharded_arrays_picture_their_values(name):
    corpus = Path(__file__).resolve().parents[1] / "data" / "zarr34" / "rectilinear"
    hierarchy = Hierarchy(open_store(str(corpus / "store")))
    array = hierarchy.open_node(name)
    view = array_preview(array, None, HierarchyNeighbours(hierarchy, name))
    expected = np.load(corpus / "expected" / f"{name}.npy")  # as zarr-python read it
    values = view.plan.read(StoredChunks(array))
    assert np.array_equal(values, expected if expected.ndim == 2 else expected[expected.shape[0] // 2])


def test_a_geozarr_pyramid_is_pictured_from_its_coarsest_level_large_enough(tmp_path):
    from tests.fs.mount.test_geotiff_mount import MULTISCALES_CONVENTION, PROJ_CONVENTION, SPATIAL_CONVENTION

    pyramid = zarr.open_group(tmp_path / "p.zarr", mode="w", zarr_format=3)
    pyramid.attrs.update(
        {
            "zarr_conventions": [PROJ_CONVENTION, SPATIAL_CONVENTION, MULTISCALES_CONVENTION],
            "proj:code": "EPSG:32633",
            "spatial:dimensions": ["y", "x"],
            "multiscales": {
                "layout": [
                    {"asset": "r10m", "transform": {"scale": [1.0, 1.0]}},
                    {"asset": "r20m", "derived_from": "r10m", "transform": {"scale": [2.0, 2.0]}},
                    {"asset": "r40m", "derived_from": "r20m", "transform": {"scale": [2.0, 2.0]}},
                ]
            },
        }
    )
    for factor, level in ((1, "r10m"), (2, "r20m"), (4, "r40m")):
        b = pyramid.create_group(level).create_array(
            "b",
            shape=(1200 // factor, 800 // factor),
            chunks=(100, 100),
            dtype="float32",
            fill_value=-1.0,
            dimension_names=["y", "x"],
        )
        b.attrs.update(
            {
                "zarr_conventions": [SPATIAL_CONVENTION],
                "spatial:transform": [10.0 * factor, 0.0, 500000.0, 0.0, -10.0 * factor, 4200000.0],
            }
        )
    zarr.open_array(tmp_path / "p.zarr" / "r20m" / "b")[:] = 5.0  # the other levels: the fill value
    hierarchy = Hierarchy(open_store(str(tmp_path / "p.zarr")))
    array = hierarchy.open_node("r10m/b")
    view = array_preview(array, None, HierarchyNeighbours(hierarchy, "r10m/b"))
    assert view.plan.level.path == "r20m/b" and view.plan.shape == (512, 341)
    assert (decoded(view.read(0, view.size()))[..., 3] == 255).all()


def test_info_of_an_array_with_a_corrupt_chunk_is_read_whole(tmp_path):
    from zarrfs.views.info import InfoView

    zarr.create_array(str(tmp_path / "a.zarr"), shape=(8, 8), chunks=(4, 4), dtype="float32")[:] = 1.0
    (tmp_path / "a.zarr" / "c" / "0" / "0").write_bytes(b"not zstd")  # the preview reads it
    hierarchy = Hierarchy(open_store(str(tmp_path / "a.zarr")))
    view = InfoView(hierarchy.open_node(""), "/", HierarchyNeighbours(hierarchy, ""))
    size = view.size()
    text = view.read(0, size)  # a chunk the preview cannot read costs its range, not the file
    assert len(text) == size and b"preview.png:" in text


def test_an_ome_zarr_image_with_no_channel_axis_is_pictured_whole(tmp_path):
    from zarrfs.views.ngff import image_of
    from zarrfs.views.preview import image_preview

    root = zarr.open_group(str(tmp_path / "i.zarr"), mode="w", zarr_format=2)
    rows = np.repeat(np.arange(1, 101, dtype=np.uint8)[:, None], 70, axis=1)
    root.create_array("0", shape=(100, 70), chunks=(30, 30), dtype="uint8")[:] = rows
    root.attrs["multiscales"] = [
        {
            "version": "0.4",
            "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
            "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1]}]}],
        }
    ]
    hierarchy = Hierarchy(open_store(str(tmp_path / "i.zarr")))
    group = hierarchy.open_node("")
    image = image_of(group, "", HierarchyNeighbours(hierarchy, ""))
    view = image_preview(image, group.attributes, StoredChunks)
    data = view.read(0, view.size() + 1)
    assert len(data) == view.size()  # the size stat gives: the whole file
    pixels = decoded(data)
    assert pixels.shape == (100, 70, 4) and (pixels[..., 3] == 255).all()
    assert (pixels[0, :, :3] == 0).all() and (pixels[-1, :, :3] == 255).all()  # black to white, alone
