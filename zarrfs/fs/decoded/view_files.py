"""The open files of the decoded tree opened for reading (docs/semantics.md): a view, read
through what decodes ahead of its sequential readers (views/ahead/) and, for `data` and
`data.npy`, the windows random readers keep coming back to (hot.py); the shared views
follow their entry's node, a chunk file's first read waits for a walk fetching it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ...views.ahead.policy import DecodeAhead
from ...views.base import FileView
from ..core import Attributes, OpenFile
from .hot import HotWindows
from .walk import ChunkWalk

if TYPE_CHECKING:
    from .entries import Entry
    from .tree import Tree


class Reading(NamedTuple):
    """What a read of a file goes through, taken whole (never part of one and part of
    another): its view, the windows random readers keep coming back to (`data`,
    `data.npy`), what is decoded ahead of its sequential readers."""

    view: FileView
    hot: HotWindows | None
    ahead: DecodeAhead | None


class ViewFile(OpenFile):
    """A file opened for reading: its view, what is decoded ahead of its sequential readers,
    and for `data`/`data.npy` the windows random readers keep coming back to."""

    def __init__(
        self,
        view: FileView,
        hot: HotWindows | None,
        direct_io: bool,
        keep_cache: bool,
        ahead: DecodeAhead | None = None,
    ) -> None:
        # (the tree's generation it was found current at, for a file that follows its
        # entry; what reads go through): replaced whole, reads running meanwhile
        self._current: tuple[int | None, Reading] = (None, Reading(view, hot, ahead))
        self.direct_io = direct_io
        self.keep_cache = keep_cache

    @property
    def reading(self) -> Reading:
        return self._current[1]

    def _now(self, cached: bool) -> Reading | None:
        """What a read goes through now; None where finding that needs a store call
        (`cached`)."""
        return self._current[1]

    def read(self, offset: int, size: int) -> bytes:
        now = self._now(False)
        assert now is not None  # None only for a `cached` look
        view, _, ahead = now
        if ahead is not None:
            ahead.follow(offset, size)
        return view.read(offset, size)

    def read_cached(self, offset: int, size: int) -> bytes | memoryview | None:
        now = self._now(True)
        if now is None:
            return None
        view, hot, ahead = now
        data = view.read_cached(offset, size)
        if data and ahead is not None:
            step = ahead.follow(offset, len(data))
            if hot is not None and not step.continues and not step.first:
                hot.count(offset, len(data))
        return data

    def peek(self, offset: int, size: int) -> bytes | memoryview | None:
        return self.reading.view.read_cached(offset, size)

    def hot_windows(self) -> list[tuple[int, int]]:
        hot = self.reading.hot
        return hot.take() if hot is not None else []

    def generation(self) -> int:
        return self.reading.view.generation()

    def attributes(self) -> Attributes:
        # asked once its name is gone: its node removed (or moved away) while it is open
        return Attributes(False, self.reading.view.size(), writable=False, nlink=0)


class SharedViewFile(ViewFile):
    """`data`, `data.npy` or a legacy view opened for reading. Its pages in the kernel are
    shared by every open (keep_cache), so it reads its node as it is now, not as it was
    when it was opened: one opened before a resize would otherwise fill them with the old
    layout, for every later open to read. Reads run several at once: each follows the
    node, and what the latest found wins."""

    def __init__(
        self,
        tree: Tree,
        entry: Entry,
        view: FileView,
        reading: Callable[[FileView], tuple[HotWindows | None, DecodeAhead]],
        keep_cache: bool = True,
    ) -> None:
        hot, ahead = reading(view)
        super().__init__(view, hot, direct_io=False, keep_cache=keep_cache, ahead=ahead)
        self._tree = tree
        self._entry = entry
        self._reading = reading  # a view -> what its opens share about how it is read
        self._following = threading.Lock()  # guards replacing `_current`

    def _now(self, cached: bool) -> Reading | None:
        """The entry's view now and what its reads share; None where that needs a store
        call (`cached`)."""
        seen, current = self._current
        generation = self._tree.generation  # taken first: a change meanwhile is seen next time
        if generation == seen:
            return current
        view = self._tree.view_now(self._entry, current.view, cached)
        if view is None:
            return None
        found = current if view is current.view else Reading(view, *self._reading(view))
        with self._following:
            seen, current = self._current
            if seen is not None and seen > generation:
                return current  # another read found a later one meanwhile
            self._current = (generation, found)
        return found


class ChunkViewFile(ViewFile):
    """A chunk file opened for reading (its view pinned: docs/semantics.md). Its first read waits for
    the chunk where a walk of the array's chunk files is fetching it, rather than fetching
    it a second time."""

    def __init__(self, view: FileView, walk: ChunkWalk, coords: tuple[int, ...]) -> None:
        super().__init__(view, None, direct_io=True, keep_cache=False)
        self._walk = walk
        self._coords = coords

    def read(self, offset: int, size: int) -> bytes:
        self._walk.wait(self._coords)
        return super().read(offset, size)
