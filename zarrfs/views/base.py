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
