"""The demo hierarchy: zarr-python opens every array in it and reads the values the demo's
generators intend, and the demo comes out the same on every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from zarrfs import demo
from zarrfs.views.conventions import parse_conventions

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    demo.write_demo(str(root))
    return root


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        os.path.relpath(os.path.join(d, n), root): without_gzip_mtime(Path(d, n).read_bytes())
        for d, _, files in os.walk(root)
        for n in files
    }


def without_gzip_mtime(data: bytes) -> bytes:
    # numcodecs' GZip stamps the time of compression into the gzip header (bytes 4-7)
    return data[:4] + bytes(4) + data[8:] if data[:3] == b"\x1f\x8b\x08" else data


@pytest.mark.parametrize("path", sorted(demo.DEMO_ARRAYS))
def test_zarr_python_reads_the_intended_values(demo_dir, path):
    array = zarr.open_array(demo_dir, path=path, mode="r")
    intended = demo.DEMO_ARRAYS[path]()
    values = array[...]
    assert values.shape == intended.shape
    if intended.dtype == object:
        assert values.tolist() == intended.tolist()
    else:
        assert values.dtype == intended.dtype
        np.testing.assert_array_equal(values, intended)  # NaN equals NaN here


def test_every_array_in_the_store_is_listed(demo_dir):
    arrays = set()
    for directory, _, files in os.walk(demo_dir):
        v3_array = "zarr.json" in files and json.loads(Path(directory, "zarr.json").read_text())["node_type"] == "array"
        if v3_array or ".zarray" in files:
            arrays.add(os.path.relpath(directory, demo_dir))
    assert arrays == set(demo.DEMO_ARRAYS)


def test_legacy_group_is_zarr_v2_with_a_big_endian_f_order_blosc_array(demo_dir):
    group = zarr.open_group(demo_dir / "legacy", mode="r", zarr_format=2)
    assert group.attrs["description"]
    elevation = zarr.open_array(demo_dir, path="legacy/elevation", mode="r", zarr_format=2)
    assert elevation.dtype == np.dtype(">i2")
    assert elevation.order == "F"
    assert json.loads((demo_dir / "legacy/elevation/.zarray").read_text())["compressor"]["id"] == "blosc"
    readings = json.loads((demo_dir / "legacy/readings/.zarray").read_text())
    assert (readings["dtype"], readings["dimension_separator"]) == ("<f8", "/")
    assert (demo_dir / "legacy/readings/2/2").is_file()


def test_temperature_has_dimension_names_and_zstd(demo_dir):
    temp = zarr.open_array(demo_dir, path="climate/temp", mode="r")
    assert temp.metadata.dimension_names == ("time", "lat", "lon")
    assert temp.dtype == np.float32 and temp.ndim == 3 and temp.nchunks > 1
    assert [c["name"] for c in json.loads((demo_dir / "climate/temp/zarr.json").read_text())["codecs"]] == [
        "bytes",
        "zstd",
    ]


def test_precipitation_leaves_chunks_unwritten_that_read_as_nan(demo_dir):
    precip = zarr.open_array(demo_dir, path="climate/precip", mode="r")
    assert np.isnan(precip.fill_value)
    assert 0 < precip.nchunks_initialized < precip.nchunks
    assert np.isnan(precip[demo.PRECIP_WRITTEN_MONTHS :]).all()


def test_stack_is_sharded_with_crc32c_index_and_empty_inner_chunks(demo_dir):
    stack = zarr.open_array(demo_dir, path="images/stack", mode="r")
    assert stack.shards is not None and stack.chunks != stack.shards
    codec = json.loads((demo_dir / "images/stack/zarr.json").read_text())["codecs"][0]
    assert codec["name"] == "sharding_indexed"
    assert [c["name"] for c in codec["configuration"]["index_codecs"]] == ["bytes", "crc32c"]
    assert (stack[6:] == 0).all()  # planes whose inner chunks are never stored


def test_astronaut_is_an_rgb_uint8_image_compressed_with_gzip(demo_dir):
    image = zarr.open_array(demo_dir, path="images/astronaut", mode="r")
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert json.loads((demo_dir / "images/astronaut/zarr.json").read_text())["codecs"][-1]["name"] == "gzip"


def test_cells_is_an_ngff_05_image_that_ome_zarr_readers_accept(demo_dir):
    """ome-zarr-models validates the group against NGFF 0.5 (axes, scales, the levels'
    dimension_names); ome-zarr-py reads its levels, scales and channels."""
    models = pytest.importorskip("ome_zarr_models.v05.image")
    ome_zarr_io = pytest.importorskip("ome_zarr.io")
    from ome_zarr.reader import Reader

    group = zarr.open_group(demo_dir / "images/cells", mode="r")
    image = models.Image.from_zarr(group)
    multiscale = image.attributes.ome.multiscales[0]
    assert [(a.name, a.type, a.unit) for a in multiscale.axes] == [("c", "channel", None)] + [
        (name, "space", "micrometer") for name in "zyx"
    ]
    node = next(iter(Reader(ome_zarr_io.parse_url(str(demo_dir / "images/cells")))()))
    levels = [demo.DEMO_ARRAYS[f"images/cells/{k}"]() for k in range(demo.CELLS_LEVELS)]
    assert len(node.data) == demo.CELLS_LEVELS
    for got, want in zip(node.data, levels, strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)
    assert node.metadata["channel_names"] == [label for label, _ in demo.CELLS_CHANNELS]
    scales = [t[0]["scale"] for t in node.metadata["coordinateTransformations"]]
    assert scales[0] == list(demo.CELLS_PIXEL_UM)
    assert [s[-1] for s in scales] == [demo.CELLS_PIXEL_UM[-1] * 2**k for k in range(demo.CELLS_LEVELS)]


def test_labels_are_variable_length_strings(demo_dir):
    document = json.loads((demo_dir / "tables/labels/zarr.json").read_text())
    assert document["data_type"] == "string" and document["shape"] == [len(demo.labels())]


def test_scalar_is_zero_dimensional(demo_dir):
    assert zarr.open_array(demo_dir, path="scalar", mode="r").shape == ()


def test_root_declares_a_valid_convention(demo_dir):
    root = zarr.open_group(demo_dir, mode="r")
    conventions, problems = parse_conventions(root.attrs.asdict())
    assert problems == []
    assert [c.uuid for c in conventions] == [demo.PROJ_CONVENTION_UUID]


def test_demo_is_small_and_the_same_on_every_run(demo_dir, tmp_path):
    demo.write_demo(str(tmp_path / "again"))
    first, second = tree_bytes(demo_dir), tree_bytes(tmp_path / "again")
    assert first == second
    assert sum(len(v) for v in first.values()) < 4 << 20


def test_refuses_to_write_into_a_non_empty_directory(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        demo.write_demo(str(tmp_path))
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_demo_module_does_not_import_zarr_python():
    code = "import sys, zarrfs.demo; sys.exit('zarr' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
