"""NGFF 0.6 (RFC-5: coordinate systems and transformations) images written by hand from
the spec's examples with zarr-python (no writer of 0.6 is installed): `image.ome.tif`
has the physical sizes their scales give, the Planes' positions their translations
give, as tifffile and ome-types read them; `info` names the transformations the file
does not carry."""

from __future__ import annotations

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")
ome_types = pytest.importorskip("ome_types")
import zarr  # noqa: E402

from tests.conftest import zarrfs  # noqa: E402


def _levels(root, full: np.ndarray, reduced_axes: int) -> list[np.ndarray]:
    levels = []
    for k in range(3):
        f = 2**k
        level = full[(slice(None),) * (full.ndim - reduced_axes) + (slice(None, None, f),) * reduced_axes]
        root.create_array(str(k), shape=level.shape, dtype=level.dtype, chunks=level.shape)[:] = level
        levels.append(level)
    return levels


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """spec.zarr: the spec's multiscales example (t, c, z, y, x; 0.5 µm voxels at the first
    level, 0.1 ms per time point); placed.zarr: its transformations example (y, x; an
    intrinsic system scaled by 10 into the physical one), the first level translated by
    (5, 7) before, and an affine into a third system after."""
    root = tmp_path_factory.mktemp("ngff06")
    spec = zarr.open_group(root / "spec.zarr", mode="w", zarr_format=3)
    full = np.random.default_rng(6).integers(0, 60000, (2, 2, 4, 32, 48), dtype=np.uint16)
    levels = _levels(spec, full, 2)
    spec.attrs["ome"] = {
        "version": "0.6",
        "multiscales": [
            {
                "name": "physical",
                "coordinateSystems": [
                    {
                        "name": "physical",
                        "axes": [
                            {"name": "t", "type": "time", "unit": "millisecond"},
                            {"name": "c", "type": "channel"},
                            {"name": "z", "type": "space", "unit": "micrometer"},
                            {"name": "y", "type": "space", "unit": "micrometer"},
                            {"name": "x", "type": "space", "unit": "micrometer"},
                        ],
                    }
                ],
                "datasets": [
                    {
                        "path": str(k),
                        "coordinateTransformations": [
                            {"type": "scale", "scale": [0.1, 1.0, 0.5, 0.5 * 2**k, 0.5 * 2**k],
                             "input": str(k), "output": "physical"}
                        ],
                    }
                    for k in range(3)
                ],
                "type": "gaussian",
            }
        ],
    }  # fmt: skip
    placed = zarr.open_group(root / "placed.zarr", mode="w", zarr_format=3)
    _levels(placed, np.arange(40 * 56, dtype=np.float32).reshape(40, 56), 2)
    axes = [{"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}]
    placed.attrs["ome"] = {
        "version": "0.6",
        "multiscales": [
            {
                "name": "image_with_coordinateTransformations",
                "coordinateSystems": [
                    {"name": "physical", "axes": axes},
                    {"name": "intrinsic", "axes": axes},
                    {"name": "rotated", "axes": axes},
                ],
                "datasets": [
                    {
                        "path": "0",
                        "coordinateTransformations": [
                            {"type": "sequence", "input": "0", "output": "intrinsic", "transformations": [
                                {"type": "scale", "scale": [1, 1]},
                                {"type": "translation", "translation": [5, 7]},
                            ]}
                        ],
                    },
                    *({"path": str(k), "coordinateTransformations": [
                        {"type": "scale", "scale": [2**k, 2**k], "input": str(k), "output": "intrinsic"}]}
                      for k in (1, 2)),
                ],
                "coordinateTransformations": [
                    {"type": "scale", "scale": [10, 10], "input": "intrinsic", "output": "physical"},
                    {"type": "affine", "affine": [[0, -1, 0], [1, 0, 0]], "input": "physical", "output": "rotated"},
                ],
            }
        ],
    }  # fmt: skip
    return root, levels


@pytest.fixture(scope="module")
def mounted(module_mount, stores):
    return module_mount(stores[0])


def _pixels(path):
    with tifffile.TiffFile(path) as tif:
        assert tif.is_ome
        return tif, ome_types.from_xml(tif.ome_metadata).images[0].pixels


def test_the_spec_example_has_its_voxel_size_and_time_increment(mounted, stores):
    _, levels = stores
    path = mounted / "spec.zarr" / "image.ome.tif"
    with tifffile.TiffFile(path) as tif:
        series = tif.series[0]
        assert series.axes == "TCZYX" and series.shape == levels[0].shape and len(series.levels) == 3
        for got, want in zip(series.levels, levels):
            np.testing.assert_array_equal(got.asarray(), want)
        pixels = ome_types.from_xml(tif.ome_metadata).images[0].pixels
    for dim in "xyz":
        assert getattr(pixels, f"physical_size_{dim}") == pytest.approx(0.5)
        assert getattr(pixels, f"physical_size_{dim}_unit").value == "µm"
    assert pixels.time_increment == pytest.approx(0.1) and pixels.time_increment_unit.value == "ms"
    assert pixels.planes == []  # no translation: no positions
    info = zarrfs("info", stores[0] / "spec.zarr", "/").stdout
    assert "OME-TIFF of NGFF 0.6 image 'physical', axes TCZYX" in info and "not carried" not in info


def test_translations_are_plane_positions_and_other_transformations_are_named(mounted, stores):
    path = mounted / "placed.zarr" / "image.ome.tif"
    with tifffile.TiffFile(path) as tif:
        pixels = ome_types.from_xml(tif.ome_metadata).images[0].pixels
        assert len(tif.series[0].levels) == 3
    assert pixels.physical_size_x == pytest.approx(10) and pixels.physical_size_y == pytest.approx(10)
    assert pixels.physical_size_x_unit.value == "µm"
    (plane,) = pixels.planes
    assert plane.position_x == pytest.approx(70) and plane.position_y == pytest.approx(50)
    assert plane.position_x_unit.value == "µm"
    info = zarrfs("info", stores[0] / "placed.zarr", "/").stdout
    assert "translation:" in info and "X 70, Y 50" in info
    assert "transformations affine (OME-TIFF has no place for them)" in info
