"""How `preview.png` turns numbers into colours: one band scaled by robust percentiles
through viridis, booleans black and white, RGB(A) samples as they are, OME-Zarr channels
added up in their declared colours and windows; NaN and the fill value transparent."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

PERCENTILES = (2.0, 98.0)
TRANSPARENT = 255  # the palette index of a pixel with no value (NaN, the fill value)
_STEPS = 254  # values map onto palette indices 0..254
# viridis (Stéfan van der Walt and Nathaniel Smith, CC0), 256 colours, RRGGBB
_VIRIDIS = bytes.fromhex(
    "44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769"
    "48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a"
    "472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85"
    "4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b"
    "3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d"
    "33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e"
    "2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e"
    "26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d"
    "21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88"
    "1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81"
    "28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74"
    "3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863"
    "5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d"
    "84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32"
    "addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a"
    "d8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725"
)
# channels with no colour of their own, in order (a single channel is shown white)
_DEFAULT_COLOURS = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 0, 255), (0, 255, 255), (255, 255, 0))


@dataclass(frozen=True)
class Channel:
    """One channel of a composite: its colour (RGB) and the window of values shown from
    black to that colour (None: the robust percentiles of what was read)."""

    colour: tuple[int, int, int]
    window: tuple[float, float] | None = None


def _palette(colours: np.ndarray) -> np.ndarray:
    """256 RGBA entries: `colours` (255 RGB rows) opaque, then the transparent one."""
    table = np.zeros((256, 4), np.uint8)
    table[: _STEPS + 1, :3] = colours
    table[: _STEPS + 1, 3] = 255
    return table


def viridis_palette() -> np.ndarray:
    full = np.frombuffer(_VIRIDIS, np.uint8).reshape(256, 3)
    return _palette(full[np.round(np.linspace(0, 255, _STEPS + 1)).astype(int)])


def grey_palette() -> np.ndarray:
    ramp = np.round(np.linspace(0, 255, _STEPS + 1)).astype(np.uint8)
    return _palette(np.repeat(ramp[:, None], 3, axis=1))


def missing(values: np.ndarray, fill_value: Any) -> np.ndarray:
    """Where there is no value: NaN, or the fill value (booleans have none missing)."""
    if values.dtype.kind == "b":
        return np.zeros(values.shape, bool)
    mask = np.isnan(values) if values.dtype.kind in "fc" else np.zeros(values.shape, bool)
    try:
        fill = np.asarray(fill_value, dtype=values.dtype)
    except (TypeError, ValueError, OverflowError):
        return mask
    if not (fill.dtype.kind in "fc" and np.isnan(fill)):
        mask |= values == fill
    return mask


def robust_range(values: np.ndarray, mask: np.ndarray) -> tuple[float, float] | None:
    """The 2nd and 98th percentiles of the finite values not masked; None where none is."""
    shown = values[~mask]
    if shown.dtype.kind in "fc":
        shown = shown[np.isfinite(shown)]
    if shown.size == 0:
        return None
    lo, hi = np.percentile(shown.astype(np.float64), PERCENTILES)
    return float(lo), float(hi)


def _scaled(values: np.ndarray, window: tuple[float, float]) -> np.ndarray:
    """Values as 0..1 across the window (clipped; all 0 for an empty window)."""
    lo, hi = window
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = (values.astype(np.float64) - lo) / (hi - lo) if hi > lo else np.zeros(values.shape)
    return np.clip(np.nan_to_num(scaled, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0)


def one_band(values: np.ndarray, fill_value: Any) -> tuple[np.ndarray, np.ndarray, tuple[float, float] | None]:
    """(palette indices, palette, the range mapped) of a (height, width) band."""
    if values.dtype.kind == "b":
        return np.where(values, _STEPS, 0).astype(np.uint8), grey_palette(), (0.0, 1.0)
    mask = missing(values, fill_value)
    window = robust_range(values, mask)
    index = np.round(_scaled(values, window or (0.0, 0.0)) * _STEPS).astype(np.uint8)
    index[mask] = TRANSPARENT
    return index, viridis_palette(), window


def rgb(values: np.ndarray) -> tuple[np.ndarray, tuple[float, float] | None]:
    """(RGBA pixels, the range mapped) of (height, width, 3|4) uint8 or uint16 samples:
    8-bit ones as they are, 16-bit ones scaled by the percentiles of all colour samples."""
    if values.dtype.itemsize == 1:
        window = (0.0, 255.0)
        colour = values[..., :3].astype(np.uint8)
    else:
        window = robust_range(values[..., :3], np.zeros(values[..., :3].shape, bool)) or (0.0, 65535.0)
        colour = np.round(_scaled(values[..., :3], window) * 255).astype(np.uint8)
    out = np.full((*values.shape[:2], 4), 255, np.uint8)
    out[..., :3] = colour
    if values.shape[2] == 4:
        top = 255 if values.dtype.itemsize == 1 else 65535
        out[..., 3] = np.round(values[..., 3].astype(np.float64) * 255 / top).astype(np.uint8)
    return out, window


def composite(
    values: np.ndarray, channels: list[Channel], fill_value: Any
) -> tuple[np.ndarray, list[tuple[float, float] | None]]:
    """(RGBA pixels, each channel's window) of (height, width, channels) values: each
    channel from black to its colour across its window, added up; transparent where
    every channel is missing."""
    total = np.zeros((*values.shape[:2], 3))
    nothing = np.ones(values.shape[:2], bool)
    windows: list[tuple[float, float] | None] = []
    for i, channel in enumerate(channels):
        band = values[..., i]
        mask = missing(band, fill_value)
        nothing &= mask
        window = channel.window or robust_range(band, mask)
        windows.append(window)
        if window is not None:
            total += _scaled(band, window)[..., None] * (np.asarray(channel.colour, np.float64) / 255)
    out = np.empty((*values.shape[:2], 4), np.uint8)
    out[..., :3] = np.round(np.clip(total, 0.0, 1.0) * 255).astype(np.uint8)
    out[..., 3] = np.where(nothing, 0, 255)
    return out, windows


def channels_of(omero: Any, indices: list[int]) -> list[Channel]:
    """The channels `indices` (of the image's C axis) as NGFF's `omero` declares them:
    colour RRGGBB, window start/end; defaults where it says nothing."""
    listed = omero.get("channels") if isinstance(omero, dict) else None
    out = []
    for n, i in enumerate(indices):
        entry = listed[i] if isinstance(listed, list) and i < len(listed) and isinstance(listed[i], dict) else {}
        colour = _hex_colour(entry.get("color"))
        if colour is None:
            colour = (255, 255, 255) if len(indices) == 1 else _DEFAULT_COLOURS[n % len(_DEFAULT_COLOURS)]
        window = entry.get("window")
        start, end = (window.get("start"), window.get("end")) if isinstance(window, dict) else (None, None)
        out.append(Channel(colour, (float(start), float(end)) if _number(start) and _number(end) else None))
    return out


def active_channels(omero: Any, count: int, most: int) -> list[int]:
    """The channels to show: those `omero` marks active (all where it says nothing), at
    most `most` of them."""
    listed = omero.get("channels") if isinstance(omero, dict) else None
    if not isinstance(listed, list) or len(listed) != count:
        return list(range(min(count, most)))
    active = [i for i, c in enumerate(listed) if not (isinstance(c, dict) and c.get("active") is False)]
    return (active or list(range(count)))[:most]


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _hex_colour(text: Any) -> tuple[int, int, int] | None:
    if not isinstance(text, str) or len(text) != 6:
        return None
    try:
        value = int(text, 16)
    except ValueError:
        return None
    return (value >> 16) & 255, (value >> 8) & 255, value & 255
