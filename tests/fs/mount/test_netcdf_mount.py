"""`dataset.nc` of a group: CF datasets written by xarray (Zarr v2 and v3) are mounted and
their `dataset.nc` read by ncdump, ncks, netCDF4-python, a C program linked against
libnetcdf and xarray, each compared with what xarray and zarr-python read from the store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings

import numpy as np
import pandas as pd
import pytest

from zarrfs.format import Hierarchy
from zarrfs.store import open_store
from zarrfs.views.netcdf import NetcdfView, netcdf_plan

netCDF4 = pytest.importorskip("netCDF4")
warnings.filterwarnings("ignore", module="zarr")
import xarray as xr  # noqa: E402
import zarr  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::Warning"),
    pytest.mark.skipif(shutil.which("ncdump") is None, reason="netCDF command line tools not installed"),
]


def climate() -> xr.Dataset:
    """A small CF dataset as climate models write them: encoded times, packed values,
    fill values, coordinates, global attributes."""
    rng = np.random.default_rng(3)
    time = pd.date_range("2000-01-01", periods=6, freq="D")
    lat = np.linspace(-60.0, 60.0, 13)
    lon = np.arange(0.0, 360.0, 20.0)
    temp = rng.normal(280, 10, size=(6, 13, 18)).astype("float32")
    temp[0, 0, :3] = np.nan
    precip = rng.gamma(2.0, 2.0, size=(6, 13, 18))
    ds = xr.Dataset(
        {
            "tas": (("time", "lat", "lon"), temp, {"units": "K", "standard_name": "air_temperature"}),
            "pr": (("time", "lat", "lon"), precip, {"units": "mm/day"}),
            "land": (("lat", "lon"), rng.random((13, 18)) > 0.5),
            "station": (("lat",), np.array([f"s{i}" for i in range(13)], dtype=object)),
        },
        coords={
            "time": time,
            "lat": ("lat", lat, {"units": "degrees_north"}),
            "lon": ("lon", lon, {"units": "degrees_east"}),
        },
        attrs={"title": "zarrfs test climate", "Conventions": "CF-1.8", "realization": 1, "levels": [1000.0, 850.5]},
    )
    ds["tas"].encoding.update({"_FillValue": -999.0, "chunks": (2, 13, 9)})
    ds["pr"].encoding.update({"dtype": "int16", "scale_factor": 0.01, "add_offset": 10.0, "_FillValue": -32768})
    ds["time"].encoding.update({"units": "hours since 1999-12-01", "calendar": "noleap", "dtype": "int64"})
    return ds


def classic() -> xr.Dataset:
    """Classic netCDF types only (booleans are bytes): a 64-bit offset file holds it."""
    ds = climate().drop_vars(["station"])
    ds["lat"] = ds["lat"].astype("float32")
    ds["time"].encoding.update({"units": "days since 1999-12-01", "dtype": "int32"})
    return ds


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("nc") / "stores"
    root.mkdir()
    for fmt in (2, 3):
        climate().to_zarr(root / f"climate_v{fmt}.zarr", zarr_format=fmt, consolidated=False)
        classic().to_zarr(root / f"classic_v{fmt}.zarr", zarr_format=fmt, consolidated=False)
    # an array with no dimension names beside a dataset's (xarray cannot open that store)
    classic().to_zarr(root / "mixed.zarr", zarr_format=3, consolidated=False)
    zarr.open_group(root / "mixed.zarr").create_array("raw", shape=(4,), dtype="int32", fill_value=0)
    # a child node named dataset.nc wins over the view
    classic().to_zarr(root / "child.zarr", zarr_format=3, consolidated=False)
    zarr.open_group(root / "child.zarr").create_group("dataset.nc")
    # text with lone surrogates (JSON escapes them; zarr-python writes them so)
    lone = classic()
    lone.attrs["title"] = "lone \ud800 surrogate"
    lone["tas"].attrs["units"] = "K\udc80"
    lone.to_zarr(root / "surrogates.zarr", zarr_format=3, consolidated=False)
    # names that differ only in lone surrogates (local file names that are not UTF-8 too)
    clash = zarr.open_group(root / "surrogate_clash.zarr", mode="w")
    clash.attrs.update({"u" + chr(0xD800): "first", "u" + chr(0xD801): "second"})
    for name, dim, n in (("a", "x\ud800", 3), ("b", "x\ud801", 5), ("v\udcfe", "y", 2), ("v\udcff", "y", 2)):
        clash.create_array(name, shape=(n,), dtype="int32", fill_value=0, dimension_names=[dim])[:] = np.arange(n)
    # integer attributes past int64 (a uint64's largest value, as a global attribute too)
    wide = classic()
    wide.attrs["max_count"] = 2**64 - 1
    wide["tas"].attrs["valid_max"] = 2**63
    wide.to_zarr(root / "wide_attributes.zarr", zarr_format=3, consolidated=False)
    # two sparse variables of 3 GB: a 64-bit offset file, the second's data past 4 GiB
    big = zarr.open_group(root / "sparse.zarr", mode="w")
    for name, fill, sign in (("a", -5, 1), ("b", 7, -1)):
        array = big.create_array(
            name, shape=(60000, 50000), chunks=(1000, 1000), dtype="int8", fill_value=fill, dimension_names=("y", "x")
        )
        array[-10:, -10:] = sign * np.arange(100, dtype="int8").reshape(10, 10)
    return root


@pytest.fixture(scope="module")
def mounted(module_mount, stores):
    return module_mount(stores)


def run(*args: str) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{' '.join(args)}: {result.stderr}"
    return result.stdout


def expected_dataset(store, drop=("station",)) -> xr.Dataset:
    ds = xr.open_zarr(store, consolidated=False)
    return ds.drop_vars([v for v in drop if v in ds.variables]).load()


@pytest.mark.parametrize("fmt", [2, 3])
def test_xarray_reads_dataset_nc_as_it_reads_the_store(mounted, stores, fmt):
    with xr.open_dataset(mounted / f"climate_v{fmt}.zarr" / "dataset.nc", engine="netcdf4") as nc:
        xr.testing.assert_identical(nc.load(), expected_dataset(stores / f"climate_v{fmt}.zarr"))
    with xr.open_dataset(mounted / f"climate_v{fmt}.zarr" / "dataset.nc", decode_cf=False) as raw:
        stored = xr.open_zarr(stores / f"climate_v{fmt}.zarr", decode_cf=False, consolidated=False)
        for name in ("pr", "time"):  # the encodings as stored: packed values, raw times
            # (the int64 times, which int32 holds, are int32: a 64-bit offset file)
            assert raw[name].dtype == (np.int32 if name == "time" else stored[name].dtype)
            np.testing.assert_array_equal(raw[name].values, stored[name].values)
            for key in ("scale_factor", "add_offset", "_FillValue", "units", "calendar"):
                assert raw[name].attrs.get(key) == stored[name].attrs.get(key), (name, key)


@pytest.mark.parametrize("fmt", [2, 3])
def test_classic_types_make_a_64_bit_offset_file(mounted, stores, fmt):
    path = mounted / f"classic_v{fmt}.zarr" / "dataset.nc"
    with open(path, "rb") as f:
        assert f.read(4) == b"CDF\x02"
    with netCDF4.Dataset(path) as nc:
        assert nc.data_model == "NETCDF3_64BIT_OFFSET"
    with xr.open_dataset(path) as nc:
        xr.testing.assert_identical(nc.load(), expected_dataset(stores / f"classic_v{fmt}.zarr"))


def test_a_child_node_named_dataset_nc_wins(mounted):
    assert (mounted / "child.zarr" / "dataset.nc").is_dir()
    assert sorted(os.listdir(mounted / "child.zarr")).count("dataset.nc") == 1


@pytest.mark.parametrize("fmt", [2, 3])
def test_ncdump_and_ncks_read_the_header(mounted, fmt):
    path = str(mounted / f"climate_v{fmt}.zarr" / "dataset.nc")
    header = run("ncdump", "-h", path)
    for line in (
        "time = 6 ;",
        "lat = 13 ;",
        "lon = 18 ;",
        "short pr(time, lat, lon) ;",
        "pr:scale_factor = 0.01 ;",
        'time:calendar = "noleap" ;',
        'tas:units = "K" ;',
        ':title = "zarrfs test climate" ;',
        "byte land(lat, lon) ;",
    ):
        assert line in header, line
    assert "station" not in header
    if shutil.which("ncks"):
        assert "tas" in run("ncks", "-m", path)


@pytest.mark.parametrize("fmt", [2, 3])
def test_netcdf4_reads_raw_values_exactly(mounted, stores, fmt):
    group = zarr.open_group(stores / f"climate_v{fmt}.zarr")
    with netCDF4.Dataset(mounted / f"climate_v{fmt}.zarr" / "dataset.nc") as nc:
        nc.set_auto_maskandscale(False)
        assert nc.data_model == "NETCDF3_64BIT_OFFSET"  # the int64 times fit int32
        for name in ("tas", "pr", "time", "lat", "lon"):
            np.testing.assert_array_equal(nc[name][:], group[name][:], err_msg=name)
        np.testing.assert_array_equal(nc["land"][:].astype(bool), group["land"][:])


def test_a_float32_nan_fill_of_zarr_v2_is_the_variables_fill_value(mounted, stores):
    """xarray gives a float32 variable of Zarr v2 the fill value NaN in `.zarray`."""
    stored = xr.open_zarr(stores / "classic_v2.zarr", mask_and_scale=False, consolidated=False)
    assert stored["lat"].dtype == np.float32 and np.isnan(stored["lat"].attrs["_FillValue"])
    with netCDF4.Dataset(mounted / "classic_v2.zarr" / "dataset.nc") as nc:
        assert nc["lat"].dtype == np.float32 and np.isnan(nc["lat"]._FillValue)


def test_variables_between_2_and_4_gib_are_in_a_64_bit_offset_file(mounted, stores):
    """A classic file's vsize is an unsigned 32-bit field: such variables need no CDF-5."""
    assert "dataset.nc" in os.listdir(mounted / "sparse.zarr")
    group = zarr.open_group(stores / "sparse.zarr")
    with netCDF4.Dataset(mounted / "sparse.zarr" / "dataset.nc") as nc:
        nc.set_auto_maskandscale(False)
        assert nc.data_model == "NETCDF3_64BIT_OFFSET"
        for name in ("a", "b"):
            np.testing.assert_array_equal(nc[name][-12:, -12:], group[name][-12:, -12:], err_msg=name)


def test_text_with_lone_surrogates_has_u_fffd_in_their_place(mounted, stores):
    """UTF-8 cannot hold a lone surrogate: the group is listed, its dataset.nc read."""
    assert "dataset.nc" in os.listdir(mounted / "surrogates.zarr")
    with xr.open_dataset(mounted / "surrogates.zarr" / "dataset.nc") as nc:
        assert nc.attrs["title"] == "lone \ufffd surrogate"
        assert nc["tas"].attrs["units"] == "K\ufffd"
        xr.testing.assert_equal(nc.load(), expected_dataset(stores / "surrogates.zarr"))


def test_names_alike_but_for_lone_surrogates_keep_dataset_nc_readable(mounted, stores):
    """Each lone surrogate is U+FFFD in the file, so names that differ only in them would be
    one name twice (netCDF4 failed to open the file; an attribute showed the first value
    twice): the first keeps it, the other array is left out (info says why), the other
    attribute too."""
    group = zarr.open_group(stores / "surrogate_clash.zarr")
    with netCDF4.Dataset(mounted / "surrogate_clash.zarr" / "dataset.nc") as nc:
        assert sorted(nc.variables) == ["a", "v\ufffd"]
        np.testing.assert_array_equal(nc["a"][:], group["a"][:])
        assert nc["a"].dimensions == ("x\ufffd",) and nc.dimensions["x\ufffd"].size == 3
        assert nc.ncattrs() == ["u\ufffd"] and nc.getncattr("u\ufffd") == "first"
    info = {
        name: (mounted / "surrogate_clash.zarr" / name / "info").read_text() for name in ("b", "v\udcfe", "v\udcff")
    }
    assert "dimension name that is another's in UTF-8" in info["b"]
    assert sum("a name that is another array's in UTF-8" in info[name] for name in ("v\udcfe", "v\udcff")) == 1


def test_integer_attributes_past_int64_are_exact(mounted, stores):
    stored = zarr.open_group(stores / "wide_attributes.zarr")
    with netCDF4.Dataset(mounted / "wide_attributes.zarr" / "dataset.nc") as nc:
        assert nc.data_model == "NETCDF3_64BIT_DATA"  # CDF-5 has unsigned 64-bit attributes
        assert int(nc.max_count) == stored.attrs["max_count"] == 2**64 - 1
        assert int(nc["tas"].valid_max) == stored["tas"].attrs["valid_max"] == 2**63


def test_c_program_linked_against_libnetcdf_reads_a_variable(mounted, stores, tmp_path):
    if shutil.which("gcc") is None or not os.path.exists("/usr/include/netcdf.h"):
        pytest.skip("gcc or libnetcdf-dev not installed")
    source = tmp_path / "readvar.c"
    source.write_text(r"""
#include <netcdf.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int nc, var, ndims, dims[NC_MAX_VAR_DIMS];
    size_t n = 1, len;
    if (nc_open(argv[1], NC_NOWRITE, &nc) || nc_inq_varid(nc, argv[2], &var)) return 2;
    nc_inq_varndims(nc, var, &ndims);
    nc_inq_vardimid(nc, var, dims);
    for (int i = 0; i < ndims; i++) { nc_inq_dimlen(nc, dims[i], &len); n *= len; }
    float *values = malloc(n * sizeof(float));
    if (nc_get_var_float(nc, var, values)) return 3;
    for (size_t i = 0; i < n; i++) printf("%.9g\n", values[i]);
    return nc_close(nc);
}
""")
    program = tmp_path / "readvar"
    run("gcc", "-o", str(program), str(source), "-lnetcdf")
    out = run(str(program), str(mounted / "climate_v3.zarr" / "dataset.nc"), "tas")
    values = np.array([float(v) for v in out.split()], dtype=np.float32)
    np.testing.assert_array_equal(values, zarr.open_array(stores / "climate_v3.zarr" / "tas")[:].reshape(-1))


def test_info_says_which_arrays_are_left_out(mounted):
    info = (mounted / "climate_v3.zarr" / "station" / "info").read_text()
    assert "dataset.nc:" in info and "left out: a variable-length data type" in info
    assert "left out: no dimension names" in (mounted / "mixed.zarr" / "raw" / "info").read_text()
    assert "raw" not in run("ncdump", "-h", str(mounted / "mixed.zarr" / "dataset.nc"))
    info = (mounted / "climate_v3.zarr" / "tas" / "info").read_text()
    assert "variable 'tas' (netCDF-3 64-bit offset: values that fit: 'time' int64 as int32)" in info


def test_size_and_header_need_no_chunk_read(mount, stores):
    """(Where no 64-bit integer array is: their values are read to see whether they fit.)"""
    m = mount(stores / "classic_v3.zarr")
    size = os.stat(m / "dataset.nc").st_size
    assert json.loads((m / ".zarrfs" / "stats").read_text())["bytes_fetched"] == 0
    group = Hierarchy(open_store(str(stores / "classic_v3.zarr")))
    members = [(name, group.open_node(name)) for name in group.children("")]
    members = [(name, node) for name, node in members if not hasattr(node, "implicit")]

    class NoChunks:
        def read_chunks(self, coords_list, consume=None):
            raise AssertionError("the header read a chunk")

        def __bool__(self):
            return True

    view = NetcdfView(netcdf_plan(group.open_node("").attributes, members), lambda array: NoChunks())
    assert view.size() == size
    begin = min(view.begins)  # (the header ends where the first variable begins)
    assert view.read(0, begin) == (m / "dataset.nc").read_bytes()[:begin]
