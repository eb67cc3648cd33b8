"""The extension data types' rules that the oracle arrays do not reach: fill values the
registry allows and the oracles never write, bits a reader must ignore, and what needs
ml_dtypes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from zarrfs.format import fill_values
from zarrfs.format.dtypes import parse_v3_data_type
from zarrfs.format.errors import MetadataError, UnsupportedError
from zarrfs.format.fill_values import parse_fill_value
from zarrfs.format.metadata import parse_v3


def _fill_bits(data_type, fill_value) -> int:
    return int(parse_fill_value(fill_value, parse_v3_data_type(data_type), 3))


def test_low_precision_fill_values_are_the_registry_bits():
    assert _fill_bits("bfloat16", "NaN") == 0x7FC0
    assert _fill_bits("bfloat16", -2.5) == 0xC020
    assert _fill_bits("float8_e4m3fn", 1.5) == 0x3C
    assert _fill_bits("float8_e5m2", "-Infinity") == 0xFC
    assert _fill_bits("float4_e2m1fn", -3.0) == 0b1101
    assert _fill_bits("float8_e4m3fnuz", "NaN") == 0x80
    # tensorstore 0.1.86 writes and reads e8m0fnu fill values wrongly (1.0 as 2^-64)
    assert _fill_bits("float8_e8m0fnu", 1.0) == 0x7F
    assert _fill_bits("float8_e8m0fnu", "NaN") == 0xFF
    assert _fill_bits("float8_e8m0fnu", 0.0) == 0x00  # no zero: the nearest, as tensorstore reads it


@pytest.mark.parametrize("data_type", ["float8_e4m3fn", "float8_e4m3fnuz", "float4_e2m1fn", "float8_e8m0fnu"])
def test_infinity_is_refused_where_the_type_has_none(data_type):
    with pytest.raises(MetadataError, match=data_type):
        _fill_bits(data_type, "Infinity")


def test_without_ml_dtypes_hex_fill_values_still_work_and_numbers_say_what_is_missing(monkeypatch):
    monkeypatch.setattr(fill_values, "_ml_dtypes", lambda: None)
    assert _fill_bits("bfloat16", "0x3f80") == 0x3F80
    with pytest.raises(UnsupportedError, match="ml_dtypes"):
        _fill_bits("bfloat16", 1.0)


def test_sub_byte_fill_values_are_range_checked():
    assert _fill_bits("int4", -8) == -8
    with pytest.raises(MetadataError, match="out of range"):
        _fill_bits("int2", 2)


def test_datetime_units_and_nat():
    assert parse_v3_data_type(
        {"name": "numpy.datetime64", "configuration": {"unit": "μs", "scale_factor": 1}}
    ).numpy == np.dtype("<M8[us]")
    assert parse_v3_data_type(
        {"name": "numpy.timedelta64", "configuration": {"unit": "s", "scale_factor": 10}}
    ).numpy == np.dtype("<m8[10s]")
    nat = parse_fill_value(
        "NaT", parse_v3_data_type({"name": "numpy.datetime64", "configuration": {"unit": "D", "scale_factor": 1}}), 3
    )
    assert np.isnat(nat)
    with pytest.raises(MetadataError, match="unit"):
        parse_v3_data_type({"name": "numpy.datetime64", "configuration": {"unit": "fortnight", "scale_factor": 1}})


def test_structured_base64_fill_follows_the_bytes_codec_byte_order():
    document = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [2],
        "data_type": {"name": "structured", "configuration": {"fields": [["a", "int32"], ["b", "uint8"]]}},
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": "AAAAAQI=",
        "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}],
    }
    assert parse_v3(json.loads(json.dumps(document))).fill_value.tolist() == (1, 2)


def test_structured_fields_of_variable_length_types_are_refused():
    with pytest.raises(MetadataError, match="variable-length"):
        parse_v3_data_type({"name": "struct", "configuration": {"fields": [{"name": "s", "data_type": "string"}]}})


def test_sub_byte_upper_bits_are_ignored_as_tensorstore_ignores_them(tmp_path, open_hierarchy):
    import tensorstore as ts

    spec = {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": str(tmp_path / "a")},
        "metadata": {
            "shape": [8],
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8]}},
            "data_type": "int4",
            "codecs": [{"name": "bytes"}],
            "fill_value": 0,
        },
    }
    store = ts.open(spec, create=True).result()
    (tmp_path / "a" / "c").mkdir()
    (tmp_path / "a" / "c" / "0").write_bytes(bytes([0x0D, 0xF7, 0x38, 0x12, 0xFF, 0x80, 0x08, 0x7E]))
    expected = np.asarray(store.read().result()).astype(np.int8)
    assert open_hierarchy(tmp_path).open_node("a").read().tolist() == expected.tolist()
