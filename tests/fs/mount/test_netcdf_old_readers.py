"""`dataset.nc` for readers of netCDF-3 that know no CDF-5 (Debian 12's GDAL 3.6): an
ordinary xarray dataset, whose datetime64 times xarray stores as int64 offsets, gives a
64-bit offset file (the offsets as int32, or as double where int32 does not hold them
and double does), which GDAL opens and xarray decodes to the same times and values; a
64-bit integer that fits neither still makes CDF-5, and `info` says which and why."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("netCDF4")
needs_gdal = pytest.mark.skipif(shutil.which("gdalinfo") is None, reason="GDAL's command-line tools")


def _dataset(times) -> xr.Dataset:
    rng = np.random.default_rng(5)
    n = len(times)
    return xr.Dataset(
        {
            "tas": (("time", "y", "x"), rng.normal(280, 5, (n, 4, 6)).astype("float32"), {"units": "K"}),
            "count": (("time", "y", "x"), rng.integers(-300, 300, (n, 4, 6)).astype("int16")),
        },
        coords={"time": times, "y": np.arange(4.0), "x": np.arange(6.0)},
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("old") / "stores"
    root.mkdir()
    # xarray's own encoding: int64 "days since 2001-01-01 00:00:00"
    _dataset(pd.date_range("2001-01-01", periods=5, freq="D")).to_zarr(root / "daily.zarr", zarr_format=3)
    # microseconds since 2000: past int32, exact in double (microseconds since 1970 are not)
    micros = _dataset(pd.date_range("2001-01-01", periods=3, freq="1s") + pd.Timedelta(1, "us"))
    micros["time"].encoding.update({"units": "microseconds since 2000-01-01", "dtype": "int64"})
    micros.to_zarr(root / "micros.zarr", zarr_format=3)
    # an int64 that is no time and fits no int32: CDF-5
    wide = _dataset(pd.date_range("2001-01-01", periods=2, freq="D"))
    wide["big"] = ("time", np.array([1, 2**40], dtype="int64"))
    wide.to_zarr(root / "wide.zarr", zarr_format=3)
    return root


@pytest.fixture(scope="module")
def mounted(module_mount, stores):
    return module_mount(stores)


def _magic(path) -> bytes:
    with open(path, "rb") as f:
        return f.read(4)


@needs_gdal
def test_an_xarray_dataset_with_datetime64_times_is_a_64_bit_offset_file_gdal_opens(mounted, stores):
    path = mounted / "daily.zarr" / "dataset.nc"
    assert _magic(path) == b"CDF\x02"
    for name, gdal_type in (("tas", "Float32"), ("count", "Int16")):
        out = subprocess.run(["gdalinfo", f'NETCDF:"{path}":{name}'], capture_output=True, text=True, check=True).stdout
        assert "Size is 6, 4" in out and f"Type={gdal_type}" in out, out
        assert "NETCDF_DIM_time_VALUES={0,1,2,3,4}" in out, out
    stored = xr.open_zarr(stores / "daily.zarr").load()
    with xr.open_dataset(path) as nc:
        xr.testing.assert_identical(nc.load(), stored)
        assert nc["time"].dtype == np.dtype("datetime64[ns]")
    with xr.open_dataset(path, decode_cf=False) as raw:
        assert raw["time"].dtype == np.int32 and raw["time"].attrs["units"].startswith("days since 2001-01-01")
    info = (mounted / "daily.zarr" / "tas" / "info").read_text()
    assert "(netCDF-3 64-bit offset: values that fit: 'time' int64 as int32)" in info


def test_time_offsets_past_int32_are_doubles_that_decode_to_the_same_times(mounted, stores):
    path = mounted / "micros.zarr" / "dataset.nc"
    assert _magic(path) == b"CDF\x02"
    with xr.open_dataset(path, decode_cf=False) as raw:
        assert raw["time"].dtype == np.float64
    with xr.open_dataset(path) as nc:
        np.testing.assert_array_equal(nc["time"].values, xr.open_zarr(stores / "micros.zarr")["time"].values)
    assert "'time' int64 as double" in (mounted / "micros.zarr" / "tas" / "info").read_text()


def test_an_int64_that_int32_does_not_hold_makes_cdf_5_and_info_says_why(mounted, stores):
    path = mounted / "wide.zarr" / "dataset.nc"
    assert _magic(path) == b"CDF\x05"
    with xr.open_dataset(path) as nc:
        xr.testing.assert_identical(nc.load(), xr.open_zarr(stores / "wide.zarr").load())
    info = (mounted / "wide.zarr" / "tas" / "info").read_text()
    assert "(netCDF-3 CDF-5: variable 'big' is int64)" in info


def test_a_value_written_past_int32_after_dataset_nc_was_laid_out_fails_eio_not_wrapped(mount, tmp_path):
    """The int64 array was narrowed to int32 when dataset.nc was laid out; a value that int32
    does not hold, written since (here through the mount), is no other number in the file:
    reading it fails EIO, the log saying why, until the file is laid out again."""
    import errno

    import netCDF4
    import zarr

    root = zarr.open_group(tmp_path / "counts.zarr", mode="w", zarr_format=3)
    root.create_array("n", shape=(4,), chunks=(4,), dtype="i8", fill_value=0, dimension_names=["x"])[:] = [1, 2, 3, 4]
    m = mount(tmp_path / "counts.zarr")
    with netCDF4.Dataset(m / "dataset.nc") as nc:
        assert nc.file_format == "NETCDF3_64BIT_OFFSET" and list(nc["n"][:]) == [1, 2, 3, 4]
    with open(m / "n" / "data", "r+b") as f:
        f.seek(8)
        f.write(np.array([2**40], "<i8").tobytes())
    try:
        (m / "dataset.nc").read_bytes()
    except OSError as exc:
        assert exc.errno == errno.EIO  # noqa: PT017 (either outcome may be; a refusal is this one)
        assert "int32 does not hold" in m.log_text()
    else:
        with netCDF4.Dataset(m / "dataset.nc") as nc:
            assert list(nc["n"][:]) == [1, 2**40, 3, 4]
