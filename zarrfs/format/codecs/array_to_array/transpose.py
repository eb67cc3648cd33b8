"""`transpose`: permute the dimensions of a chunk (how v3 stores F-order data)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import MetadataError
from ..base import ArrayArrayCodec, ArraySpec


class TransposeCodec(ArrayArrayCodec):
    name = "transpose"

    def __init__(self, configuration: dict[str, Any] | None = None) -> None:
        super().__init__(configuration)
        order = self.configuration.get("order")
        if isinstance(order, str):  # early drafts allowed "C" / "F"
            raise MetadataError(f"transpose order must be a permutation list, got {order!r}")
        if not isinstance(order, list) or sorted(order) != list(range(len(order))):
            raise MetadataError(f"transpose order must be a permutation, got {order!r}")
        self.order = tuple(order)
        self.inverse = tuple(int(i) for i in np.argsort(self.order))

    def resolve(self, spec: ArraySpec) -> ArraySpec:
        if len(self.order) != len(spec.shape):
            raise MetadataError(f"transpose order {list(self.order)} does not match {len(spec.shape)} dimensions")
        return spec.with_shape(tuple(spec.shape[i] for i in self.order))

    def encode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        return chunk.transpose(self.order)

    def decode(self, chunk: np.ndarray, spec: ArraySpec) -> np.ndarray:
        return chunk.transpose(self.inverse)
