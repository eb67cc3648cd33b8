"""`numcodecs.zfpy`: ZFP-compressed float and integer chunks, through numcodecs, where
the `zfpy` package is installed (the `extra-codecs` extra); a clear error otherwise."""

from __future__ import annotations

from typing import Any

from ..numcodecs_adapter import NumcodecsArrayBytes, require_package


class ZfpyCodec(NumcodecsArrayBytes):
    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        require_package("numcodecs.zfpy", "zfpy")
        super().__init__("numcodecs.zfpy", configuration)
