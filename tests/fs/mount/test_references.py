"""kerchunk references to HDF5 files written by h5py (JSON, parquet), as SOURCE and as
`reference://` with `fo`, the files local or on S3: every variable's `data.npy` equals h5py's values;
every write is refused with EROFS; `zarrfs info` reads the references too."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

from tests.conftest import zarrfs
from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem  # noqa: F401

h5py = pytest.importorskip("h5py")
kerchunk_hdf = pytest.importorskip("kerchunk.hdf")

# name -> (values, h5py dataset options): HDF5 filters kerchunk turns into numcodecs ones
VARIABLES = {
    "temp": (
        np.arange(60 * 30, dtype="f4").reshape(60, 30) / 7,
        {"chunks": (16, 10), "compression": "gzip", "shuffle": True},
    ),
    "grp/counts": (np.arange(1000, dtype="i8") * 3, {"chunks": (128,), "compression": "gzip"}),
    "grp/small": (np.array([1.5, 2.5, 3.5]), {}),
    "big_endian": (np.arange(50, dtype=">i4") - 25, {"chunks": (10,), "shuffle": True}),
    "plain": (np.arange(240, dtype="u2").reshape(2, 30, 4), {"chunks": (1, 30, 4)}),
    "scalar": (np.float64(2.5), {}),
}


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """(the HDF5 file, its JSON references) written by h5py and kerchunk."""
    directory = tmp_path_factory.mktemp("refs")
    h5 = directory / "survey.h5"
    with h5py.File(h5, "w") as f:
        for name, (values, options) in VARIABLES.items():
            f.create_dataset(name, data=values, **options)
        f["temp"].attrs["units"] = "K"
    refs = kerchunk_hdf.SingleHdf5ToZarr(str(h5), inline_threshold=64).translate()
    path = directory / "survey.json"
    path.write_text(json.dumps(refs))
    return h5, path


def _check_values_and_read_only(m, h5, names=tuple(VARIABLES)) -> None:
    with h5py.File(h5, "r") as f:
        for name in names:
            np.testing.assert_array_equal(np.load(m / name / "data.npy"), f[name][...], err_msg=name)
    for write in (
        lambda: open(m / "temp" / "data", "r+b"),
        lambda: os.mkdir(m / "new"),
        lambda: os.unlink(m / "temp" / "chunks" / "0" / "0"),
        lambda: os.setxattr(m / "temp", "user.zarr.units", b'"C"'),
    ):
        with pytest.raises(OSError) as info:
            write()
        assert info.value.errno == errno.EROFS


def test_a_references_file_as_source_mounts_read_only_with_h5pys_values(mount, references):
    h5, refs = references
    m = mount(refs)
    _check_values_and_read_only(m, h5)
    assert json.loads(os.getxattr(m / "temp", "user.zarr.units")) == "K"


def test_a_version_0_references_file_as_source_mounts_read_only_with_h5pys_values(mount, references, tmp_path):
    # kerchunk's version 0: the bare key -> reference object, without the `version`/`refs`
    # wrapper (what older kerchunk wrote; fsspec still reads it); its first key is a chunk's
    h5, refs = references
    document = json.loads(refs.read_text())["refs"]
    assert not next(iter(document)).endswith((".zgroup", ".zattrs", ".zarray"))
    version_0 = tmp_path / "survey_v0.json"
    version_0.write_text(json.dumps(document))
    _check_values_and_read_only(mount(version_0), h5)


def test_a_parquet_references_directory_as_source_mounts_read_only(mount, references, tmp_path):
    pytest.importorskip("fastparquet")
    from kerchunk.df import refs_to_dataframe

    # fsspec's parquet references hold arrays at the root only: the group is left out
    document = json.loads(references[1].read_text())
    document["refs"] = {k: v for k, v in document["refs"].items() if not k.startswith("grp")}
    refs_to_dataframe(document, str(tmp_path / "survey.parq"), record_size=4)
    m = mount(tmp_path / "survey.parq")
    _check_values_and_read_only(m, references[0], [name for name in VARIABLES if "/" not in name])


def test_reference_url_with_fo_mounts_read_only_with_h5pys_values(mount, references):
    h5, refs = references
    m = mount("reference://", "--storage-option", f"fo={refs}")
    _check_values_and_read_only(m, h5)


def test_info_reads_a_references_file(references):
    out = zarrfs("info", references[1]).stdout
    words = " ".join(out.split())  # (the tree's columns are aligned)
    assert "temp array" in words and "counts array" in words
    node = zarrfs("info", references[1], "temp").stdout
    assert "(60, 30)" in node and "shuffle" in node


def test_a_json_file_that_is_not_references_is_not_mounted(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"name": "not references", "refs": {}}))
    (tmp_path / "m").mkdir()
    result = zarrfs("mount", other, tmp_path / "m", check=False)
    assert result.returncode != 0 and "not a Zarr hierarchy" in result.stderr


def test_references_to_files_on_s3_read_through_the_remote_options(
    mount, references, s3_bucket, s3_endpoint, s3_filesystem, tmp_path
):
    h5, refs = references
    s3_filesystem.put(str(h5), f"{s3_bucket}/survey.h5")
    document = json.loads(refs.read_text())
    for key, value in document["refs"].items():
        if isinstance(value, list):
            document["refs"][key] = [f"s3://{s3_bucket}/survey.h5", *value[1:]]
    remote = tmp_path / "remote.json"
    remote.write_text(json.dumps(document))
    options = json.dumps({"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"})
    m = mount(remote, "--storage-option", "remote_protocol=s3", "--storage-option", f"remote_options={options}")
    _check_values_and_read_only(m, h5)
