"""An OME-NGFF 0.6 image written by ngff-zarr (its transformations' input and output are
objects naming an array path or a coordinate system): `image.ome.tif` has the physical
sizes its scale gives and the Plane positions its translation gives, as tifffile and
ome-types read them, and its levels are the arrays ngff-zarr wrote."""

from __future__ import annotations

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")
ome_types = pytest.importorskip("ome_types")
nz = pytest.importorskip("ngff_zarr")
import zarr  # noqa: E402

from tests.conftest import zarrfs  # noqa: E402


def test_an_ngff_zarr_image_has_its_physical_sizes_and_position(mount, tmp_path):
    data = np.random.default_rng(48).integers(0, 60000, (64, 96), dtype=np.uint16)
    image = nz.to_ngff_image(
        data,
        dims=["y", "x"],
        scale={"y": 0.5, "x": 0.25},
        translation={"y": 10.0, "x": 20.0},
        axes_units={"y": "micrometer", "x": "micrometer"},
    )
    nz.to_ngff_zarr(tmp_path / "img.ome.zarr", nz.to_multiscales(image, scale_factors=[2]), version="0.6")
    written = zarr.open_group(tmp_path / "img.ome.zarr", mode="r")
    assert written.attrs["ome"]["version"] == "0.6"
    paths = [d["path"] for d in written.attrs["ome"]["multiscales"][0]["datasets"]]
    m = mount(tmp_path)
    with tifffile.TiffFile(m / "img.ome.zarr" / "image.ome.tif") as tif:
        series = tif.series[0]
        assert series.axes == "YX" and len(series.levels) == len(paths) == 2
        for level, path in zip(series.levels, paths):
            np.testing.assert_array_equal(level.asarray(), written[path][...])
        pixels = ome_types.from_xml(tif.ome_metadata).images[0].pixels
    assert pixels.physical_size_x == pytest.approx(0.25) and pixels.physical_size_y == pytest.approx(0.5)
    assert pixels.physical_size_x_unit.value == "µm" and pixels.physical_size_y_unit.value == "µm"
    (plane,) = pixels.planes
    assert plane.position_x == pytest.approx(20) and plane.position_y == pytest.approx(10)
    info = zarrfs("info", tmp_path / "img.ome.zarr", "/").stdout
    assert "OME-TIFF of NGFF 0.6 image" in info and "physical sizes:     X 0.25 µm, Y 0.5 µm" in info
