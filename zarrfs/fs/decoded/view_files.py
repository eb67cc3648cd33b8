"""The open files of the decoded tree opened for reading (docs/semantics.md): a view, read
through what decodes ahead of its sequential readers (views/ahead/) and, for `data` and
`data.npy`, the windows random readers keep coming back to (hot.py); the shared views
follow their entry's node, a chunk file's first read waits for a walk fetching it."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, cast

from ...format.metadata import METADATA_NAMES
from ...views import catalogue
from ...views.ahead.policy import DecodeAhead
from ...views.base import FileView
from ..core import Attributes, NotAtHand, OpenFile
from .entries import CHUNK, FILE, INTERNAL_FILE
from .hot import HotWindows
from .walk import ChunkWalk

if TYPE_CHECKING:
    from ...format import Array
    from ...views.chunk import ChunkView
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

    def _now(self, wait: bool) -> Reading:
        """What a read goes through now; NotAtHand where finding that needs a store call
        (and not `wait`)."""
        return self._current[1]

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes | memoryview:
        # (untracked: a push's read, through what the last read found, as the push saw it)
        view, hot, ahead = self._now(wait) if track else self._current[1]
        if wait:
            if ahead is not None and track:
                ahead.follow(offset, size)
            return view.read(offset, size)
        data = view.read_cached(offset, size)
        if data is None:
            raise NotAtHand
        if data and ahead is not None and track:
            step = ahead.follow(offset, len(data))
            if hot is not None and not step.continues and not step.first:
                hot.count(offset, len(data))
        return data

    def pushed(self, offset: int, size: int) -> None:
        ahead = self._current[1].ahead
        if ahead is not None:
            ahead.pushed(offset, size)

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

    def _now(self, wait: bool) -> Reading:
        """The entry's view now and what its reads share; NotAtHand where that needs a
        store call (and not `wait`)."""
        seen, current = self._current
        generation = self._tree.generation  # taken first: a change meanwhile is seen next time
        if generation == seen:
            return current
        view = self._tree.view_now(self._entry, current.view, not wait)
        if view is None:
            raise NotAtHand
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

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes | memoryview:
        if wait:
            self._walk.wait(self._coords)
        return super().read(offset, size, wait=wait, track=track)


class ReadFiles:
    """What the opens for reading of the decoded tree share: per file view, the windows
    its random readers keep coming back to (`data`, `data.npy`) and what is decoded ahead
    of its sequential readers; per array, the walk through its chunk files. `kept(path,
    node)`: whether an open of a shared view keeps the kernel's pages (pages.py).
    Thread-safe: its tables under its own lock."""

    def __init__(self, tree: Tree, kept: Callable[[str, str], bool]) -> None:
        self._tree, self._kept = tree, kept
        self._lock = threading.Lock()
        self._read_state: weakref.WeakKeyDictionary[FileView, tuple[HotWindows | None, DecodeAhead]] = (
            weakref.WeakKeyDictionary()
        )
        self._walks: weakref.WeakKeyDictionary[Array, ChunkWalk] = weakref.WeakKeyDictionary()

    def opened(self, path: str, entry: Entry, view: FileView) -> ViewFile:
        """An open for reading of `view`, the file at `path` (`entry`)."""
        # chunk files and documents are replaced whole: each open sees one version of them
        if entry.kind == CHUNK:
            walk = self._walk(cast("ChunkView", view).array)  # a chunk file's view (Tree._make_view)
            walk.opened(entry.coords)
            return ChunkViewFile(view.pinned(), walk, entry.coords)
        per_open = entry.kind == FILE and entry.name in METADATA_NAMES
        # (info and data.jsonl: their lengths are not known ahead of the reads; data.jsonl's is 0)
        kind = catalogue.by_name(entry.name) if entry.kind == FILE else None
        direct = per_open or entry.kind == INTERNAL_FILE or (kind is not None and kind.direct)
        if per_open or entry.kind != FILE:
            return ViewFile(view.pinned() if per_open else view, None, direct_io=direct, keep_cache=not direct)
        reading = functools.partial(self._reading, hot=kind is not None and kind.hot)
        if direct:  # never in the kernel's pages
            hot, ahead = reading(view)
            return ViewFile(view, hot, direct_io=True, keep_cache=False, ahead=ahead)
        return SharedViewFile(self._tree, entry, view, reading, keep_cache=self._kept(path, entry.node))

    def _walk(self, array: Array) -> ChunkWalk:
        with self._lock:
            walk = self._walks.get(array)
            if walk is None:
                walk = self._walks[array] = ChunkWalk(array)
            return walk

    def _reading(self, view: FileView, hot: bool) -> tuple[HotWindows | None, DecodeAhead]:
        """What the opens of one file share about how it is read."""
        with self._lock:
            shared = self._read_state.get(view)
            if shared is None:
                shared = self._read_state[view] = (HotWindows(view.size()) if hot else None, DecodeAhead(view))
            return shared
