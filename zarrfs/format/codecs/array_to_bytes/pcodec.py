"""`numcodecs.pcodec`: pcodec's own layout of numeric chunks, through numcodecs, where
the `pcodec` package is installed (the `extra-codecs` extra); a clear error otherwise."""

from __future__ import annotations

import numcodecs

from ..numcodecs_adapter import NumcodecsArrayBytes, require_package

# numcodecs 0.17 writes delta_spec "no_op" where 0.16 wrote "none", which it alone reads
_DELTA_SPEC_BEFORE_0_17 = {"no_op": "none"}


class PcodecCodec(NumcodecsArrayBytes):
    def __init__(self, configuration: dict | None = None) -> None:
        require_package("numcodecs.pcodec", "pcodec")
        configuration = dict(configuration or {})
        if _numcodecs_before((0, 17)) and configuration.get("delta_spec") in _DELTA_SPEC_BEFORE_0_17:
            configuration["delta_spec"] = _DELTA_SPEC_BEFORE_0_17[configuration["delta_spec"]]
        super().__init__("numcodecs.pcodec", configuration)


def _numcodecs_before(version: tuple[int, int]) -> bool:
    return tuple(int(part) for part in numcodecs.__version__.split(".")[:2]) < version
