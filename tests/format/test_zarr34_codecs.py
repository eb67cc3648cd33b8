"""Arrays zarr-python 3.4 wrote with `scale_offset`, `cast_value`, pcodec and zfpy (the
committed corpus, tests/zarr34_corpus.py) read through the format layer exactly as
zarr-python read them, and written back as zarr-python wrote them; the cast rules of the
registry's `cast_value` spec, case by case from its text."""

from __future__ import annotations

import shutil
import sys

import numcodecs
import numpy as np
import pytest

from tests.zarr34_corpus import NAMES, NEEDS_PACKAGE, STORE, expected, metadata, written
from tests.zarr34_corpus import installed as _installed
from zarrfs.format import (
    Array,
    ChunkDecodeError,
    InvalidWriteError,
    MetadataError,
    ReadOnlyFormatError,
    UnsupportedError,
)
from zarrfs.format.codecs import pipeline
from zarrfs.format.codecs.array_to_array.cast_value import CastError, cast_values
from zarrfs.format.codecs.registry import build_codec


def test_corpus_holds_every_codec_case():
    codecs = {c["name"] for n in NAMES for c in metadata(n)["codecs"]}
    assert {"scale_offset", "cast_value", "numcodecs.pcodec", "numcodecs.zfpy", "sharding_indexed"} <= codecs
    assert len(NAMES) >= 18


@pytest.mark.parametrize("name", NAMES)
def test_corpus_array_reads_as_zarr_python_read_it(open_hierarchy, name):
    package = NEEDS_PACKAGE.get(name)
    if package and not _installed(package):
        with pytest.raises(UnsupportedError, match=f"needs the Python package '{package}'"):
            open_hierarchy(STORE, read_only=True).open_node(name)
        return
    node = open_hierarchy(STORE, read_only=True).open_node(name)
    assert isinstance(node, Array)
    ours, theirs = node.read(), expected(name)
    assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("name", sorted(NEEDS_PACKAGE))
def test_serializer_without_its_package_names_the_package(open_hierarchy, monkeypatch, name):
    monkeypatch.setitem(sys.modules, NEEDS_PACKAGE[name], None)
    monkeypatch.setattr(pipeline, "_made", {})  # (no chain kept from a read above, made with the package)
    with pytest.raises(UnsupportedError, match=f"needs the Python package '{NEEDS_PACKAGE[name]}'"):
        open_hierarchy(STORE, read_only=True).open_node(name)


def _stored_elements(path, doc) -> np.ndarray | bytes:
    """A chunk as the array→bytes codec left it (the zstd frame undone), so that chunks
    compressed by two zstd builds compare."""
    data = path.read_bytes()
    if doc["codecs"][-1]["name"] == "zstd":
        data = numcodecs.Zstd().decode(data)
    return bytes(data)


UNSHARDED_ZSTD = [
    n
    for n in NAMES
    if n not in NEEDS_PACKAGE
    and metadata(n)["codecs"][-1]["name"] == "zstd"
    and not any(c["name"] == "sharding_indexed" for c in metadata(n)["codecs"])
]


@pytest.mark.parametrize("name", UNSHARDED_ZSTD)
def test_writing_the_same_values_stores_the_chunks_zarr_python_stored(open_hierarchy, tmp_path, name):
    copy = tmp_path / "s.zarr"
    shutil.copytree(STORE, copy)
    shutil.rmtree(copy / name / "c")
    region, values = written(name)
    open_hierarchy(copy).open_node(name).write(region, values)
    doc = metadata(name)
    theirs = sorted(p.relative_to(STORE / name) for p in (STORE / name / "c").rglob("*") if p.is_file())
    ours = sorted(p.relative_to(copy / name) for p in (copy / name / "c").rglob("*") if p.is_file())
    assert ours == theirs
    for key in theirs:
        assert _stored_elements(copy / name / key, doc) == _stored_elements(STORE / name / key, doc), key


NUMCODECS_BEFORE_0_17 = tuple(int(p) for p in numcodecs.__version__.split(".")[:2]) < (0, 17)


@pytest.mark.parametrize("name", [n for n in NAMES if n not in NEEDS_PACKAGE or _installed(NEEDS_PACKAGE[n])])
def test_writing_the_same_values_reads_back_what_zarr_python_read(open_hierarchy, tmp_path, name):
    copy = tmp_path / "s.zarr"
    shutil.copytree(STORE, copy)
    shutil.rmtree(copy / name / "c")
    region, values = written(name)
    if "no_op" in name and NUMCODECS_BEFORE_0_17:
        with pytest.raises(ReadOnlyFormatError, match=r"numcodecs >= 0.17"):
            open_hierarchy(copy).open_node(name).write(region, values)
        return
    open_hierarchy(copy).open_node(name).write(region, values)
    assert open_hierarchy(copy, read_only=True).open_node(name).read().tobytes() == expected(name).tobytes()


# ------------------------------------------------------------ the cast_value spec's cases


@pytest.mark.parametrize(("out_of_range", "result"), [("clamp", 127), ("wrap", -128)])
def test_cast_of_128_to_int8_clamps_or_wraps_as_the_spec_says(out_of_range, result):
    assert cast_values(np.array([128.0]), np.dtype("int8"), "nearest-even", out_of_range).tolist() == [result]


def test_cast_out_of_range_without_a_rule_fails():
    with pytest.raises(CastError):
        cast_values(np.array([128.0]), np.dtype("int8"), "nearest-even", None)


def test_cast_to_int16_wraps_in_twos_complement():
    values = np.array([32768, 32769, -32769], dtype="int64")
    assert cast_values(values, np.dtype("int16"), "nearest-even", "wrap").tolist() == [-32768, -32767, 32767]


@pytest.mark.parametrize(
    ("rounding", "result"),
    [
        ("nearest-even", [2, -2, 0, 4]),
        ("towards-zero", [2, -2, 0, 3]),
        ("towards-positive", [3, -2, 1, 4]),
        ("towards-negative", [2, -3, 0, 3]),
        ("nearest-away", [3, -3, 1, 4]),
    ],
)
def test_cast_rounding_modes(rounding, result):
    values = np.array([2.5, -2.5, 0.5, 3.5])
    assert cast_values(values, np.dtype("int32"), rounding, None).tolist() == result


def test_cast_nan_to_an_integer_fails_unless_mapped():
    codec = build_codec({"name": "cast_value", "configuration": {"data_type": "uint8"}})
    spec = _spec("float64", 0.0)
    with pytest.raises(InvalidWriteError, match="NaN"):
        codec.encode(np.array([np.nan]), spec)
    mapped = build_codec(
        {
            "name": "cast_value",
            "configuration": {
                "data_type": "uint8",
                "scalar_map": {"encode": [["NaN", 7], ["NaN", 9]], "decode": [[7, "NaN"]]},
            },
        }
    )
    assert mapped.encode(np.array([np.nan, 3.0]), spec).tolist() == [7, 3]  # the first entry wins
    assert np.isnan(mapped.decode(np.array([7], dtype="uint8"), spec)).all()


def test_cast_keeps_nan_and_signed_zero_between_floats():
    out = cast_values(np.array([np.nan, -0.0, np.inf]), np.dtype("float32"), "towards-zero", None)
    assert np.isnan(out[0]) and np.signbit(out[1]) and np.isinf(out[2])


def test_scale_offset_integer_decode_that_does_not_divide_is_corrupt():
    codec = build_codec({"name": "scale_offset", "configuration": {"scale": 3}})
    with pytest.raises(ChunkDecodeError):
        codec.decode(np.array([4], dtype="int16"), _spec("int16", 0))


def test_scale_offset_integer_overflow_is_refused_not_wrapped():
    codec = build_codec({"name": "scale_offset", "configuration": {"offset": -100, "scale": 2}})
    with pytest.raises(InvalidWriteError):
        codec.encode(np.array([100], dtype="int8"), _spec("int8", 0))


@pytest.mark.parametrize(
    "document",
    [
        {"name": "scale_offset", "configuration": {"offset": 1, "astype": "u1"}},
        {"name": "cast_value", "configuration": {"data_type": "uint8", "mode": "x"}},
        {"name": "cast_value", "configuration": {"data_type": "float32", "out_of_range": "wrap"}},
        {"name": "cast_value", "configuration": {"data_type": "int8", "rounding": "stochastic"}},
    ],
)
def test_invalid_configuration_is_a_metadata_error(document):
    with pytest.raises(MetadataError):
        build_codec(document)


def _spec(dtype: str, fill):
    from zarrfs.format.codecs.base import ArraySpec
    from zarrfs.format.dtypes import parse_v3_data_type

    return ArraySpec((1,), parse_v3_data_type(dtype), np.dtype(dtype).type(fill))
