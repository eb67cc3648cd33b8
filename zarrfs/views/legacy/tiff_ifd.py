"""TIFF's image file directories: the field types, tags as (tag, type, values), and one
IFD encoded at its offset, its values that do not fit inline right after it (classic
TIFF and BigTIFF). The file's layout is tiff.py's."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

ASCII, SHORT, LONG, RATIONAL, DOUBLE, LONG8 = 2, 3, 4, 5, 12, 16
_TYPE_DTYPE = {SHORT: "<u2", LONG: "<u4", RATIONAL: "<u4", DOUBLE: "<f8", LONG8: "<u8"}
_VALUE_SIZE = {ASCII: 1, SHORT: 2, LONG: 4, RATIONAL: 4, DOUBLE: 8, LONG8: 8}
NEW_SUBFILE_TYPE, IMAGE_DESCRIPTION, SUB_IFDS = 254, 270, 330
RESOLUTION_NONE, RESOLUTION_CENTIMETER = 1, 3


@dataclass(frozen=True)
class Placed:
    """A tag value that lies elsewhere in the file (the ImageDescription): `count` values
    at `offset`, or as many as `count` says when only the room is being measured."""

    count: int
    offset: int = 0

    def __len__(self) -> int:
        return self.count


# (tag, TIFF type, values): numbers (an array for the strip tables), ASCII bytes, or values
# placed elsewhere in the file
Tag = tuple[int, int, Sequence[float] | bytes | np.ndarray | Placed]


def resolution_tags(pixel_size: tuple[float, float] | None) -> list[Tag]:
    """XResolution, YResolution and ResolutionUnit: pixels per centimetre from a pixel's
    (height, width) in centimetres, or 1 of no unit where none is known."""
    if pixel_size is None:
        return [(282, RATIONAL, [1, 1]), (283, RATIONAL, [1, 1]), (296, SHORT, [RESOLUTION_NONE])]
    y, x = (_rational(1 / size) for size in pixel_size)
    return [(282, RATIONAL, x), (283, RATIONAL, y), (296, SHORT, [RESOLUTION_CENTIMETER])]


def _rational(value: float) -> list[int]:
    """The nearest fraction of 32-bit terms."""
    most = (1 << 32) - 1
    fraction = Fraction(value).limit_denominator(most)
    if fraction.numerator > most:  # too large to hold exactly: the nearest of denominator 1
        return [min(most, round(value)), 1]
    return [max(1, fraction.numerator), fraction.denominator] if fraction else [1, most]


def ifd(tags: list[tuple[int, int, Any]], at: int, big: bool, next_ifd: int) -> bytes:
    """One IFD written at file offset `at`, its out-of-line values right after it."""
    count_fmt, entry_fmt, inline = ("<Q", "<HHQ", 8) if big else ("<H", "<HHI", 4)
    offset_fmt = "<Q" if big else "<I"
    entry_size = struct.calcsize(entry_fmt) + inline
    extra_at = at + struct.calcsize(count_fmt) + len(tags) * entry_size + inline
    entries, extra = [struct.pack(count_fmt, len(tags))], []
    for tag, kind, values in tags:
        if isinstance(values, Placed):
            entries.append(struct.pack(entry_fmt, tag, kind, values.count) + struct.pack(offset_fmt, values.offset))
            continue
        raw = bytes(values) if kind == ASCII else np.asarray(values, dtype=_TYPE_DTYPE[kind]).tobytes()
        count = len(values) // 2 if kind == RATIONAL else len(values)
        if len(raw) <= inline:
            field = raw.ljust(inline, b"\0")
        else:
            field = struct.pack(offset_fmt, extra_at)
            raw += b"\0" * (len(raw) % 2)  # values start on a word boundary
            extra.append(raw)
            extra_at += len(raw)
        entries.append(struct.pack(entry_fmt, tag, kind, count) + field)
    block = b"".join(entries) + struct.pack(offset_fmt, next_ifd) + b"".join(extra)
    return block + b"\0" * (-len(block) % 8)


def ifd_size(tags: list[Tag], big: bool) -> int:
    """len(ifd(tags, ...)), from the number of each tag's values alone."""
    count_size, entry_size, inline = (8, 20, 8) if big else (2, 12, 4)
    size = count_size + len(tags) * entry_size + inline
    for _, kind, values in tags:
        raw = len(values) * _VALUE_SIZE[kind]
        if raw > inline and not isinstance(values, Placed):
            size += raw + raw % 2
    return size + (-size % 8)
