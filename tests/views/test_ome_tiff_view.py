"""`image.ome.tif` as a view, without a mount: its size is known from the metadata alone,
a BigTIFF holds the same pyramid, and reads of any range agree with the whole file."""

from __future__ import annotations

import io
import warnings
from xml.etree import ElementTree

import numpy as np
import pytest

from zarrfs.format import Hierarchy
from zarrfs.store import open_store
from zarrfs.views.legacy.tiff import TiffView
from zarrfs.views.neighbours import HierarchyNeighbours
from zarrfs.views.ngff import Image, NotAnImage, image_of
from zarrfs.views.ometiff import ome_tiff_view

tifffile = pytest.importorskip("tifffile")
warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


def write_image(path, dtype="uint16", chunks=(1, 32, 48), axes=None) -> None:
    """NGFF 0.4 by hand: (c, y, x), three levels halved in Y and X."""
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    full = (np.arange(2 * 64 * 96) % 5000).astype(dtype).reshape(2, 64, 96)
    for k in range(3):
        level = full[:, :: 2**k, :: 2**k]
        root.create_array(str(k), shape=level.shape, chunks=chunks, dtype=dtype)[:] = level
    root.attrs["multiscales"] = [
        {
            "version": "0.4",
            "axes": axes
            or [
                {"name": "c", "type": "channel"},
                {"name": "y", "type": "space", "unit": "micrometer"},
                {"name": "x", "type": "space", "unit": "micrometer"},
            ],
            "datasets": [
                {"path": str(k), "coordinateTransformations": [{"type": "scale", "scale": [1, 0.5 * 2**k, 0.5 * 2**k]}]}
                for k in range(3)
            ],
        }
    ]


def open_image(path) -> Image | NotAnImage:
    hierarchy = Hierarchy(open_store(str(path)))
    return image_of(hierarchy.open_node(""), "", HierarchyNeighbours(hierarchy, ""))


def test_bigtiff_holds_the_same_pyramid(tmp_path):
    write_image(tmp_path / "i.zarr")
    image = open_image(tmp_path / "i.zarr")
    first, *rest = image.levels
    view = TiffView(
        first.array,
        overviews=[(lv.array, None) for lv in rest],
        bigtiff=True,
        subifds=True,
        tiles=True,
        description=b"<OME/>",
    )
    content = view.read(0, view.size())
    assert len(content) == view.size()
    with tifffile.TiffFile(io.BytesIO(content)) as tif:
        assert tif.is_bigtiff
        levels = [page.asarray() for page in tif.pages[0].pages]
        assert [level.shape for level in levels] == [lv.array.shape[1:] for lv in rest]
        stored = zarr.open_group(str(tmp_path / "i.zarr"), mode="r")
        np.testing.assert_array_equal(tif.pages[1].asarray(), stored["0"][1])
        np.testing.assert_array_equal(levels[0], stored["1"][0])


def test_reads_of_any_range_agree_with_the_whole_file(tmp_path):
    write_image(tmp_path / "i.zarr")
    view = ome_tiff_view(open_image(tmp_path / "i.zarr"), lambda array: None)
    whole = view.read(0, view.size())
    rng = np.random.default_rng(1)
    for _ in range(200):
        offset = int(rng.integers(0, view.size()))
        size = int(rng.integers(1, 20000))
        assert view.read(offset, size) == whole[offset : offset + size]


@pytest.mark.parametrize(
    ("dtype", "axes", "reason"),
    [
        ("int64", None, "64-bit"),
        (
            "uint16",
            [{"name": "c", "type": "channel"}, {"name": "x", "type": "space"}, {"name": "y", "type": "space"}],
            None,
        ),
        (
            "uint16",
            [{"name": "c", "type": "angle"}, {"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
            "not one of OME's",
        ),
    ],
)
def test_images_ome_tiff_cannot_hold_say_why(tmp_path, dtype, axes, reason):
    write_image(tmp_path / "i.zarr", dtype=dtype, axes=axes)
    found = open_image(tmp_path / "i.zarr")
    assert isinstance(found, NotAnImage)
    if reason:
        assert reason in found.reason


def test_names_with_characters_xml_cannot_hold_keep_the_ome_xml_well_formed(tmp_path):
    write_image(tmp_path / "i.zarr")
    root = zarr.open_group(str(tmp_path / "i.zarr"))
    root.attrs["multiscales"] = [{**root.attrs["multiscales"][0], "name": "scan\x1b[1m"}]
    root.attrs["omero"] = {"channels": [{"label": "DAPI\x01", "color": "0000FF"}, {"label": "lone \ud800"}]}
    view = ome_tiff_view(open_image(tmp_path / "i.zarr"), lambda array: None)
    with tifffile.TiffFile(io.BytesIO(view.read(0, view.size()))) as tif:
        assert tif.is_ome and tif.series[0].axes == "CYX"
        np.testing.assert_array_equal(tif.series[0].asarray(), root["0"][:])
        ome = ElementTree.fromstring(tif.ome_metadata)
    names = [c.get("Name") for c in ome.iter("{http://www.openmicroscopy.org/Schemas/OME/2016-06}Channel")]
    assert names == ["DAPI\ufffd", "lone \ufffd"]


def test_a_geozarr_multiscales_object_is_no_ome_zarr_image(tmp_path):
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=3)
    root.attrs["multiscales"] = {"layout": [{"asset": "r10m"}]}
    assert open_image(tmp_path / "g.zarr") is None
