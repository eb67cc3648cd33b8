"""`data.tif` of a georeferenced array is a GeoTIFF: stores written by rioxarray/xarray
(CF, Zarr v2 and v3), by GDAL's Zarr driver and with GeoZarr-convention attributes are
mounted, and what GDAL (Debian's gdalinfo, and rasterio) reads from `data.tif` is
compared with what rioxarray and GDAL read from the store itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

rasterio = pytest.importorskip("rasterio")
rioxarray = pytest.importorskip("rioxarray")
from rasterio.crs import CRS  # noqa: E402

warnings.filterwarnings("ignore", module="zarr")
import xarray as xr  # noqa: E402
import zarr  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::Warning"),
    pytest.mark.skipif(shutil.which("gdalinfo") is None, reason="GDAL command line tools not installed"),
]

# a Lambert conformal conic CRS that no EPSG code names: it can only travel as WKT
CUSTOM_LCC = (
    'PROJCS["custom LCC",GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],'
    'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Lambert_Conformal_Conic_2SP"],'
    'PARAMETER["latitude_of_origin",45.5],PARAMETER["central_meridian",10.25],PARAMETER["standard_parallel_1",40],'
    'PARAMETER["standard_parallel_2",50],PARAMETER["false_easting",1000000],PARAMETER["false_northing",2000000],'
    'UNIT["metre",1]]'
)
PROJ_CONVENTION = {
    "schema_url": "https://raw.githubusercontent.com/zarr-experimental/geo-proj/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-experimental/geo-proj/blob/v1/README.md",
    "uuid": "f17cb550-5864-4468-aeb7-f3180cfb622f",
    "name": "proj:",
    "description": "Coordinate reference system information for geospatial data",
}
SPATIAL_CONVENTION = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/spatial/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/spatial/blob/v1/README.md",
    "uuid": "689b58e2-cf7b-45e0-9fff-9cfc0883d6b4",
    "name": "spatial:",
    "description": "Spatial coordinate information",
}


def utm_raster(bands: int | None = None, crs: str = "EPSG:32633", dtype: str = "float32") -> xr.DataArray:
    """A rioxarray raster: 30 m pixels from (500000, 4200000), north up, nodata -9999."""
    ny, nx = 40, 50
    y = 4200000 - 30 * np.arange(ny) - 15.0
    x = 500000 + 30 * np.arange(nx) + 15.0
    rng = np.random.default_rng(7)
    if bands is None:
        da = xr.DataArray(rng.normal(size=(ny, nx)).astype(dtype), dims=("y", "x"), coords={"y": y, "x": x})
    else:
        da = xr.DataArray(
            rng.normal(size=(bands, ny, nx)).astype(dtype),
            dims=("band", "y", "x"),
            coords={"band": np.arange(1, bands + 1), "y": y, "x": x},
        )
    da[..., 0, 0] = -9999
    return da.rio.write_crs(crs).rio.write_nodata(-9999.0, encoded=True)


MULTISCALES_CONVENTION = {
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/multiscales/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/multiscales/blob/v1/README.md",
    "uuid": "d35379db-88df-4056-af3a-620245f8e347",
    "name": "multiscales",
    "description": "Multiscale layout of zarr datasets",
}


def run(*args: str) -> str:
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{' '.join(args)}: {result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """One directory of stores, each written by a real writer."""
    root = tmp_path_factory.mktemp("geo") / "stores"
    root.mkdir()
    for fmt in (2, 3):
        utm_raster().to_dataset(name="band").to_zarr(root / f"rio_v{fmt}.zarr", zarr_format=fmt, consolidated=False)
        utm_raster(bands=3).to_dataset(name="bands").to_zarr(
            root / f"rio3d_v{fmt}.zarr", zarr_format=fmt, consolidated=False
        )
    utm_raster(crs=CUSTOM_LCC).to_dataset(name="band").to_zarr(root / "lcc.zarr", zarr_format=3, consolidated=False)
    # plain CF latitude/longitude coordinates, no grid mapping at all
    lat = np.linspace(59.75, 30.25, 60)
    lon = np.linspace(-9.75, 29.75, 80)
    temp = xr.DataArray(
        np.arange(60 * 80, dtype="int16").reshape(60, 80),
        dims=("lat", "lon"),
        coords={"lat": ("lat", lat, {"units": "degrees_north"}), "lon": ("lon", lon, {"units": "degrees_east"})},
    )
    temp.to_dataset(name="t").to_zarr(root / "latlon.zarr", zarr_format=3, consolidated=False)
    # 64-bit integer rasters whose nodata a float cannot hold
    for dtype, nodata in (("uint64", 2**64 - 1), ("int64", -(2**63)), ("int64", 2**62 + 1)):
        wide = temp.astype(dtype).rio.write_nodata(nodata, encoded=True)
        wide.to_dataset(name="t").to_zarr(root / f"{dtype}_{nodata}.zarr", zarr_format=3, consolidated=False)
    irregular = temp.assign_coords(lat=("lat", lat**1.01, {"units": "degrees_north"}))
    irregular.to_dataset(name="t").to_zarr(root / "irregular.zarr", zarr_format=3, consolidated=False)
    # GeoZarr conventions, attributes as their specs write them, on a group and its array
    group = zarr.open_group(root / "geozarr.zarr", mode="w", zarr_format=3)
    group.attrs.update(
        {
            "zarr_conventions": [PROJ_CONVENTION, SPATIAL_CONVENTION],
            "proj:code": "EPSG:3857",
            "spatial:dimensions": ["Y", "X"],
        }
    )
    b04 = group.create_array(
        "b04", shape=(64, 48), chunks=(16, 48), dtype="uint16", fill_value=0, dimension_names=["Y", "X"]
    )
    b04[:] = np.arange(64 * 48, dtype="uint16").reshape(64, 48) % 1000
    b04.attrs.update(
        {"zarr_conventions": [SPATIAL_CONVENTION], "spatial:transform": [10.0, 0.0, 1000000.0, 0.0, -10.0, 6000000.0]}
    )
    rotated = group.create_array(
        "rotated", shape=(20, 30), chunks=(20, 30), dtype="float64", fill_value=float("nan"), dimension_names=["Y", "X"]
    )
    rotated[:] = np.arange(600.0).reshape(20, 30)
    rotated.attrs.update(
        {
            "zarr_conventions": [SPATIAL_CONVENTION],
            "spatial:registration": "node",
            "spatial:transform": [10.0, 2.0, 1000000.0, 3.0, 10.0, 6000000.0],
        }
    )
    # a GeoZarr pyramid: level groups "r10m", "r20m", "r40m", each with its band "b"
    pyramid = zarr.open_group(root / "pyramid.zarr", mode="w", zarr_format=3)
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
                ],
                "resampling_method": "average",
            },
        }
    )
    full = np.arange(96 * 64, dtype="float32").reshape(96, 64)
    for factor, level in ((1, "r10m"), (2, "r20m"), (4, "r40m")):
        values = full.reshape(96 // factor, factor, 64 // factor, factor).mean(axis=(1, 3))
        b = pyramid.create_group(level).create_array(
            "b",
            shape=values.shape,
            chunks=(16, 64 // factor),
            dtype="float32",
            fill_value=-1.0,
            dimension_names=["y", "x"],
        )
        b[:] = values
        b.attrs.update(
            {
                "zarr_conventions": [SPATIAL_CONVENTION],
                "spatial:transform": [10.0 * factor, 0.0, 500000.0, 0.0, -10.0 * factor, 4200000.0],
            }
        )
    # GDAL's own Zarr writer, from a GeoTIFF GDAL made (Swiss LV95, nodata 0)
    tif = root / "lv95.tif"
    run(
        "gdal_create",
        "-of",
        "GTiff",
        "-outsize",
        "30",
        "20",
        "-bands",
        "1",
        "-ot",
        "Int16",
        "-burn",
        "7",
        "-a_srs",
        "EPSG:2056",
        "-a_ullr",
        "2600000",
        "1200000",
        "2600300",
        "1199800",
        "-a_nodata",
        "0",
        str(tif),
    )
    run("gdal_translate", "-q", "-of", "Zarr", str(tif), str(root / "gdal.zarr"))
    tif.unlink()
    return root


@pytest.fixture(scope="module")
def mounted(module_mount, stores):
    return module_mount(stores)


def read_with_rioxarray(store, name: str) -> xr.DataArray:
    """The variable as rioxarray sees it in the store: grid mapping decoded, values raw."""
    return xr.open_dataset(store, engine="zarr", decode_coords="all", mask_and_scale=False)[name]


def gdalinfo(path) -> dict:
    return json.loads(run("gdalinfo", "-json", str(path)))


def assert_same_georeferencing(tif, crs: CRS, transform, nodata, count: int, values: np.ndarray) -> None:
    """Debian's gdalinfo and rasterio read `tif` with this CRS, transform, nodata, band
    count and values."""
    info = gdalinfo(tif)
    assert CRS.from_wkt(info["coordinateSystem"]["wkt"]) == crs
    assert np.allclose(info["geoTransform"], transform.to_gdal())
    assert len(info["bands"]) == count
    if nodata is None:
        assert "noDataValue" not in info["bands"][0]
    else:
        assert np.isclose(float(info["bands"][0]["noDataValue"]), nodata, equal_nan=True)
    with rasterio.open(tif) as src:
        assert src.crs == crs
        assert src.transform.almost_equals(transform)
        assert src.count == count
        assert src.nodata == nodata or (np.isnan(src.nodata) and np.isnan(nodata))
        read = src.read()
    np.testing.assert_array_equal(read, values.reshape(read.shape))


@pytest.mark.parametrize("fmt", [2, 3])
def test_rioxarray_cf_grid_mapping_is_read_by_gdal(mounted, stores, fmt):
    expected = read_with_rioxarray(stores / f"rio_v{fmt}.zarr", "band")
    assert expected.rio.crs == CRS.from_epsg(32633)
    assert_same_georeferencing(
        mounted / f"rio_v{fmt}.zarr" / "band" / "data.tif",
        expected.rio.crs,
        expected.rio.transform(),
        expected.rio.nodata,
        1,
        expected.values,
    )
    assert "EPSG" in run("gdalsrsinfo", "-o", "epsg", str(mounted / f"rio_v{fmt}.zarr" / "band" / "data.tif"))


@pytest.mark.parametrize("fmt", [2, 3])
def test_three_dimensional_raster_is_one_band_per_plane(mounted, stores, fmt):
    expected = read_with_rioxarray(stores / f"rio3d_v{fmt}.zarr", "bands")
    assert_same_georeferencing(
        mounted / f"rio3d_v{fmt}.zarr" / "bands" / "data.tif",
        expected.rio.crs,
        expected.rio.transform(),
        expected.rio.nodata,
        3,
        expected.values,
    )


def test_custom_lambert_conformal_round_trips_through_wkt(mounted, stores):
    expected = read_with_rioxarray(stores / "lcc.zarr", "band")
    crs = expected.rio.crs
    assert crs.to_epsg() is None and crs == CRS.from_wkt(CUSTOM_LCC)
    tif = mounted / "lcc.zarr" / "band" / "data.tif"
    assert_same_georeferencing(tif, crs, expected.rio.transform(), -9999.0, 1, expected.values)
    assert "+proj=lcc +lat_0=45.5 +lon_0=10.25 +lat_1=40 +lat_2=50" in run("gdalsrsinfo", "-o", "proj4", str(tif))


def test_regular_latitude_longitude_coordinates_mean_wgs84(mounted, stores):
    expected = read_with_rioxarray(stores / "latlon.zarr", "t").rio.set_spatial_dims("lon", "lat")
    assert_same_georeferencing(
        mounted / "latlon.zarr" / "t" / "data.tif",
        CRS.from_epsg(4326),
        expected.rio.transform(),
        0.0,
        1,
        expected.values,
    )
    info = (mounted / "latlon.zarr" / "t" / "info").read_text()
    assert "coordinates 'lat', 'lon' in degrees (WGS 84)" in info and "EPSG:4326" in info


@pytest.mark.parametrize(("dtype", "nodata"), [("uint64", 2**64 - 1), ("int64", -(2**63)), ("int64", 2**62 + 1)])
def test_a_64_bit_integer_nodata_is_given_exactly(mounted, stores, dtype, nodata):
    """GDAL parses a 64-bit integer band's nodata as an integer: its text has every digit."""
    expected = read_with_rioxarray(stores / f"{dtype}_{nodata}.zarr", "t")
    assert expected.rio.nodata == nodata
    tif = mounted / f"{dtype}_{nodata}.zarr" / "t" / "data.tif"
    assert int(gdalinfo(tif)["bands"][0]["noDataValue"]) == nodata  # JSON text past 2**63


def test_irregular_coordinates_are_not_georeferenced(mounted, stores):
    tif = mounted / "irregular.zarr" / "t" / "data.tif"
    info = gdalinfo(tif)
    assert "coordinateSystem" not in info or not info["coordinateSystem"].get("wkt")
    assert "geoTransform" not in info
    with rasterio.open(tif) as src:
        np.testing.assert_array_equal(src.read(1), zarr.open_array(stores / "irregular.zarr" / "t")[:])
    assert "'lat' is irregular: not georeferenced" in (mounted / "irregular.zarr" / "t" / "info").read_text()


def test_geozarr_conventions_give_crs_transform_and_nodata(mounted, stores):
    array = zarr.open_array(stores / "geozarr.zarr" / "b04")
    transform = rasterio.Affine(*array.attrs["spatial:transform"])
    assert_same_georeferencing(
        mounted / "geozarr.zarr" / "b04" / "data.tif", CRS.from_epsg(3857), transform, 0.0, 1, array[:]
    )
    info = (mounted / "geozarr.zarr" / "b04" / "info").read_text()
    assert "GeoZarr proj:code, spatial:dimensions, spatial:transform" in info
    # the conventions each node declares (`zarr_conventions`), by name and identifier
    assert f"conventions:\n  spatial: ({SPATIAL_CONVENTION['uuid']})\n" in info and "malformed" not in info


def test_rotated_grid_of_points_keeps_its_transform(mounted, stores):
    """A rotated, south-up grid of points: the whole matrix, and GDAL's half-pixel shift
    from point centres to the corner of the first pixel."""
    array = zarr.open_array(stores / "geozarr.zarr" / "rotated")
    a, b, c, d, e, f = array.attrs["spatial:transform"]
    corner = rasterio.Affine(a, b, c - (a + b) / 2, d, e, f - (d + e) / 2)
    tif = mounted / "geozarr.zarr" / "rotated" / "data.tif"
    assert_same_georeferencing(tif, CRS.from_epsg(3857), corner, float("nan"), 1, array[:])
    assert gdalinfo(tif)["metadata"][""]["AREA_OR_POINT"] == "Point"


def test_pyramid_levels_are_overviews(mounted, stores):
    levels = {name: zarr.open_array(stores / "pyramid.zarr" / name / "b") for name in ("r10m", "r20m", "r40m")}
    tif = mounted / "pyramid.zarr" / "r10m" / "b" / "data.tif"
    transform = rasterio.Affine(*levels["r10m"].attrs["spatial:transform"])
    assert_same_georeferencing(tif, CRS.from_epsg(32633), transform, -1.0, 1, levels["r10m"][:])
    band = gdalinfo(tif)["bands"][0]
    assert [o["size"] for o in band["overviews"]] == [[32, 48], [16, 24]]
    with rasterio.open(tif) as src:
        assert src.overviews(1) == [2, 4]
    for level, name in enumerate(("r20m", "r40m")):
        with rasterio.open(tif, overview_level=level) as src:
            np.testing.assert_array_equal(src.read(1), levels[name][:])
    # the middle level's file has the coarsest as its overview; the coarsest has none
    assert [
        o["size"] for o in gdalinfo(mounted / "pyramid.zarr" / "r20m" / "b" / "data.tif")["bands"][0]["overviews"]
    ] == [[16, 24]]
    assert "overviews" not in gdalinfo(mounted / "pyramid.zarr" / "r40m" / "b" / "data.tif")["bands"][0]
    info = (mounted / "pyramid.zarr" / "r10m" / "b" / "info").read_text()
    assert "overviews:          /pyramid.zarr/r20m/b (32x48), /pyramid.zarr/r40m/b (16x24)" in info


def test_gdal_zarr_driver_crs_is_read_as_gdal_reads_the_store(mounted, stores):
    store = gdalinfo(stores / "gdal.zarr")  # GDAL's own Zarr driver reading its own store
    assert store["geoTransform"] == [2600000.0, 10.0, 0.0, 1200000.0, 0.0, -10.0]
    [array] = [
        name
        for name in os.listdir(stores / "gdal.zarr")
        if name not in ("X", "Y") and (stores / "gdal.zarr" / name).is_dir()
    ]
    values = zarr.open_array(stores / "gdal.zarr" / array)[:]
    assert_same_georeferencing(
        mounted / "gdal.zarr" / array / "data.tif",
        CRS.from_wkt(store["coordinateSystem"]["wkt"]),
        rasterio.Affine.from_gdal(*store["geoTransform"]),
        store["bands"][0]["noDataValue"],
        1,
        values,
    )
    assert run("gdalsrsinfo", "-o", "epsg", str(mounted / "gdal.zarr" / array / "data.tif")).strip() == "EPSG:2056"


def test_sizes_need_no_chunk_read(mount, stores):
    """Listing and stat of a GeoTIFF whose transform comes from coordinate values read no
    chunk; the header read does (the coordinates), and then says what it found."""
    m = mount(stores / "latlon.zarr")
    stats = lambda: json.loads((m / ".zarrfs" / "stats").read_text())  # noqa: E731
    sizes = {name: os.stat(m / "t" / name).st_size for name in os.listdir(m / "t")}
    assert stats()["bytes_fetched"] == 0
    with open(m / "t" / "data.tif", "rb") as f:
        head = f.read(4096)
    assert stats()["bytes_fetched"] > 0 and head[:2] == b"II"
    info = (m / "t" / "info").read_bytes()
    assert len(info) == sizes["info"] and b"crs:                EPSG:4326" in info
    assert len((m / "t" / "data.tif").read_bytes()) == sizes["data.tif"]
