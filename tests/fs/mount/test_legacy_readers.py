"""Legacy tools read the legacy views of a real mount and see what zarr-python wrote:
tifffile and GDAL on data.tif, GDAL on data through data.hdr, pynrrd on data.nhdr,
numpy.loadtxt and awk on data.csv; and reading one TIFF row fetches only its chunks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import warnings

import nrrd
import numpy as np
import pytest
import tifffile

from tests.views.test_legacy_views import REFERENCE, assert_same_numbers, expected_values, write_reference_arrays

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::Warning:zarr"),
    pytest.mark.skipif(shutil.which("gdal_translate") is None, reason="GDAL command line tools not installed"),
]


def arrays_showing(ext: str) -> list[str]:
    return [name for name, spec in REFERENCE.items() if ext in spec[4]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("legacy") / "ref.zarr"
    write_reference_arrays(root)
    return root


def run(*args: str) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{' '.join(args)}: {result.stderr}"
    return result.stdout


def native(values: np.ndarray) -> np.ndarray:
    return values.astype(values.dtype.newbyteorder("="))


def test_directory_lists_the_legacy_files(mount, reference):
    m = mount(reference)
    for name, spec in REFERENCE.items():
        assert {f"data.{ext}" for ext in spec[4]} <= set(os.listdir(m / name)), name
    assert not {"data.tif", "data.nhdr", "data.hdr", "data.csv"} & set(os.listdir(m / "text"))


def test_tifffile_reads_data_tif(mount, reference):
    m = mount(reference)
    for name in arrays_showing("tif"):
        np.testing.assert_array_equal(tifffile.imread(m / name / "data.tif"), expected_values(name), err_msg=name)


def gdal_copy(source: str, out) -> np.ndarray:
    """`source` as GDAL reads it: copied by GDAL to a plain band-sequential GeoTIFF, then
    loaded (bands first)."""
    run("gdal_translate", "-q", "-of", "GTiff", "-co", "INTERLEAVE=BAND", source, str(out))
    return tifffile.imread(out)


def test_gdal_reads_data_tif(mount, reference, tmp_path):
    m = mount(reference)
    for name in arrays_showing("tif"):
        expected = native(expected_values(name))
        path = str(m / name / "data.tif")
        info = run("gdalinfo", path)
        if name.startswith("rgb"):  # one page, bands R, G, B(, A)
            assert "ColorInterp=Red" in info
            got = np.moveaxis(gdal_copy(path, tmp_path / f"{name}.tif"), 0, -1)
        else:
            pages = [path] if expected.ndim == 2 else [f"GTIFF_DIR:{z + 1}:{path}" for z in range(len(expected))]
            got = np.stack([gdal_copy(p, tmp_path / f"{name}.{z}.tif") for z, p in enumerate(pages)])
        # float16 pixels come out of GDAL as float32
        assert_same_numbers(got.reshape(expected.shape), expected.astype(got.dtype))


def gdal_version() -> tuple[int, ...]:
    version = run("gdal-config", "--version") if shutil.which("gdal-config") else run("gdalinfo", "--version")
    return tuple(int(n) for n in re.search(r"(\d+)\.(\d+)", version).groups())


def test_gdal_opens_data_through_the_envi_header(mount, reference, tmp_path):
    m = mount(reference)
    for name in arrays_showing("hdr"):
        expected = native(expected_values(name))
        if expected.dtype.itemsize == 8 and expected.dtype.kind in "iu" and gdal_version() < (3, 8):
            continue  # ENVI data types 14 and 15 (int64, uint64) came with GDAL 3.8
        info = run("gdalinfo", str(m / name / "data"))
        assert "Driver: ENVI" in info and "data.hdr" in info, name
        got = gdal_copy(str(m / name / "data"), tmp_path / f"{name}.tif")
        if expected.dtype == bool:
            expected = expected.astype(np.uint8)
        assert_same_numbers(got.reshape(expected.shape), expected)


def test_gdallocationinfo_reads_single_pixels_of_both_files(mount, reference):
    m = mount(reference)
    expected = expected_values("i32_sharded")
    for y, x in ((0, 0), (63, 47), (40, 17)):
        for file in ("data.tif", "data"):
            value = run("gdallocationinfo", "-valonly", str(m / "i32_sharded" / file), str(x), str(y))
            assert int(value) == expected[y, x], (file, y, x)


def test_pynrrd_reads_data_nhdr(mount, reference):
    m = mount(reference)
    for name in arrays_showing("nhdr"):
        got, _ = nrrd.read(str(m / name / "data.nhdr"), index_order="C")
        expected = native(expected_values(name))
        np.testing.assert_array_equal(
            got, expected.astype(np.uint8) if expected.dtype == bool else expected, err_msg=name
        )


def test_numpy_loadtxt_reads_data_csv(mount, reference):
    m = mount(reference)
    for name in arrays_showing("csv"):
        expected = native(expected_values(name))
        got = np.loadtxt(m / name / "data.csv", delimiter=",", dtype=expected.dtype, ndmin=expected.ndim)
        assert_same_numbers(got, expected)


def test_awk_sums_the_rows_of_data_csv(mount, reference):
    m = mount(reference)
    out = run(
        "awk",
        "-F,",
        '{t = 0; for (i = 1; i <= NF; i++) t += $i; printf "%d %.0f\\n", NF, t}',
        str(m / "i32_sharded" / "data.csv"),
    )
    expected = expected_values("i32_sharded").astype(np.int64)
    assert out.splitlines() == [f"48 {s}" for s in expected.sum(axis=1)]


def stats(m) -> dict:
    return json.loads((m / ".zarrfs" / "stats").read_text())


def test_reading_one_row_of_data_tif_fetches_only_the_chunks_of_that_row(mount, tmp_path):
    root = tmp_path / "wide.zarr"
    zarr.open_group(str(root), mode="w")  # a group root: /.zarrfs/stats is there
    array = zarr.create_array(str(root / "wide"), shape=(256, 65536), dtype="uint8", chunks=(64, 8192))
    array[...] = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 65536, axis=1)
    m = mount(root)
    row = 70  # chunk row 1: 8 chunks of 8192 columns
    # unbuffered, as a TIFF reader reads: the header in small reads (Python's buffered
    # reader would read the first MiB at once, which is where a sequential read starts)
    with open(m / "wide" / "data.tif", "rb", buffering=0) as f:
        # no readahead: the kernel reads just the pages asked for, header and row alike
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        with tifffile.TiffFile(f) as tif:
            page = tif.pages[0]
            rows_per_strip = page.rowsperstrip
            offset = page.dataoffsets[row // rows_per_strip] + (row % rows_per_strip) * 65536
        before = stats(m)
        line = os.pread(f.fileno(), 65536, offset)
        after = stats(m)
    assert line == bytes([row]) * 65536
    assert after["store_requests"] - before.get("store_requests", 0) == 8
    assert after["bytes_fetched"] - before.get("bytes_fetched", 0) <= 8 * 64 * 8192


def test_a_data_tif_past_4_gib_is_a_bigtiff_that_gdal_and_tifffile_read(mount, tmp_path):
    root = tmp_path / "huge.zarr"
    array = zarr.create_array(str(root), shape=(2, 40000, 40000), dtype="uint16", chunks=(1, 256, 8192), fill_value=3)
    array[1, 39990:, 39990:] = 9
    m = mount(root)
    path = m / "data.tif"
    assert path.stat().st_size > 1 << 32
    assert "Size is 40000, 40000" in run("gdalinfo", f"GTIFF_DIR:2:{path}")
    assert run("gdallocationinfo", "-valonly", f"GTIFF_DIR:2:{path}", "39995", "39999").strip() == "9"
    with tifffile.TiffFile(path) as tif:
        assert tif.is_bigtiff and [p.shape for p in tif.pages] == [(40000, 40000)] * 2
    pixels = tifffile.memmap(path, mode="r")
    shape, corner = pixels.shape, pixels[1, 39999, 39989:].tolist()
    del pixels  # a live mapping keeps the mount busy
    assert shape == (2, 40000, 40000) and corner == [3] + [9] * 10
