"""`crc32c`: a CRC-32C of the bytes appended little-endian; decoding verifies it."""

from __future__ import annotations

import struct

from crc32c import crc32c

from ...errors import ChecksumError, ChunkDecodeError
from ..base import BytesBytesCodec, BytesLike, bytes_view


class Crc32cCodec(BytesBytesCodec):
    name = "crc32c"

    def encode(self, data: bytes) -> bytes:
        return bytes(data) + struct.pack("<I", crc32c(data))

    def decode(self, data: BytesLike) -> BytesLike:
        view = bytes_view(data)
        if len(view) < 4:
            raise ChunkDecodeError("crc32c: data shorter than its checksum")
        body = view[:-4]
        stored = struct.unpack("<I", view[-4:])[0]
        actual = crc32c(body)
        if stored != actual:
            raise ChecksumError(f"crc32c mismatch: stored {stored:08x}, computed {actual:08x}")
        return body

    def encoded_size(self, size: int) -> int | None:
        return size + 4
