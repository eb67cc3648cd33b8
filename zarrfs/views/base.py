"""What a virtual file is: it knows its size and how to read a range. Methods block
(they may fetch and decode chunks), so the fs layer calls them from worker threads."""

from __future__ import annotations

import threading
from typing import Callable


class FileView:
    # the kernel may keep this file's pages across opens (content fixed for the mount
    # window, or invalidated explicitly when zarrfs itself changes it)
    keep_cache = True

    def size(self) -> int:
        raise NotImplementedError

    def read(self, offset: int, size: int) -> bytes:
        raise NotImplementedError

    def read_cached(self, offset: int, size: int) -> bytes | memoryview | None:
        """The bytes `read` would return when they are at hand without blocking (no store
        call, no decoding: decoded chunks in the cache), else None. Cheap enough for the
        fs layer to call on its event loop thread before handing `read` to a worker."""
        return None

    def take_hot_windows(self) -> list[tuple[int, int]]:
        """(offset, size) ranges that random reads came back to often enough to hand them
        to the kernel's page cache whole (their bytes come from `peek`); none by default."""
        return []

    def peek(self, offset: int, size: int) -> bytes | memoryview | None:
        """read_cached without side effects."""
        return self.read_cached(offset, size)

    def generation(self) -> int:
        """Moves whenever the content may have changed."""
        return 0

    def pinned(self) -> "FileView":
        """A view that keeps showing the content as it is at its first read, for one open
        file whose content may be replaced whole meanwhile; itself where it never is."""
        return self


class BytesView(FileView):
    """A file whose whole content is computed once, on first use."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        self._render = render
        self._content: bytes | None = None
        self._lock = threading.Lock()

    def content(self) -> bytes:
        with self._lock:
            if self._content is None:
                self._content = self._render()
            return self._content

    def size(self) -> int:
        return len(self.content())

    def read(self, offset: int, size: int) -> bytes:
        return self.content()[offset:offset + size]

    def read_cached(self, offset: int, size: int) -> bytes | None:
        content = self._content  # rendered already: no lock needed to read it
        return None if content is None else content[offset:offset + size]
