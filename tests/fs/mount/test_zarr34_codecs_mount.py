"""Arrays zarr-python 3.4 wrote with `scale_offset`, `cast_value`, pcodec and zfpy,
mounted: `data`, chunk files and `info` byte-exact with what zarr-python read (the
committed corpus), a missing codec package an EIO whose log line names it, and writes
through the mount stored as zarr-python stores them. Where zarr-python >= 3.4 is
installed (Python >= 3.12) fresh arrays are written and read back by it as well."""

from __future__ import annotations

import errno
import os
import shutil
import warnings

import numcodecs
import numpy as np
import pytest

from tests.zarr34_corpus import (
    NAMES,
    NEEDS_PACKAGE,
    STORE,
    expected,
    expected_chunks,
    hiding_packages,
    metadata,
    written,
)
from tests.zarr34_corpus import installed as _installed

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

ZARR_34 = tuple(int(p) for p in zarr.__version__.split(".")[:2]) >= (3, 4)
try:
    import cast_value_rs  # noqa: F401  zarr-python's cast_value needs it
except ImportError:
    CAST_VALUE_RS = False
else:
    CAST_VALUE_RS = True
needs_zarr_34 = pytest.mark.skipif(
    not (ZARR_34 and CAST_VALUE_RS), reason="needs zarr-python >= 3.4 with cast-value-rs"
)


READABLE = [n for n in NAMES if n not in NEEDS_PACKAGE or _installed(NEEDS_PACKAGE[n])]


@pytest.fixture(scope="module")
def corpus(module_mount):
    return module_mount(STORE, "--read-only")


@pytest.mark.parametrize("name", READABLE)
def test_data_is_what_zarr_python_read(corpus, name):
    assert (corpus / name / "data").read_bytes() == expected(name).astype(
        expected(name).dtype.newbyteorder("<")
    ).tobytes()
    assert np.array_equal(np.load(corpus / name / "data.npy"), expected(name), equal_nan=True)


@pytest.mark.parametrize("name", READABLE)
def test_chunk_files_are_what_zarr_python_read(corpus, name):
    for coords, chunk in expected_chunks(name):
        path = corpus / name / "chunks" / os.path.join(*map(str, coords))
        assert path.read_bytes() == chunk.tobytes(), coords


@pytest.mark.parametrize("name", ["scale_cast_u8_nan", "scale_cast_then_shards", *sorted(NEEDS_PACKAGE)])
def test_info_names_the_codecs(corpus, name):
    if name in NEEDS_PACKAGE and not _installed(NEEDS_PACKAGE[name]):
        pytest.skip("its package is missing here: test_missing_package_is_eio_naming_it covers it")
    info = (corpus / name / "info").read_text()
    for codec in metadata(name)["codecs"]:
        assert codec["name"] in info


def test_missing_package_is_eio_naming_it(mount, tmp_path):
    shim = hiding_packages(tmp_path / "shim", "pcodec", "zfpy")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])}
    m = mount(STORE, "--read-only", env=env)
    for name, package in NEEDS_PACKAGE.items():
        with pytest.raises(OSError) as info:
            (m / name / "data").read_bytes()
        assert info.value.errno == errno.EIO
        lines = [line for line in m.log_text().splitlines() if f"/{name}" in line and f"'{package}'" in line]
        assert lines, f"no log line names /{name} and {package!r}:\n{m.log_text()}"
    assert (m / "scale_offset_f32" / "data").read_bytes() == expected("scale_offset_f32").tobytes()


def _fresh_copy(tmp_path, name):
    copy = tmp_path / "s.zarr"
    shutil.copytree(STORE, copy)
    shutil.rmtree(copy / name / "c")
    return copy


NUMCODECS_BEFORE_0_17 = tuple(int(p) for p in numcodecs.__version__.split(".")[:2]) < (0, 17)
# where numcodecs cannot encode them (tests/format/test_zarr34_codecs.py checks the refusal)
WRITABLE = [n for n in READABLE if not ("no_op" in n and NUMCODECS_BEFORE_0_17)]


@pytest.mark.parametrize("name", [n for n in WRITABLE if "shards" not in n])
def test_values_written_through_data_are_stored_as_zarr_python_stored_them(mount, tmp_path, name):
    copy = _fresh_copy(tmp_path, name)
    region, values = written(name)
    m = mount(copy)
    shape = expected(name).shape
    start = np.ravel_multi_index([r.start for r in region], shape) if values.ndim else 0
    if _is_contiguous(region, shape):
        with open(m / name / "data", "r+b") as f:
            f.seek(int(start) * values.dtype.itemsize)
            f.write(values.astype(values.dtype.newbyteorder("<")).tobytes())
    else:  # row by row, as a program writing part of an image would
        with open(m / name / "data", "r+b") as f:
            for index in np.ndindex(*[r.stop - r.start for r in region[:-1]]):
                at = [r.start + i for r, i in zip(region, index)] + [region[-1].start]
                f.seek(int(np.ravel_multi_index(at, shape)) * values.dtype.itemsize)
                f.write(values[index].tobytes())
    m.unmount()
    if ZARR_34 and CAST_VALUE_RS:
        ours = zarr.open_array(copy / name, mode="r")[...]
        assert ours.tobytes() == expected(name).tobytes()
    theirs = sorted(p.relative_to(STORE / name) for p in (STORE / name / "c").rglob("*") if p.is_file())
    assert sorted(p.relative_to(copy / name) for p in (copy / name / "c").rglob("*") if p.is_file()) == theirs


def _is_contiguous(region, shape) -> bool:
    return all(r.start == 0 and r.stop == n for r, n in zip(region[1:], shape[1:]))


@pytest.mark.parametrize("name", [n for n in WRITABLE if "shards" not in n and len(expected(n).shape) == 1])
def test_chunk_file_written_through_the_mount_reads_back_in_zarr_python(mount, tmp_path, name):
    copy = _fresh_copy(tmp_path, name)
    m = mount(copy)
    _coords, chunk = next(expected_chunks(name))
    (m / name / "chunks" / "0").write_bytes(chunk.tobytes())
    m.unmount()
    assert (copy / name / "c" / "0").exists()
    if ZARR_34 and CAST_VALUE_RS:
        n = chunk.shape[0]
        got = zarr.open_array(copy / name, mode="r")[:n]
        assert got.tobytes() == chunk[: len(got)].tobytes()


# ------------------------------------------------ fresh arrays written by zarr-python 3.4


@needs_zarr_34
@pytest.mark.parametrize(
    "rounding", ["nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away"]
)
@pytest.mark.parametrize("out_of_range", ["clamp", "wrap"])
def test_fresh_scale_cast_array_reads_as_zarr_python_reads_it(mount, tmp_path, rounding, out_of_range):
    from zarr.codecs import CastValue, ScaleOffset

    rng = np.random.default_rng(hash((rounding, out_of_range)) % 2**32)
    values = rng.uniform(-400, 3000, size=(23, 9)).round(1)
    values[rng.random(values.shape) < 0.1] = np.nan
    a = zarr.create_array(
        tmp_path / "a.zarr",
        shape=values.shape,
        chunks=(5, 4),
        dtype="float64",
        fill_value=np.nan,
        filters=[
            ScaleOffset(offset=-10, scale=0.5),
            CastValue(
                data_type="int8" if out_of_range == "wrap" else "uint16",
                rounding=rounding,
                out_of_range=out_of_range,
                scalar_map={"encode": [("NaN", 0)], "decode": [(0, "NaN")]},
            ),
        ],
    )
    a[:20] = values[:20]
    theirs = a[...]
    m = mount(tmp_path / "a.zarr")
    assert m.path.joinpath("data").read_bytes() == theirs.tobytes()
    # the same values written through the mount into a twin array: zarr-python reads the same
    twin = zarr.create_array(
        tmp_path / "b.zarr", shape=a.shape, chunks=a.chunks, dtype=a.dtype, fill_value=np.nan, filters=a.filters
    )
    del twin
    m2 = mount(tmp_path / "b.zarr")
    with open(m2.path / "data", "r+b") as f:
        f.write(values[:20].tobytes())
    m2.unmount()
    assert zarr.open_array(tmp_path / "b.zarr", mode="r")[...].tobytes() == theirs.tobytes()


@needs_zarr_34
def test_fresh_pcodec_and_zfpy_arrays_read_as_zarr_python_reads_them(mount, tmp_path):
    from zarr.codecs.numcodecs import ZFPY, PCodec

    values = np.cumsum(np.random.default_rng(5).normal(size=(30, 7)), axis=0)
    for name, serializer in [("p", PCodec(level=8, delta_spec="no_op")), ("z", ZFPY(mode=3, precision=20))]:
        a = zarr.create_array(
            tmp_path / "r.zarr" / name,
            shape=values.shape,
            chunks=(8, 4),
            dtype="float64",
            serializer=serializer,
            compressors=None,
        )
        a[:] = values
    m = mount(tmp_path / "r.zarr")
    for name in ("p", "z"):
        assert (m / name / "data").read_bytes() == zarr.open_array(tmp_path / "r.zarr" / name, mode="r")[...].tobytes()
