"""A moto S3 server that answers ranged GETs by reading only the range.

    python bench/moto_ranges.py PORT

Stock moto reads the whole object for every ranged GET and slices it afterwards (3 s of
server CPU for 20 ranged reads of a 256 MiB object), so a benchmark of ranged readers
would measure moto. Here `get_object` reads only the bytes a single-range `Range` header
selects and answers 206 itself; anything else goes to moto as before."""

from __future__ import annotations

import sys
import threading

_wanted = threading.local()


def patch_moto() -> None:
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    whole_value = FakeKey.value.fget

    def value(self):
        wanted = getattr(_wanted, "range", None)
        if wanted is None:
            return whole_value(self)
        begin, end = wanted
        size = self.contentsize
        if begin is None:  # the last `end` bytes
            begin, end = max(0, size - end), size - 1
        else:
            end = size - 1 if end is None else min(end, size - 1)
        if begin >= size or begin > end:
            _wanted.resolved = None
            return whole_value(self)  # moto answers 416, or the whole object
        with self.lock:
            self._value_buffer.seek(begin)
            data = self._value_buffer.read(end - begin + 1)
        _wanted.resolved = (begin, end, size)
        return data

    FakeKey.value = property(value, FakeKey.value.fset)
    get_object = S3Response.get_object

    def ranged_get_object(self):
        wanted = _single_range(self.headers.get("range") or self.headers.get("Range"))
        if wanted is None:
            return get_object(self)
        _wanted.range, _wanted.resolved = wanted, None
        try:
            status, headers, body = get_object(self)
        finally:
            _wanted.range = None
        resolved = _wanted.resolved
        if status != 200 or resolved is None:
            return status, headers, body
        begin, end, size = resolved
        headers["content-range"] = f"bytes {begin}-{end}/{size}"
        headers["content-length"] = str(len(body))
        for name in [h for h in headers if h.startswith("x-amz-checksum-")]:
            del headers[name]
        return 206, headers, body

    S3Response.get_object = ranged_get_object


def _single_range(header: str | None) -> tuple[int | None, int | None] | None:
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[len("bytes=") :].partition("-")
    try:
        if not first:
            return (None, int(last)) if last else None
        return int(first), int(last) if last else None
    except ValueError:
        return None


def main() -> None:
    patch_moto()
    from moto.server import main as moto_main

    moto_main(["-H", "127.0.0.1", "-p", sys.argv[1]])


if __name__ == "__main__":
    main()
