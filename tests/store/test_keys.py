"""Key rules, ByteRange arithmetic and command-line storage options."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zarrfs.store import ByteRange, InvalidKeyError, parse_storage_options
from zarrfs.store.keys import join_key, validate_key, validate_prefix


@pytest.mark.parametrize("key", ["a", "a/b", "a b/c.d", ".zattrs", "c/0/0", "x..y", "é"])
def test_valid_keys_pass(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize("key", ["", "/a", "a/", "a//b", "./a", "a/.", "a/../b", "a\0", 3])
def test_invalid_keys_raise(key) -> None:
    with pytest.raises(InvalidKeyError):
        validate_key(key)


def test_prefixes_are_empty_or_end_in_a_slash() -> None:
    assert validate_prefix("") == ""
    assert validate_prefix("a/b/") == "a/b/"
    for bad in ["a", "/", "//", "a//", "../"]:
        with pytest.raises(InvalidKeyError):
            validate_prefix(bad)


def test_join_key_uses_single_slashes() -> None:
    assert join_key("a/", "b", "", "/c") == "a/b/c"
    with pytest.raises(InvalidKeyError):
        join_key("a", "..", "b")


@given(st.binary(max_size=40), st.integers(0, 50), st.integers(0, 50))
def test_resolve_matches_python_slicing(value: bytes, start: int, length: int) -> None:
    size = len(value)

    def sliced(byte_range: ByteRange) -> bytes:
        lo, hi = byte_range.resolve(size)
        return value[lo:hi]

    assert sliced(ByteRange.span(start, start + length)) == value[start : start + length]
    assert sliced(ByteRange.from_offset(start)) == value[start:]
    assert sliced(ByteRange.suffix(length)) == (value[-length:] if length else b"")


def test_malformed_byte_ranges_are_refused() -> None:
    for make in (
        lambda: ByteRange.span(5, 3),
        lambda: ByteRange.span(-1, 3),
        lambda: ByteRange.from_offset(-1),
        lambda: ByteRange.suffix(-2),
    ):
        with pytest.raises(ValueError):
            make()


def test_storage_options_from_the_command_line_are_coerced() -> None:
    options = parse_storage_options(
        [
            "anon=true",
            "use_ssl=False",
            "max_concurrency=4",
            "timeout=2.5",
            "token=null",
            "account=0123",
            "endpoint_url=http://h:9000/?a=b",
            'client_kwargs={"region_name": "x"}',
        ]
    )
    assert options == {
        "anon": True,
        "use_ssl": False,
        "max_concurrency": 4,
        "timeout": 2.5,
        "token": None,
        "account": "0123",
        "endpoint_url": "http://h:9000/?a=b",
        "client_kwargs": {"region_name": "x"},
    }
    with pytest.raises(ValueError):
        parse_storage_options(["no-equals-sign"])
