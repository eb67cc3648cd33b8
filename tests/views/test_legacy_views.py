"""The legacy-tool views (data.tif, data.nhdr, data.hdr, data.csv) read directly, without
FUSE: which arrays show which files, exact sizes, random ranges equal to the whole
rendered file, and values read back by tifffile, pynrrd and numpy as zarr-python wrote
them. `write_reference_arrays` also feeds the mounted readers in tests/fs/mount."""

from __future__ import annotations

import functools
import io
import warnings
from pathlib import Path

import nrrd
import numcodecs
import numpy as np
import pytest
import tifffile

from tests.format.format_oracle import sample_values
from zarrfs.format import Hierarchy
from zarrfs.store import open_store
from zarrfs.views import catalogue
from zarrfs.views.data import DataView
from zarrfs.views.legacy.csv import CsvView, iso_datetime
from zarrfs.views.legacy.tiff import TiffView, rows_per_strip, tiff_size

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::Warning:zarr")

NOT_LEGACY = {"info", "data", "data.npy", "data.jsonl"}


class _Alone:
    """The surroundings of an array consulted alone: its chunks as stored, no neighbours."""

    def chunks_of(self, array):
        return None

    def neighbours(self, path):
        return None


def legacy_views(array):
    """The files the catalogue shows in the array's directory beside its data and info,
    by name, each made when called, as the array alone has them."""
    around = _Alone()
    return {
        name: functools.partial(catalogue.kind_of(array, name).make, array, name, "", around)
        for name in catalogue.shown(array, "", around)
        if name not in NOT_LEGACY
    }


# name: (shape, dtype, chunks, options, files it shows)
REFERENCE = {
    "u16_edges": ((53, 70), "uint16", (16, 32), {"fill_value": 7}, {"tif", "nhdr", "hdr", "csv"}),
    "f32_pages": ((3, 40, 33), "float32", (2, 16, 16), {}, {"tif", "nhdr", "hdr"}),
    "rgb_u8": ((40, 50, 3), "uint8", (16, 16, 3), {}, {"tif", "nhdr", "hdr"}),
    "rgba_u16": ((30, 20, 4), "uint16", (8, 8, 2), {}, {"tif", "nhdr", "hdr"}),
    "i32_sharded": ((64, 48), "int32", (8, 16), {"shards": (32, 48)}, {"tif", "nhdr", "hdr", "csv"}),
    "f8_v2_order_F": (
        (37, 29),
        ">f8",
        (10, 10),
        {"zarr_format": 2, "order": "F", "compressors": numcodecs.Zstd()},
        {"tif", "nhdr", "hdr", "csv"},
    ),
    "i8_vector": ((100,), "int8", (30,), {}, {"nhdr", "csv"}),
    "f64_vector": ((50,), "float64", (16,), {}, {"nhdr", "csv"}),
    "bool_2d": ((10, 12), "bool", (4, 5), {}, {"nhdr", "hdr", "csv"}),
    "i64_2d": ((9, 11), "int64", (4, 4), {}, {"tif", "nhdr", "hdr", "csv"}),
    "f16_2d": ((12, 10), "float16", (5, 5), {}, {"tif", "csv"}),
    "u64_pages": ((2, 7, 9), "uint64", (1, 4, 4), {}, {"tif", "nhdr", "hdr"}),
    "c64_2d": ((6, 5), "complex64", (4, 4), {}, {"hdr"}),
    "f32_4d": ((2, 3, 4, 5), "float32", (1, 2, 2, 5), {}, {"nhdr"}),
    "u8_scalar": ((), "uint8", (), {}, set()),
    "u8_empty": ((0, 5), "uint8", (1, 5), {}, set()),
}


def reference_values(name: str) -> np.ndarray:
    shape, dtype, *_ = REFERENCE[name]
    return sample_values(np.dtype(dtype), shape, seed=sum(map(ord, name)))


def write_reference_arrays(root: Path) -> None:
    """Every REFERENCE array, written by zarr-python. `u16_edges` leaves its last chunk
    row unwritten (it reads as the fill value)."""
    group = zarr.open_group(str(root), mode="w")
    for name, (shape, dtype, chunks, options, _) in REFERENCE.items():
        # through the store path: a Group makes children of its own format only
        array = zarr.create_array(str(root / name), shape=shape, dtype=dtype, chunks=chunks, **options)
        values = reference_values(name)
        if name == "u16_edges":
            array[:48] = values[:48]
        elif values.size:
            array[...] = values
    group.create_array("text", shape=(4,), dtype=str, chunks=(2,))


def expected_values(name: str) -> np.ndarray:
    values = reference_values(name)
    if name == "u16_edges":
        values[48:] = 7
    return values


@pytest.fixture(scope="module")
def hierarchy(tmp_path_factory) -> Hierarchy:
    root = tmp_path_factory.mktemp("legacy") / "ref.zarr"
    write_reference_arrays(root)
    return Hierarchy(open_store(str(root)))


def all_views():
    return [(name, f"data.{ext}") for name, spec in REFERENCE.items() for ext in sorted(spec[4])]


def test_each_array_shows_the_files_its_format_can_represent(hierarchy):
    for name, spec in REFERENCE.items():
        shown = set(legacy_views(hierarchy.open_node(name))) - {"preview.png"}  # (tests/views/test_preview.py)
        assert shown == {f"data.{ext}" for ext in spec[4]}, name
    assert legacy_views(hierarchy.open_node("text")) == {}


@pytest.mark.parametrize(("name", "file"), all_views())
def test_size_is_exact_and_any_range_reads_the_same_bytes(hierarchy, name, file):
    view = legacy_views(hierarchy.open_node(name))[file]()
    size = view.size()
    whole = view.read(0, size + 100)
    assert len(whole) == size
    rng = np.random.default_rng(size)
    for _ in range(40):
        offset = int(rng.integers(0, size + 10))
        length = int(rng.integers(0, min(size, 5000) + 1))
        assert view.read(offset, length) == whole[offset : offset + length], (offset, length)
    assert view.read(size, 10) == b""


@pytest.mark.parametrize("name", [n for n, spec in REFERENCE.items() if "tif" in spec[4]])
def test_tifffile_reads_data_tif_and_its_pixels_are_the_data_bytes(hierarchy, name):
    array = hierarchy.open_node(name)
    view = TiffView(array)
    content = view.read(0, view.size())
    expected = expected_values(name)
    np.testing.assert_array_equal(tifffile.imread(io.BytesIO(content)), expected)
    data = DataView(array).read(0, DataView(array).size())
    with tifffile.TiffFile(io.BytesIO(content)) as tif:
        assert tif.byteorder == "<" and not tif.is_bigtiff
        page_bytes = len(data) // len(tif.pages)
        for z, page in enumerate(tif.pages):
            start = page.dataoffsets[0]
            assert page.compression == 1 and list(np.diff(page.dataoffsets)) == list(page.databytecounts[:-1])
            assert content[start : start + page_bytes] == data[z * page_bytes : (z + 1) * page_bytes]


def test_rgb_and_rgba_are_one_interleaved_colour_page(hierarchy):
    for name, alpha in (("rgb_u8", False), ("rgba_u16", True)):
        view = TiffView(hierarchy.open_node(name))
        with tifffile.TiffFile(io.BytesIO(view.read(0, view.size()))) as tif:
            (page,) = tif.pages
            assert page.photometric == tifffile.PHOTOMETRIC.RGB and page.planarconfig == 1
            assert bool(page.extrasamples) == alpha


def test_forced_bigtiff_reads_back(hierarchy):
    view = TiffView(hierarchy.open_node("f32_pages"), bigtiff=True)
    with tifffile.TiffFile(io.BytesIO(view.read(0, view.size()))) as tif:
        assert tif.is_bigtiff
        np.testing.assert_array_equal(tif.asarray(), expected_values("f32_pages"))


@pytest.mark.parametrize("bigtiff", [False, True])
@pytest.mark.parametrize(
    ("shape", "chunks", "dtype"),
    [
        ((3, 2000, 40), (1, 500, 40), "uint8"),  # pages of 4 strips: their offsets out of line
        ((2, 9, 5), (1, 9, 5), "int16"),  # one strip a page: offsets inline
        ((600, 700, 3), (100, 700, 3), "uint8"),  # RGB, several strips
    ],
)
def test_the_size_of_the_ifds_is_computed_without_writing_them(tmp_path, shape, chunks, dtype, bigtiff):
    """The layout (where each IFD and the pixels lie, hence the size) is arithmetic; the
    IFDs written are as long as it says, and tifffile reads the pages where they are."""
    root = tmp_path / "a.zarr"
    array = zarr.create_array(str(root), shape=shape, chunks=chunks, dtype=dtype)
    values = (np.arange(np.prod(shape)) % 199).reshape(shape).astype(dtype)
    array[...] = values
    node = Hierarchy(open_store(str(root))).open_node("")
    view = TiffView(node, bigtiff=bigtiff)
    assert all(len(view._page_block(z)) == view.block_size for z in range(view.pages))
    content = view.read(0, view.size() + 1)
    assert len(content) == view.size()
    if not bigtiff:
        assert tiff_size(node) == view.size()
    with tifffile.TiffFile(io.BytesIO(content)) as tif:
        assert tif.is_bigtiff == bigtiff
        np.testing.assert_array_equal(tif.asarray(), values)


class ViewFile(io.RawIOBase):
    """A view as a read-only binary file, for readers that take file objects."""

    def __init__(self, view) -> None:
        self.view, self.pos = view, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = (0, self.pos, self.view.size())[whence] + offset
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, buffer) -> int:
        data = self.view.read(self.pos, len(buffer))
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def test_a_tiff_past_4_gib_is_a_bigtiff(tmp_path):
    root = tmp_path / "huge.zarr"
    zarr.create_array(str(root), shape=(2, 40000, 40000), dtype="uint16", chunks=(1, 256, 8192), fill_value=3)
    view = TiffView(Hierarchy(open_store(str(root))).open_node(""))
    assert view.size() == view.pixels_at + 2 * 40000 * 40000 * 2 > 1 << 32
    with tifffile.TiffFile(io.BufferedReader(ViewFile(view))) as tif:
        assert tif.is_bigtiff and len(tif.pages) == 2
        page = tif.pages[1]
        assert page.shape == (40000, 40000)
        assert page.dataoffsets[0] == view.pixels_at + 40000 * 40000 * 2
        row = 39999
        offset = page.dataoffsets[0] + row * 80000
        assert np.all(np.frombuffer(view.read(offset, 80000), "<u2") == 3)


def test_reading_one_tiff_row_touches_only_the_chunks_of_that_row(tmp_path):
    root = tmp_path / "wide.zarr"
    array = zarr.create_array(str(root), shape=(256, 65536), dtype="uint8", chunks=(64, 8192))
    array[...] = 1
    node = Hierarchy(open_store(str(root))).open_node("")
    view = TiffView(node)
    row = 70  # chunk row 1; 65536 / 8192 = 8 chunks
    before = node.context.stats.snapshot()
    line = view.read(view.pixels_at + row * 65536, 65536)
    after = node.context.stats.snapshot()
    assert line == b"\1" * 65536
    assert after["store_requests"] - before.get("store_requests", 0) == 8
    # a whole strip (what a reader fetches for that row) stays within the same chunk row
    strip = view.rows_per_strip
    assert 64 % strip == 0 and strip * 65536 <= 1 << 20


def test_rows_per_strip_never_crosses_a_chunk_row():
    assert rows_per_strip(1000, 1000, 100) == 1000
    assert rows_per_strip(1000, 100, 100) == 100
    assert rows_per_strip(5000, 1000, 40000) == 25  # 26 rows fit 1 MiB; 25 divides 1000
    assert rows_per_strip(5000, 997, 40000) == 1
    assert rows_per_strip(10, 64, 10 << 20) == 1


@pytest.mark.parametrize("name", [n for n, spec in REFERENCE.items() if "csv" in spec[4]])
def test_numpy_loadtxt_reads_data_csv_exactly(hierarchy, name):
    view = CsvView(hierarchy.open_node(name))
    text = view.read(0, view.size())
    expected = expected_values(name)
    got = np.loadtxt(io.BytesIO(text), delimiter=",", dtype=expected.dtype.newbyteorder("="), ndmin=expected.ndim)
    assert_same_numbers(got, expected)
    widths = {len(field) for line in text.decode().splitlines() for field in line.split(",")}
    assert len(widths) == 1


def assert_same_numbers(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal values, NaN where NaN, and the sign of zero kept."""
    assert got.shape == expected.shape
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)
        return
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan], expected[~nan])
    assert np.array_equal(np.signbit(got[~nan]), np.signbit(expected[~nan]))


def test_csv_values_have_one_width_per_type(tmp_path):
    cases = {
        "float32": ([1.0, -np.inf, np.nan, -0.0], " 1.00000000e+00,           -inf,            nan,-0.00000000e+00\n"),
        "float64": ([1e-300, np.inf], " 1.0000000000000000e-300,                     inf\n"),
        "float16": ([65504.0, 6e-08], " 6.5504e+04, 5.9605e-08\n"),
        "int8": ([-128, 5, -7], "-128,   5,  -7\n"),
        "uint64": ([2**64 - 1, 0], "18446744073709551615,                   0\n"),
        "bool": ([True, False], "1,0\n"),
    }
    for dtype, (values, text) in cases.items():
        root = tmp_path / f"{dtype}.zarr"
        array = zarr.create_array(str(root), shape=(1, len(values)), dtype=dtype, chunks=(1, 1))
        array[...] = np.array([values], dtype=dtype)
        view = CsvView(Hierarchy(open_store(str(root))).open_node(""))
        assert view.read(0, view.size()).decode() == text, dtype


def test_float_csv_round_trips_every_special_value(tmp_path):
    for dtype in ("float16", "float32", "float64"):
        info = np.finfo(dtype)
        values = np.array(
            [info.max, -info.max, info.tiny, info.smallest_subnormal, info.eps, -0.0, np.nan, np.inf, -np.inf, 1 / 3],
            dtype=dtype,
        )
        values = np.concatenate([values, np.random.default_rng(1).standard_normal(500).astype(dtype) * 1e3])
        root = tmp_path / f"{dtype}.zarr"
        zarr.create_array(str(root), shape=values.shape, dtype=dtype, chunks=(64,))[...] = values
        view = CsvView(Hierarchy(open_store(str(root))).open_node(""))
        got = np.loadtxt(io.BytesIO(view.read(0, view.size())), delimiter=",", dtype=dtype)
        assert_same_numbers(got, values)


def test_pynrrd_reads_the_header_and_the_data_file(hierarchy, tmp_path):
    for name, spec in REFERENCE.items():
        if "nhdr" not in spec[4]:
            continue
        array = hierarchy.open_node(name)
        header = legacy_views(array)["data.nhdr"]().read(0, 1 << 16)
        (tmp_path / "data.nhdr").write_bytes(header)
        (tmp_path / "data").write_bytes(DataView(array).read(0, DataView(array).size()))
        got, fields = nrrd.read(str(tmp_path / "data.nhdr"), index_order="C")
        expected = expected_values(name)
        assert list(fields["sizes"]) == list(reversed(expected.shape))
        np.testing.assert_array_equal(
            got,
            expected.astype(expected.dtype.newbyteorder("=")) if expected.dtype != bool else expected.astype(np.uint8),
        )


def nhdr_fields(tmp_path: Path, attributes: dict, dimension_names=None) -> dict:
    root = tmp_path / "geo.zarr"
    zarr.create_array(
        str(root),
        shape=(4, 5, 6),
        dtype="int16",
        chunks=(4, 5, 6),
        attributes=attributes,
        dimension_names=dimension_names,
        overwrite=True,
    )
    header = legacy_views(Hierarchy(open_store(str(root))).open_node(""))["data.nhdr"]().read(0, 1 << 16)
    return nrrd.read_header(io.StringIO(header.decode()))


def test_nrrd_geometry_comes_from_the_documented_attributes(tmp_path):
    fields = nhdr_fields(tmp_path, {"spacing": [3.0, 2, 0.5]}, dimension_names=["z", "y", "x"])
    assert list(fields["spacings"]) == [0.5, 2.0, 3.0]
    assert fields["labels"] == ["x", "y", "z"]
    fields = nhdr_fields(
        tmp_path, {"space_directions": [None, [0, 2], [0.5, 0]], "space_origin": [1, 2.5], "spacing": [1, 1, 1]}
    )
    assert fields["space dimension"] == 2 and "spacings" not in fields
    directions = fields["space directions"]
    assert np.array_equal(directions[:2], [[0.5, 0], [0, 2]]) and np.all(np.isnan(directions[2]))
    assert list(fields["space origin"]) == [1, 2.5]


def test_malformed_geometry_attributes_are_left_out(tmp_path):
    for attributes in (
        {"spacing": [1, 2]},
        {"spacing": [1, "a", 3]},
        {"spacing": [1, -1, 1]},
        {"space_directions": [[1], [1, 2], None]},
        {"space_directions": [None, None, None]},
        {"space_directions": "x"},
    ):
        fields = nhdr_fields(tmp_path, attributes)
        assert not {"spacings", "space directions", "space dimension"} & set(fields), attributes


def test_envi_header_describes_bands_lines_and_samples(hierarchy):
    header = legacy_views(hierarchy.open_node("f32_pages"))["data.hdr"]().read(0, 4096).decode()
    fields = dict(line.split(" = ", 1) for line in header.splitlines()[1:])
    assert header.startswith("ENVI\n")
    assert (fields["bands"], fields["lines"], fields["samples"]) == ("3", "40", "33")
    assert (fields["data type"], fields["interleave"], fields["byte order"], fields["header offset"]) == (
        "4",
        "bsq",
        "0",
        "0",
    )


def test_views_are_cheap_to_list(hierarchy):
    """Listing builds no view: nothing is read from the chunks."""
    array = hierarchy.open_node("i32_sharded")
    before = array.context.stats.snapshot()
    for _ in range(100):
        legacy_views(array)
    assert array.context.stats.snapshot() == before


def test_csv_of_datetimes_and_fixed_strings_reads_back_with_the_csv_module(tmp_path):
    import csv

    cases = {
        "datetime64[D]": np.array([["2020-02-29", "NaT"], ["-0044-03-15", "1970-01-01"]], dtype="datetime64[D]"),
        "datetime64[10ms]": np.array([[12345, -(2**63)]], dtype="datetime64[10ms]"),
        "<U3": np.array([["a,b", 'q"'], ["é世🚀", ""]], dtype="<U3"),
        "S4": np.array([[b'x"y', b"a,\nb"]], dtype="S4"),
    }
    for dtype, values in cases.items():
        root = tmp_path / f"{len(dtype)}{dtype[:2]}.zarr"
        zarr.create_array(str(root), shape=values.shape, dtype=values.dtype, chunks=(1, 1))[...] = values
        view = legacy_views(Hierarchy(open_store(str(root))).open_node(""))["data.csv"]()
        text = view.read(0, view.size() + 10)
        assert len(text) == view.size()
        assert all(view.read(i, 7) == text[i : i + 7] for i in range(0, len(text), 5)), dtype
        rows = list(csv.reader(io.StringIO(text.decode("utf-8", "surrogateescape"), newline=""), skipinitialspace=True))
        if values.dtype.kind == "M":
            np.testing.assert_array_equal(np.array(rows, dtype=values.dtype), values)
        elif values.dtype.kind == "S":
            assert [[f.encode("utf-8", "surrogateescape") for f in row] for row in rows] == values.tolist()
        else:
            assert rows == values.tolist(), dtype


@pytest.mark.parametrize("unit", ["Y", "M", "W", "3W", "D", "25h", "m", "s", "10ms", "us", "250us", "ns", "as"])
def test_datetime_texts_are_what_numpy_prints_wherever_its_int64_arithmetic_holds(unit):
    dtype = np.dtype(f"datetime64[{unit}]")
    base, count = np.datetime_data(dtype)
    limit = 2**62 // (count * (7 if base == "W" else 1))
    rng = np.random.default_rng(29)
    values = np.concatenate(
        [rng.integers(-limit, limit, 3000), rng.integers(-(10**6), 10**6, 1000), [limit, -limit, 0, -1]]
    ).astype(np.int64)
    assert [iso_datetime(v, base, count) for v in values.tolist()] == np.datetime_as_string(values.view(dtype)).tolist()


def test_csv_of_datetimes_at_the_int64_extremes_is_listed_and_exact(tmp_path):
    # numpy overflows printing these (raises from 2.5 on, printed other dates before):
    # each text is numpy's for the same instant in whole seconds, then the milliseconds
    values = np.array([-(2**63) + 1, 2**63 - 1, 12345, -(2**63)], dtype=np.int64)
    zarr.create_array(str(tmp_path / "t"), shape=(2, 2), dtype="datetime64[10ms]", chunks=(1, 2))[...] = values.reshape(
        2, 2
    ).view("datetime64[10ms]")
    views = legacy_views(Hierarchy(open_store(str(tmp_path))).open_node("t"))
    assert set(views) == {"data.csv"}
    view = views["data.csv"]()
    text = view.read(0, view.size() + 10).decode()
    assert len(text) == view.size()
    expected = [
        "NaT"
        if v == -(2**63)
        else "%s.%03d" % (np.datetime_as_string(np.datetime64(v * 10 // 1000, "s")), v * 10 % 1000)
        for v in values.tolist()
    ]
    width = max(map(len, expected))
    assert text == "".join(t.rjust(width) + sep for t, sep in zip(expected, ",\n,\n"))


def test_int4_shows_the_legacy_files_int8_has(tmp_path):
    import ml_dtypes
    import tensorstore as ts

    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(tmp_path / "a")},
        "metadata": {
            "shape": [6, 4],
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
            "data_type": "int4",
            "codecs": [{"name": "bytes"}],
            "fill_value": -8,
        },
    }
    store = ts.open(spec, create=True).result()
    values = np.arange(-8, 16, dtype=np.int8).reshape(6, 4) % 16 - 8
    store[:4].write(values[:4].astype(ml_dtypes.int4)).result()
    values[4:] = -8
    views = legacy_views(Hierarchy(open_store(str(tmp_path))).open_node("a"))
    assert set(views) == {"data.tif", "data.nhdr", "data.csv", "preview.png"}  # ENVI has no int8
    view = views["data.csv"]()
    np.testing.assert_array_equal(np.loadtxt(io.BytesIO(view.read(0, view.size())), delimiter=",", dtype="i1"), values)
    assert tifffile.imread(io.BytesIO(views["data.tif"]().read(0, 1 << 20))).tolist() == values.tolist()


def test_types_the_image_formats_do_not_know_show_no_image_files(tmp_path):
    zarr.create_array(str(tmp_path / "t"), shape=(4, 4), dtype="datetime64[s]", chunks=(2, 2))
    zarr.create_array(str(tmp_path / "r"), shape=(4, 4), dtype=[("a", "<i4")], chunks=(2, 2))
    hierarchy = Hierarchy(open_store(str(tmp_path)))
    assert set(legacy_views(hierarchy.open_node("t"))) == {"data.csv"}
    assert set(legacy_views(hierarchy.open_node("r"))) == set()
