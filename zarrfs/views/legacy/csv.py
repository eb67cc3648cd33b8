"""`data.csv`: a 1-D or 2-D array as text, one array row per line (1-D: one value per
line), values separated by commas. Every value is printed at one width for its data type,
so the size is exact and a byte offset maps to an element by arithmetic:
- bool: `0` / `1`;
- integers: padded on the left with spaces to the type's widest value, a `-` before
  negative ones (`  7`, `-128`);
- floats: `%.Ne` with just enough significant digits to round-trip (float16 5,
  float32 9, float64 17; float64 exponents have three digits), padded on the left with
  spaces, as are `nan`, `inf` and `-inf`;
- datetimes (numpy.datetime64 with a unit): ISO 8601 in the array's unit, `NaT` for
  not-a-time, padded on the left with spaces to the widest the unit can print;
- fixed-length strings and bytes: in double quotes (a quote doubled), UTF-8, padded on
  the left with spaces to the widest an element can print (read with skipinitialspace).
`numpy.loadtxt(path, delimiter=",", dtype=...)` reads the numbers back exactly."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...format import Array
from ..base import FileView
from ..data import DataView

# significant digits after the first, and exponent digits, that round-trip each float
_FLOAT_DIGITS = {2: (4, 2), 4: (8, 2), 8: (16, 3)}


def represents(array: Array) -> bool:
    """1-D and 2-D arrays of bool, integer, float (not complex), datetime or fixed-length
    string type."""
    dtype = array.dtype.little_endian
    if len(array.shape) not in (1, 2) or array.dtype.kind == "low_precision_float":
        return False
    if dtype.kind == "M":
        return np.datetime_data(dtype)[0] != "generic"
    return dtype.kind in "biufSU"


def value_width(dtype: np.dtype) -> int:
    if dtype.kind == "M":  # the extremes of int64 print the longest years
        unit, count = np.datetime_data(dtype)
        return max(len(iso_datetime(value, unit, count)) for value in (-(2**63) + 1, 2**63 - 1))
    if dtype.kind == "U":  # a quote doubles, and no character is longer than 4 bytes in UTF-8
        return 2 + 4 * (dtype.itemsize // 4)
    if dtype.kind == "S":
        return 2 + 2 * dtype.itemsize
    if dtype.kind == "b":
        return 1
    if dtype.kind == "u":
        return len(str(np.iinfo(dtype).max))
    if dtype.kind == "i":
        return 1 + len(str(np.iinfo(dtype).max))
    mantissa, exponent = _FLOAT_DIGITS[dtype.itemsize]
    return 4 + mantissa + 1 + exponent  # sign, digit, point, digits, e, sign, exponent


# per day, each unit finer than a day; digits after the second, those finer than a second
_PER_DAY = {
    "h": 24,
    "m": 24 * 60,
    **{u: 86400 * 10**k for u, k in (("s", 0), ("ms", 3), ("us", 6), ("ns", 9), ("ps", 12), ("fs", 15), ("as", 18))},
}
_FRACTION = {"ms": 3, "us": 6, "ns": 9, "ps": 12, "fs": 15, "as": 18}


def iso_datetime(value: int, unit: str, count: int = 1) -> str:
    """A datetime64 value (not NaT) as numpy prints it, in its unit's base (`10ms` as
    milliseconds, weeks as days), computed with Python's integers: numpy computes in int64,
    which overflows (numpy >= 2.5 raises, older ones print another date) where the value
    times its multiple leaves the int64 range."""
    if unit == "W":
        unit, count = "D", 7 * count
    n = value * count
    if unit == "Y":
        return "%04d" % (1970 + n)
    if unit == "M":
        years, month = divmod(n, 12)
        return "%04d-%02d" % (1970 + years, month + 1)
    days, rest = (n, 0) if unit == "D" else divmod(n, _PER_DAY[unit])
    # the proleptic Gregorian date of a day count (400-year eras of 146097 days from 0000-03-01)
    era, day = divmod(days + 719468, 146097)
    year = (day - day // 1460 + day // 36524 - day // 146096) // 365
    day_of_year = day - (365 * year + year // 4 - year // 100)
    shifted = (5 * day_of_year + 2) // 153  # months from March
    month = shifted + 3 if shifted < 10 else shifted - 9
    text = "%04d-%02d-%02d" % (year + era * 400 + (month <= 2), month, day_of_year - (153 * shifted + 2) // 5 + 1)
    if unit == "D":
        return text
    if unit == "h":
        return text + "T%02d" % rest
    if unit == "m":
        return text + "T%02d:%02d" % divmod(rest, 60)
    seconds, fraction = divmod(rest, _PER_DAY[unit] // 86400)
    hours, seconds = divmod(seconds, 3600)
    text += "T%02d:%02d:%02d" % (hours, *divmod(seconds, 60))
    return text + ".%0*d" % (_FRACTION[unit], fraction) if unit in _FRACTION else text


def _datetime_texts(values: np.ndarray) -> list[str]:
    """numpy's text of each value; those whose value times the unit's multiple is near
    the int64 limits (numpy's own arithmetic overflows there) from `iso_datetime`."""
    unit, count = np.datetime_data(values.dtype)
    ints = values.view(np.dtype(np.int64).newbyteorder(values.dtype.byteorder))
    limit = 2**62 // (count * (7 if unit == "W" else 1))
    texts: list[str] = np.datetime_as_string(
        np.where(abs(ints) <= limit, values, np.array("NaT", dtype=values.dtype))
    ).tolist()
    for i in np.flatnonzero((abs(ints) > limit) & ~np.isnat(values)).tolist():
        texts[i] = iso_datetime(int(ints[i]), unit, count)
    return texts


def _digits(magnitude: np.ndarray, width: int, negative: np.ndarray | None = None) -> np.ndarray:
    """Decimal digits of integers' magnitudes as an (n, width) uint8 array, padded on the
    left with spaces, with a `-` before those that are `negative`."""
    out = np.empty((magnitude.size, width), dtype=np.uint8)
    value = magnitude.astype(np.uint64)
    for k in range(width - 1, -1, -1):
        out[:, k] = value % 10 + ord("0")
        value //= 10
    leading = np.logical_and.accumulate(out[:, :-1] == ord("0"), axis=1)
    out[:, :-1][leading] = ord(" ")
    if negative is not None and negative.any():
        sign_at = leading.sum(axis=1) - 1  # the last space before the first digit
        rows = np.flatnonzero(negative)
        out[rows, sign_at[rows]] = ord("-")
    return out


def _float_texts(values: np.ndarray, width: int) -> bytes:
    mantissa, _ = _FLOAT_DIGITS[values.dtype.itemsize]
    _, exponent = _FLOAT_DIGITS[values.dtype.itemsize]
    fmt = f"%.{mantissa}e"
    out = []
    for x in values.tolist():
        if not math.isfinite(x):
            out.append(repr(x).rjust(width))
            continue
        text = fmt % x
        digits = len(text) - text.index("e") - 2
        if digits < exponent:  # a two-digit exponent where three are due
            text = text[:-digits] + "0" * (exponent - digits) + text[-digits:]
        out.append(text.rjust(width))
    return "".join(out).encode()


def _padded_texts(texts: list[bytes], width: int) -> np.ndarray:
    return np.frombuffer(b"".join(t.rjust(width) for t in texts), dtype=np.uint8).reshape(-1, width)


def format_values(values: np.ndarray, width: int) -> np.ndarray:
    """The text of each value at the fixed width, as an (n, width) uint8 array."""
    kind = values.dtype.kind
    if kind == "M":
        return _padded_texts([t.encode() for t in _datetime_texts(values)], width)
    if kind in "SU":
        texts = [v.encode() if kind == "U" else v for v in values.tolist()]
        return _padded_texts([b'"' + t.replace(b'"', b'""') + b'"' for t in texts], width)
    if kind == "b":
        return (values.astype(np.uint8) + ord("0")).reshape(-1, 1)
    if kind == "u":
        return _digits(values, width)
    if kind == "i":
        negative = values < 0
        # -(v + 1) fits the type for every negative v (even the minimum), then add 1 back
        magnitude = np.where(negative, (-(values + 1)).astype(np.uint64) + 1, values.astype(np.uint64))
        return _digits(magnitude, width, negative)
    return np.frombuffer(_float_texts(values, width), dtype=np.uint8).reshape(-1, width)


def csv_size(array: Array) -> int:
    """The size of `data.csv` (CsvView's), from the metadata alone."""
    return int(math.prod(array.shape) * (value_width(array.dtype.little_endian) + 1))


class CsvView(FileView):
    def __init__(self, array: Array, chunks: Any = None) -> None:
        self.data = DataView(array, chunks)
        self.dtype = self.data.dtype
        self.width = value_width(self.dtype)
        self.cell = self.width + 1  # the value and the comma or newline after it
        self.per_line = array.shape[1] if len(array.shape) == 2 else 1
        self.count = math.prod(array.shape)
        self._size = csv_size(array)

    def size(self) -> int:
        return self._size

    def data_span(self, offset: int, size: int) -> tuple[DataView, int, int] | None:
        first, last = offset // self.cell, -(-min(offset + size, self.size()) // self.cell)
        return self.data.data_span(first * self.dtype.itemsize, (last - first) * self.dtype.itemsize)

    def read(self, offset: int, size: int) -> bytes:
        end = min(offset + size, self.size())
        if offset >= end:
            return b""
        first, last = offset // self.cell, -(-end // self.cell)
        itemsize = self.dtype.itemsize
        values = np.frombuffer(self.data.read(first * itemsize, (last - first) * itemsize), dtype=self.dtype)
        cells = np.empty((last - first, self.cell), dtype=np.uint8)
        cells[:, :-1] = format_values(values, self.width)
        line_end = (np.arange(first + 1, last + 1) % self.per_line) == 0
        cells[:, -1] = np.where(line_end, ord("\n"), ord(","))
        skip = offset - first * self.cell
        return cells.tobytes()[skip : skip + end - offset]
