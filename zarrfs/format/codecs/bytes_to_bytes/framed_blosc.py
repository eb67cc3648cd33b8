"""numcodecs' Blosc, refusing a frame shorter than its header declares: the library itself
decodes a truncated frame by reading past the buffer, returning garbage. A module of its
own because importing numcodecs loads every codec it has: that waits for the first blosc
chunk."""

from __future__ import annotations

from typing import Any

import numcodecs


class FramedBlosc(numcodecs.Blosc):  # (an Any base: numcodecs ships no types; pyproject.toml lets it in)
    def decode(self, buf: Any, out: Any = None) -> Any:
        data = memoryview(buf).cast("B")
        if len(data) < 16:
            raise ValueError(f"blosc frame of {len(data)} bytes is shorter than its header")
        declared = int.from_bytes(data[12:16], "little")
        if len(data) < declared:
            raise ValueError(f"blosc frame truncated: {len(data)} of {declared} bytes")
        return super().decode(buf, out)
