"""`/.zarrfs/v2/`: the hierarchy as a plain Zarr v2 store, read through a real mount by
the old readers it is for (Debian 12's GDAL 3.6, zarr-python 2.18 in a virtualenv of its
own, xarray with zarr_format=2, tensorstore's `zarr` driver), byte-exact against what
zarr-python, icechunk and netCDF4 read from the sources: a sharded v3 array, a v3 array
with dimension names, an Icechunk repository's array (and a tagged version's), a
kerchunk-referenced NetCDF4 variable, the v3 draft layouts. Arrays v2 cannot say are
left out, and `info` says why; nothing there is written (EROFS)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.icechunk_repos import FIRST, SECOND, write_repository

tifffile = pytest.importorskip("tifffile")
needs_gdal = pytest.mark.skipif(shutil.which("gdal_translate") is None, reason="GDAL's command-line tools")

SHARDED = np.random.default_rng(7).random((9, 8)).astype("<f4")
NAMED = (np.arange(10 * 13, dtype=">i2").reshape(10, 13) - 60).astype(">i2")


@pytest.fixture(scope="module")
def v3_source(tmp_path_factory) -> Path:
    """A v3 hierarchy zarr-python wrote: `sharded` (shards of 2x2 inner chunks, 7 rows
    written: the rest NaN), `named` (big-endian, dimension names y/x), `sub/counts`, a
    string array `labels` (no v2 form without a codec) and a 0-d array."""
    path = tmp_path_factory.mktemp("v3") / "survey.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=3)
    root.attrs["title"] = "survey"
    sharded = root.create_array(
        "sharded", shape=(9, 8), chunks=(3, 4), shards=(6, 8), dtype="<f4", fill_value=float("nan"),
        dimension_names=["row", "col"],
    )  # fmt: skip
    sharded[:7] = SHARDED[:7]
    named = root.create_array(
        "named", shape=(10, 13), chunks=(4, 5), dtype=">i2", fill_value=-9, dimension_names=["y", "x"]
    )
    named[:] = NAMED
    root.create_group("sub").create_array("counts", shape=(5,), chunks=(2,), dtype="u8", fill_value=0)[:] = [
        1,
        2,
        3,
        4,
        5,
    ]
    root.create_array("labels", shape=(3,), dtype=str, dimension_names=["k"])[:] = ["a", "bb", "ccc"]
    root.create_array("scalar", shape=(), dtype="f8", fill_value=1.5)
    return path


def _expected(path: Path, name: str) -> np.ndarray:
    values = zarr.open_array(path / name, mode="r")[...]
    return values.astype(values.dtype.newbyteorder("<"))


def test_the_v2_view_lists_v2_documents_and_chunk_files_and_leaves_out_what_v2_cannot_say(module_mount, v3_source):
    m = module_mount(v3_source)
    v2 = m / ".zarrfs" / "v2"
    assert "v2" in os.listdir(m / ".zarrfs")
    assert sorted(os.listdir(v2)) == [".zattrs", ".zgroup", ".zmetadata", "named", "scalar", "sharded", "sub"]
    zarray = json.loads((v2 / "sharded" / ".zarray").read_text())
    assert zarray == {
        "zarr_format": 2, "shape": [9, 8], "chunks": [3, 4], "dtype": "<f4", "compressor": None,
        "filters": None, "fill_value": "NaN", "order": "C", "dimension_separator": ".",
    }  # fmt: skip
    assert json.loads((v2 / "named" / ".zarray").read_text())["dtype"] == "<i2"
    assert json.loads((v2 / "named" / ".zattrs").read_text()) == {"_ARRAY_DIMENSIONS": ["y", "x"]}
    assert json.loads((v2 / ".zattrs").read_text()) == {"title": "survey"}
    # one file per chunk of the inner grid, holding the decoded chunk as `chunks/` does
    names = sorted(n for n in os.listdir(v2 / "sharded") if not n.startswith("."))
    assert names == [f"{i}.{j}" for i in range(3) for j in range(2)]
    assert (v2 / "sharded" / "1.1").read_bytes() == (m / "sharded" / "chunks" / "1" / "1").read_bytes()
    assert os.listdir(v2 / "scalar") == [".zarray", ".zattrs", "0"]
    # the string array is not there, and its info says why
    assert not (v2 / "labels").exists()
    info = (m / "labels" / "info").read_text()
    assert "zarr v2 view:       left out: its data type string is variable-length" in info
    assert "zarr v2 view:       /.zarrfs/v2/named" in (m / "named" / "info").read_text()
    consolidated = json.loads((v2 / ".zmetadata").read_text())
    assert consolidated["zarr_consolidated_format"] == 1
    assert sorted(consolidated["metadata"]) == sorted(
        [".zgroup", ".zattrs"] + [f"{n}/{d}" for n in ("named", "scalar", "sharded", "sub/counts") for d in (".zarray", ".zattrs")]
        + ["sub/.zgroup", "sub/.zattrs"]
    )  # fmt: skip


def test_nothing_in_the_v2_view_is_written(mount, v3_source, tmp_path):
    source = tmp_path / "copy.zarr"
    shutil.copytree(v3_source, source)
    m = mount(source)
    v2 = m / ".zarrfs" / "v2"
    for write in (
        lambda: open(v2 / "named" / "0.0", "r+b"),
        lambda: open(v2 / "named" / ".zattrs", "w"),
        lambda: open(v2 / "named" / "new.npy", "wb"),
        lambda: os.mkdir(v2 / "new"),
        lambda: os.unlink(v2 / "named" / "0.0"),
        lambda: os.rename(v2 / "named", v2 / "renamed"),
        lambda: os.truncate(v2 / "named" / "0.0", 0),
    ):
        with pytest.raises(OSError) as info:
            write()
        assert info.value.errno == errno.EROFS
    assert (v2 / "named" / "0.0").exists()
    m.unmount()
    np.testing.assert_array_equal(zarr.open_array(source / "named", mode="r")[...], NAMED)


@needs_gdal
def test_gdal_reads_the_v2_view_of_a_sharded_array_and_of_one_with_dimension_names(module_mount, v3_source, tmp_path):
    m = module_mount(v3_source)
    v2 = m / ".zarrfs" / "v2"
    described = json.loads(subprocess.run(["gdalmdiminfo", str(v2)], capture_output=True, text=True, check=True).stdout)
    assert {"named", "sharded", "scalar"} <= set(described["arrays"])
    assert {d["name"] for d in described["dimensions"]} >= {"x", "y", "row", "col"}
    for name in ("sharded", "named"):
        out = tmp_path / f"{name}.tif"
        subprocess.run(["gdal_translate", "-q", "-of", "GTiff", f'ZARR:"{v2}":/{name}', str(out)], check=True)
        read = tifffile.imread(out)
        expected = _expected(v3_source, name)
        assert read.dtype == expected.dtype
        assert read.tobytes() == expected.tobytes(), name


def test_zarr_python_xarray_and_tensorstore_read_the_v2_view(module_mount, v3_source):
    m = module_mount(v3_source)
    v2 = m / ".zarrfs" / "v2"
    group = zarr.open_group(v2, mode="r", zarr_format=2)
    for name in ("sharded", "named", "sub/counts", "scalar"):
        read, expected = group[name][...], _expected(v3_source, name)
        assert read.dtype == expected.dtype and read.tobytes() == expected.tobytes(), name
    xr = pytest.importorskip("xarray")
    with xr.open_dataset(v2, engine="zarr", zarr_format=2, consolidated=True, mask_and_scale=False) as ds:
        assert ds["named"].dims == ("y", "x")
        np.testing.assert_array_equal(ds["named"].values, NAMED)
        assert ds["sharded"].values.tobytes() == _expected(v3_source, "sharded").tobytes()
    ts = pytest.importorskip("tensorstore")
    for name in ("sharded", "named"):
        store = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": f"{v2}/{name}/"}}).result()
        assert store.read().result().tobytes() == _expected(v3_source, name).tobytes(), name


@pytest.fixture(scope="session")
def zarr2_python(tmp_path_factory) -> Path:
    """The Python of a virtualenv of its own holding zarr-python 2.18 (from PyPI)."""
    where = tmp_path_factory.mktemp("zarr2") / "venv"
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "zarr>=2.18,<3"], capture_output=True, text=True, timeout=600
    )
    if installed.returncode != 0:
        pytest.skip(f"zarr-python 2.18 could not be installed from PyPI: {installed.stderr.strip()[-300:]}")
    return python


_ZARR2_READ = """
import sys, json, zarr, numpy as np
assert zarr.__version__.startswith("2.18"), zarr.__version__
group = zarr.open_consolidated(sys.argv[1], mode="r")
out = {}
for name in sys.argv[2:]:
    values = group[name][...]
    out[name] = [values.dtype.str, values.tobytes().hex()]
print(json.dumps(out))
"""


def _zarr2_read(python: Path, store: Path, *names: str) -> dict[str, np.ndarray]:
    done = subprocess.run([str(python), "-c", _ZARR2_READ, str(store), *names], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return {n: np.frombuffer(bytes.fromhex(h), dtype=d) for n, (d, h) in json.loads(done.stdout).items()}


def test_zarr_python_2_18_reads_the_v2_view(module_mount, v3_source, zarr2_python):
    m = module_mount(v3_source)
    read = _zarr2_read(zarr2_python, m / ".zarrfs" / "v2", "sharded", "named", "sub/counts")
    for name, values in read.items():
        assert values.tobytes() == _expected(v3_source, name).tobytes(), name


@pytest.fixture(scope="module")
def icechunk_repo(tmp_path_factory) -> Path:
    icechunk = pytest.importorskip("icechunk")
    path = tmp_path_factory.mktemp("ic") / "repo"
    write_repository(icechunk.local_filesystem_storage(str(path)))
    return path


@needs_gdal
def test_an_icechunk_repository_and_its_versions_read_through_the_v2_view(mount, icechunk_repo, tmp_path, zarr2_python):
    m = mount(icechunk_repo, "--read-only")
    head = m / ".zarrfs" / "v2"
    tagged = m / ".zarrfs" / "versions" / "tags" / "v1" / ".zarrfs" / "v2"
    for v2, expected in ((head, SECOND), (tagged, FIRST)):
        out = tmp_path / "temp.tif"
        subprocess.run(["gdal_translate", "-q", "-of", "GTiff", f'ZARR:"{v2}":/temp', str(out)], check=True)
        assert tifffile.imread(out).tobytes() == expected.astype("<i4").tobytes()
        assert _zarr2_read(zarr2_python, v2, "temp")["temp"].tobytes() == expected.astype("<i4").tobytes()
    assert sorted(os.listdir(head)) == [".zattrs", ".zgroup", ".zmetadata", "grp", "temp"]
    assert sorted(os.listdir(tagged)) == [".zattrs", ".zgroup", ".zmetadata", "temp"]


@pytest.fixture(scope="module")
def netcdf_references(tmp_path_factory) -> tuple[Path, Path]:
    """(a NetCDF4 file netCDF4 wrote: `tas` (time, lat, lon) float32, zlib-compressed and
    chunked, with coordinate variables; its kerchunk references as JSON)."""
    netCDF4 = pytest.importorskip("netCDF4")
    kerchunk_hdf = pytest.importorskip("kerchunk.hdf")
    directory = tmp_path_factory.mktemp("nc")
    nc = directory / "tas.nc"
    with netCDF4.Dataset(nc, "w") as ds:
        ds.createDimension("time", 4)
        ds.createDimension("lat", 6)
        ds.createDimension("lon", 10)
        ds.createVariable("lat", "f8", ("lat",))[:] = np.linspace(-50, 50, 6)
        ds.createVariable("lon", "f8", ("lon",))[:] = np.linspace(0, 324, 10)
        tas = ds.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=(2, 3, 5))
        tas.units = "K"
        tas[:] = 250 + np.arange(240, dtype="f4").reshape(4, 6, 10) / 4
    refs = kerchunk_hdf.SingleHdf5ToZarr(str(nc), inline_threshold=0).translate()
    path = directory / "tas.json"
    path.write_text(json.dumps(refs))
    return nc, path


@needs_gdal
def test_a_kerchunk_referenced_netcdf4_variable_reads_through_the_v2_view(mount, netcdf_references, tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    xr = pytest.importorskip("xarray")
    nc, refs = netcdf_references
    with netCDF4.Dataset(nc) as ds:
        ds.set_auto_mask(False)
        expected = ds["tas"][:]
    m = mount(refs)
    v2 = m / ".zarrfs" / "v2"
    assert json.loads((v2 / "tas" / ".zarray").read_text())["compressor"] is None
    # the classic driver shows one (lat, lon) slice of (time, lat, lon) at a time
    for t in range(4):
        out = tmp_path / f"tas{t}.tif"
        subprocess.run(["gdal_translate", "-q", "-of", "GTiff", f'ZARR:"{v2}":/tas:{t}', str(out)], check=True)
        assert tifffile.imread(out).tobytes() == expected[t].astype("<f4").tobytes()
    with xr.open_dataset(v2, engine="zarr", zarr_format=2, consolidated=True) as ds:
        assert ds["tas"].dims == ("time", "lat", "lon")
        assert ds["tas"].values.tobytes() == expected.astype("<f4").tobytes()
        assert ds["tas"].attrs["units"] == "K"


def test_the_v2_view_lists_a_large_grid_lazily(mount, tmp_path):
    source = tmp_path / "big.zarr"
    zarr.create_array(source, shape=(200, 300), chunks=(2, 2), dtype="u1", fill_value=3, zarr_format=3)
    m = mount(source)
    names = os.listdir(m / ".zarrfs" / "v2")  # an array at the root: its v2 form is the root's
    assert len(names) == 100 * 150 + 2 and {".zarray", ".zattrs", "0.0", "99.149"} <= set(names)
    assert (m / ".zarrfs" / "v2" / "99.149").read_bytes() == b"\x03" * 4
    assert not (m / ".zarrfs" / "v2" / "100.0").exists()


def test_the_v3_draft_layouts_read_through_the_v2_view(mount, zarr2_python):
    from tests.format.draft_fixtures import CORPUS_2019, CORPUS_ARRAYS, CORPUS_V2

    m = mount(CORPUS_2019)
    v2 = m / ".zarrfs" / "v2"
    read = _zarr2_read(zarr2_python, v2, *CORPUS_ARRAYS)
    for draft, plain in CORPUS_ARRAYS.items():
        expected = zarr.open_array(CORPUS_V2 / plain, mode="r")[...]
        assert read[draft].tobytes() == expected.astype(expected.dtype.newbyteorder("<")).tobytes(), draft


def test_attributes_holding_nan_and_infinity_read_through_the_v2_view(mount, tmp_path):
    """zarr-python writes a NaN or infinite attribute as a bare NaN/Infinity, as zarr-python
    2 does in .zattrs: the array's .zattrs and the view's .zmetadata carry them so (they
    failed EIO, and zarr-python could not open the view)."""
    root = zarr.open_group(tmp_path / "attrs.zarr", mode="w", zarr_format=3)
    array = root.create_array("a", shape=(2,), dtype="<f4", fill_value=0, dimension_names=["x"])
    array[:] = [1, 2]
    array.attrs.update({"missing_value": float("nan"), "valid_max": float("inf"), "units": "K"})
    v2 = mount(tmp_path / "attrs.zarr") / ".zarrfs" / "v2"
    assert ".zattrs" in os.listdir(v2 / "a")
    for consolidated in (False, True):
        read = zarr.open_group(v2, mode="r", zarr_format=2, use_consolidated=consolidated)["a"]
        attrs = dict(read.attrs)
        assert np.isnan(attrs.pop("missing_value")) and attrs == {
            "valid_max": float("inf"), "units": "K", "_ARRAY_DIMENSIONS": ["x"]
        }, consolidated  # fmt: skip
        assert read[...].tolist() == [1, 2]


def test_the_v2_views_zmetadata_shows_nodes_made_and_removed_through_the_mount_at_once(mount, tmp_path):
    """A node made (mkdir, cp of a .npy) or removed through the mount is in (out of) the
    v2 view's .zmetadata as soon as the change returns, as in its listing, and `stat`
    gives the size a read returns (it kept the hierarchy first shown for --metadata-ttl,
    so zarr-python, which reads .zmetadata first, did not find the new array)."""
    root = zarr.open_group(tmp_path / "made.zarr", mode="w", zarr_format=3)
    root.create_array("old", shape=(3,), dtype="<i4", fill_value=0)
    values = np.arange(5, dtype="<f8")
    np.save(tmp_path / "x.npy", values)
    m = mount(tmp_path / "made.zarr", "--metadata-ttl", "3600")
    v2 = m / ".zarrfs" / "v2"
    assert sorted(zarr.open_group(v2, mode="r", zarr_format=2, use_consolidated=True).array_keys()) == ["old"]
    (m / "g").mkdir()
    shutil.copy(tmp_path / "x.npy", m / "g" / "x.npy")
    shutil.rmtree(m / "old")
    zmetadata = v2 / ".zmetadata"
    assert os.stat(zmetadata).st_size == len(zmetadata.read_bytes())
    keys = set(json.loads(zmetadata.read_bytes())["metadata"])
    assert {"g/.zgroup", "g/x/.zarray"} <= keys and not any(k.startswith("old/") for k in keys), keys
    group = zarr.open_group(v2, mode="r", zarr_format=2, use_consolidated=True)
    assert group["g/x"][...].tobytes() == values.tobytes()
    assert "old" not in group
