"""`cast_value` (zarr-extensions registry): convert each element's value to another
integer or float type, in the spec's order: `scalar_map` first, then exact values, then
`rounding` and `out_of_range` (clamp, wrap, or an error). Decoding casts back the same way."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from ...dtypes import DataType, parse_v3_data_type
from ...errors import ChunkDecodeError, InvalidWriteError, MetadataError, UnsupportedError
from ...fill_values import parse_fill_value
from ..base import ArrayArrayCodec, ArraySpec

ROUNDING = ("nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away")
OUT_OF_RANGE = (None, "clamp", "wrap")


class CastError(ValueError):
    """A value the configuration gives no way to cast."""


class CastValueCodec(ArrayArrayCodec):
    name = "cast_value"

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        c = self.configuration
        unknown = set(c) - {"data_type", "rounding", "out_of_range", "scalar_map"}
        if unknown:
            raise MetadataError(f"cast_value: unknown configuration keys {sorted(unknown)}")
        if "data_type" not in c:
            raise MetadataError("cast_value: configuration needs 'data_type'")
        self.target = _castable(parse_v3_data_type(c["data_type"]))
        self.rounding = c.get("rounding", "nearest-even")
        self.out_of_range = c.get("out_of_range")
        if self.rounding not in ROUNDING:
            raise MetadataError(f"cast_value: unknown rounding {self.rounding!r}")
        if self.out_of_range not in OUT_OF_RANGE:
            raise MetadataError(f"cast_value: unknown out_of_range {self.out_of_range!r}")
        if self.out_of_range == "wrap" and self.target.numpy.kind == "f":
            raise MetadataError("cast_value: out_of_range 'wrap' needs an integer data_type")
        scalar_map = c.get("scalar_map") or {}
        if (
            not isinstance(scalar_map, dict)
            or set(scalar_map) - {"encode", "decode"}
            or not all(
                isinstance(pairs, list) and all(isinstance(p, list) and len(p) == 2 for p in pairs)
                for pairs in scalar_map.values()
            )
        ):
            raise MetadataError(f"cast_value: invalid scalar_map {scalar_map!r}")
        self.scalar_map = scalar_map

    def _mapping(self, direction: str, source: DataType, target: DataType) -> list[tuple[np.generic, np.generic]]:
        """The scalar map of one direction as (input, output) scalars; the first of a
        repeated input wins, which the lookup order gives."""
        return [
            (parse_fill_value(k, source, 3), parse_fill_value(v, target, 3))
            for k, v in self.scalar_map.get(direction, [])
        ]

    def resolve(self, spec: ArraySpec) -> ArraySpec:
        _castable(spec.dtype)
        try:
            fill = self._cast(np.asarray(spec.fill_value, dtype=spec.dtype.numpy), spec.dtype, self.target, "encode")
        except CastError as exc:
            raise MetadataError(f"cast_value: the fill value cannot be cast to {self.target.name} ({exc})") from None
        return ArraySpec(spec.shape, self.target, fill.dtype.type(fill[()]))

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        try:
            return self._cast(chunk, spec.dtype, self.target, "encode")
        except CastError as exc:
            raise InvalidWriteError(f"cast_value to {self.target.name}: {exc}") from None

    def decode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        try:
            return self._cast(chunk, self.target, spec.dtype, "decode")
        except CastError as exc:
            raise ChunkDecodeError(f"cast_value to {spec.dtype.name}: {exc}") from None

    def _cast(self, values: np.ndarray, source: DataType, target: DataType, direction: str) -> np.ndarray:
        values = np.asarray(values).astype(source.numpy.newbyteorder("="), copy=False)
        mapping = self._mapping(direction, source, target)
        if not mapping:
            return cast_values(values, target.numpy, self.rounding, self.out_of_range)
        out = np.empty(values.shape, dtype=target.numpy)
        mapped = np.zeros(values.shape, dtype=bool)
        for key, value in mapping:
            hit = (np.isnan(values) if np.isnan(key) else values == key) & ~mapped
            out[hit] = value
            mapped |= hit
        rest = ~mapped
        out[rest] = cast_values(values[rest], target.numpy, self.rounding, self.out_of_range)
        return out


def _castable(dtype: DataType) -> DataType:
    if dtype.kind != "numeric" or dtype.numpy.kind not in "iuf":
        raise UnsupportedError(f"cast_value: data type {dtype.name} is not supported (integers and float16/32/64 are)")
    return dtype


def cast_values(values: np.ndarray, target: np.dtype, rounding: str, out_of_range: str | None) -> np.ndarray:
    """`values` (integers or floats, native byte order) as `target`, by the value."""
    source = values.dtype
    if target.kind == "f":
        return _to_float(values, target, rounding, out_of_range)
    if source.kind == "f":
        if not np.all(np.isfinite(values)):
            raise CastError(f"NaN or infinity has no value in {target} (scalar_map can give it one)")
        rounded = _round_to_integer(values.astype(np.float64), rounding)
        info = np.iinfo(target)
        # exact bounds as floats: min is -2**(n-1) or 0, max + 1 a power of two
        in_range = (rounded >= float(info.min)) & (rounded < float(info.max) + 1.0)
    else:
        rounded = values
        info, own = np.iinfo(target), np.iinfo(source)
        in_range = np.ones(values.shape, dtype=bool)
        if info.min > own.min:
            in_range &= values >= info.min
        if info.max < own.max:
            in_range &= values <= info.max
    if in_range.all():
        return rounded.astype(target)
    if out_of_range is None:
        raise CastError(f"a value is outside the range of {target} and out_of_range is not set")
    out = np.empty(values.shape, dtype=target)
    out[in_range] = rounded[in_range].astype(target)
    outside = ~in_range
    if out_of_range == "clamp":
        out[outside] = np.where(rounded[outside] < 0, info.min, info.max)
    else:  # wrap: congruent modulo 2**bits, two's complement for signed types
        modulus = 1 << (8 * target.itemsize)
        wrapped = [int(v) % modulus for v in rounded[outside].tolist()]
        if target.kind == "i":
            wrapped = [v - modulus if v > info.max else v for v in wrapped]
        out[outside] = np.array(wrapped, dtype=object).astype(target) if wrapped else []
    return out


def _round_to_integer(values: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "nearest-even":
        return cast("np.ndarray", np.rint(values))
    if rounding == "towards-zero":
        return cast("np.ndarray", np.trunc(values))
    if rounding == "towards-positive":
        return cast("np.ndarray", np.ceil(values))
    if rounding == "towards-negative":
        return cast("np.ndarray", np.floor(values))
    # nearest-away from the fraction itself: x + 0.5 can round up in floating point
    whole = np.trunc(values)
    return cast("np.ndarray", whole + np.sign(values) * (np.abs(values - whole) >= 0.5))


def _to_float(values: np.ndarray, target: np.dtype, rounding: str, out_of_range: str | None) -> np.ndarray:
    out = values.astype(target)  # IEEE nearest-even, NaN and infinities kept
    if values.dtype.kind == "f" and values.dtype.itemsize <= target.itemsize:
        return out  # every value of a narrower float is exact in a wider one
    # a type that holds every source value exactly, to compare the cast result with
    exact: type[np.floating] = np.longdouble if values.dtype.itemsize == 8 and values.dtype.kind in "iu" else np.float64
    x = values.astype(exact)
    if rounding != "nearest-even":
        got = out.astype(exact)
        toward = {
            "towards-zero": np.abs(got) > np.abs(x),
            "towards-positive": got < x,
            "towards-negative": got > x,
        }
        if rounding in toward:
            wrong = toward[rounding]
            goal = {"towards-zero": 0.0, "towards-positive": np.inf, "towards-negative": -np.inf}[rounding]
            out = np.where(wrong, np.nextafter(out, np.asarray(goal, dtype=target)), out)
        else:  # nearest-away: only ties differ from nearest-even
            other = np.nextafter(out, np.where(got < x, np.inf, -np.inf).astype(target))
            tie = (got != x) & (np.abs(got - x) == np.abs(other.astype(exact) - x))
            out = np.where(tie & (np.abs(other) > np.abs(out)), other, out)
    outside = _outside_finite_range(x, target, rounding)
    if outside.any():
        if out_of_range is None:
            raise CastError(f"a value is outside the finite range of {target} and out_of_range is not set")
        out = np.where(outside, np.copysign(np.inf, x).astype(target), out)  # clamp: the infinities
    return out


def _outside_finite_range(x: np.ndarray, target: np.dtype, rounding: str) -> np.ndarray:
    """Where `x` (finite) rounds, with no bound on the exponent, past the largest finite
    `target` value: the next value up the grid is 2**maxexp, its midpoint with the largest
    finite value the point where rounding to nearest reaches it."""
    info = np.finfo(target)
    largest = x.dtype.type(info.max)
    beyond = x.dtype.type(2.0) ** info.maxexp
    midpoint = (largest + beyond) / 2
    finite = np.isfinite(x)
    if rounding in ("nearest-even", "nearest-away"):
        return cast("np.ndarray", finite & (np.abs(x) >= midpoint))
    if rounding == "towards-zero":
        return cast("np.ndarray", finite & (np.abs(x) >= beyond))
    if rounding == "towards-positive":
        return cast("np.ndarray", finite & ((x > largest) | (x <= -beyond)))
    return cast("np.ndarray", finite & ((x < -largest) | (x >= beyond)))  # towards-negative
