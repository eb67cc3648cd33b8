"""`data.jsonl`: arrays of variable-length strings or bytes, one JSON value per element in
C order (bytes as base64 strings)."""

from __future__ import annotations

import base64
import json

from ..format import Array
from .base import BytesView


def _json_value(value) -> str:
    if isinstance(value, bytes):
        value = base64.standard_b64encode(value).decode()
    return json.dumps(value, ensure_ascii=False)


def jsonl_view(array: Array) -> BytesView:
    def render() -> bytes:
        values = array.read(...).reshape(-1)
        return "".join(_json_value(v) + "\n" for v in values).encode()

    return BytesView(render)
