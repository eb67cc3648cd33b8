"""ByteRange: which bytes of a value a read wants — a span, everything from an offset,
or the last N bytes — and how that resolves against a known size."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ByteRange:
    """Bytes [start, end) of a value (end None: to its end), or its last `suffix_length` bytes.

    Build with span(), from_offset() or suffix(). Ranges past the end are clamped on read.
    """

    start: int = 0
    end: int | None = None
    suffix_length: int | None = None

    def __post_init__(self) -> None:
        if self.suffix_length is not None:
            if self.suffix_length < 0 or self.start != 0 or self.end is not None:
                raise ValueError(f"invalid suffix range {self!r}")
        elif self.start < 0 or (self.end is not None and self.end < self.start):
            raise ValueError(f"invalid byte range {self!r}")

    @classmethod
    def span(cls, start: int, end: int) -> ByteRange:
        """Bytes start <= i < end."""
        return cls(start, end)

    @classmethod
    def from_offset(cls, start: int) -> ByteRange:
        """Bytes from `start` to the end of the value."""
        return cls(start)

    @classmethod
    def suffix(cls, length: int) -> ByteRange:
        """The last `length` bytes (the whole value if it is shorter)."""
        return cls(suffix_length=length)

    @property
    def is_empty(self) -> bool:
        """Whether the range selects no bytes whatever the size of the value."""
        if self.suffix_length is not None:
            return self.suffix_length == 0
        return self.end is not None and self.end <= self.start

    def capped(self, max_size: int) -> ByteRange:
        """A range selecting at most `max_size` + 1 of the bytes this one selects: enough
        to tell whether the selection is larger than `max_size`."""
        limit = max_size + 1
        if self.suffix_length is not None:
            return self if self.suffix_length <= limit else ByteRange(suffix_length=limit)
        if self.end is not None and self.end - self.start <= limit:
            return self
        return ByteRange(self.start, self.start + limit)

    def resolve(self, size: int) -> tuple[int, int]:
        """(start, end) of the selected bytes in a value of `size` bytes, clamped to it."""
        if self.suffix_length is not None:
            return max(0, size - self.suffix_length), size
        start = min(self.start, size)
        end = size if self.end is None else max(start, min(self.end, size))
        return start, end
