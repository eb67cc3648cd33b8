"""`numcodecs.pcodec`: pcodec's own layout of numeric chunks, through numcodecs, where
the `pcodec` package is installed (the `extra-codecs` extra); a clear error otherwise."""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np

from ...errors import ReadOnlyFormatError
from ..base import ArraySpec
from ..numcodecs_adapter import NumcodecsArrayBytes, require_package


class PcodecCodec(NumcodecsArrayBytes):
    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        require_package("numcodecs.pcodec", "pcodec")
        super().__init__("numcodecs.pcodec", configuration)

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> bytes:
        # numcodecs 0.17 writes delta_spec "no_op"; before it, neither that name nor the
        # old "none" encodes with pcodec >= 1 (decoding needs no delta_spec)
        if self.configuration.get("delta_spec") in ("no_op", "none") and _numcodecs_before((0, 17)):
            raise ReadOnlyFormatError("writing numcodecs.pcodec with delta_spec 'no_op' needs numcodecs >= 0.17")
        return super().encode(chunk, spec)


def _numcodecs_before(version: tuple[int, int]) -> bool:
    return tuple(int(part) for part in numcodecs.__version__.split(".")[:2]) < version
