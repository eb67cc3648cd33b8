"""What a virtual file is: it knows its size and how to read a range. Methods block
(they may fetch and decode chunks), so the fs layer calls them from worker threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..format import Group
from ..store.keys import join_path

if TYPE_CHECKING:
    import numpy as np

    from ..format import Array
    from .ahead.inflight import ChunksInFlight


class Neighbours(Protocol):
    """What a view of an array may consult beyond the array (its georeferencing, its OME
    image): its parent group's attributes, its sibling arrays, the levels of a multiscale
    pyramid it belongs to (metadata only; values are read from the arrays). The tree's
    and `zarrfs info`'s kinds subclass it and give `node` and `siblings`."""

    path: str  # the array's

    def node(self, path: str) -> Array | Group | None:
        """The node at `path` (from the root), None where there is none that opens."""

    def chunks_of(self, array: Array) -> Any:
        """Where a view reads that array's chunks (as DataView takes them)."""

    def parent_attributes(self) -> dict[Any, Any]:
        parent = self.node(self.path.rpartition("/")[0]) if self.path else None
        return parent.attributes if isinstance(parent, Group) else {}

    def sibling(self, name: str) -> Array | None:
        """The array `name` beside this one (None where there is none, or at the root)."""
        if not self.path or not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            return None
        node = self.node(join_path(self.path.rpartition("/")[0], name))
        return None if isinstance(node, Group) else node  # (Array is not imported here: numpy)

    def siblings(self) -> list[str]:
        """The names of the arrays of the parent group, this one included (none at the
        root); each is `sibling(name)`. (Names only: a group of N arrays holds no N parsed
        arrays for each of its members' views.)"""

    def netcdf_plan(self) -> Any:
        """The plan of the parent group's `dataset.nc` (views/netcdf.py), shown or not;
        None at the root or where it holds no array. (The tree's kind keeps one per group:
        every array's `info` asks for it.)"""


class DecodedData(Protocol):
    """What a view of an array's `data` (views/data.py) offers decode-ahead
    (views/ahead/policy.py): its layout in chunk rows, and its chunks being decoded
    (views/ahead/inflight.py), where rows are started and released."""

    array: Array
    inflight: ChunksInFlight

    def size(self) -> int: ...

    def can_decode_ahead(self) -> bool: ...

    def chunk_bytes(self) -> int: ...

    def chunk_row_at(self, offset: int) -> int: ...

    def row_offset(self, row: int) -> int: ...


class StoredChunks:
    """Where a view's decoded chunks come from by default: the array as stored. (The
    decoded tree hands views its pending writes instead, which read the same way.)
    False: no write waits to be stored, so the decoded-chunk cache holds the truth."""

    def __init__(self, array: Array) -> None:
        self.array = array

    def read_chunks(self, coords_list: list[tuple[int, ...]], consume: Any = None) -> list[np.ndarray]:
        return cast("list[np.ndarray]", self.array.read_chunks(coords_list, consume))

    def __bool__(self) -> bool:
        return False


class FileView:
    def size(self) -> int:
        raise NotImplementedError

    def read(self, offset: int, size: int) -> bytes:
        raise NotImplementedError

    def read_cached(self, offset: int, size: int) -> bytes | memoryview | None:
        """The bytes `read` would return when they are at hand without blocking (no store
        call, no decoding: decoded chunks in the cache), else None. Cheap enough for the
        fs layer to call on its event loop thread before handing `read` to a worker."""
        return None

    def data_span(self, offset: int, size: int) -> tuple[DecodedData, int, int] | None:
        """For a view that shows the bytes of an array's `data` (views/data.py), at some
        place of its own: the view of `data` and the range of it this read shows; else None.
        It tells the decoded core what to decode ahead of a sequential reader."""
        return None

    def generation(self) -> int:
        """Moves whenever the content may have changed."""
        return 0

    def cached_size(self) -> int | None:
        """`size` when it needs no store call, else None (most views know it from the
        metadata alone)."""
        return self.size()

    def pinned(self) -> FileView:
        """A view that keeps showing the content as it is at its first read, for one open
        file whose content may be replaced whole meanwhile; itself where it never is."""
        return self


class BytesView(FileView):
    """A file whose whole content is computed once, on first use."""

    def __init__(self, render: Callable[[], bytes], cheap: bool = False) -> None:
        self._render = render
        self._content: bytes | None = None
        self._cheap = cheap  # rendering needs no store call: read_cached may render
        self._lock = threading.Lock()

    def content(self) -> bytes:
        with self._lock:
            if self._content is None:
                self._content = self._render()
            return self._content

    def size(self) -> int:
        return len(self.content())

    def read(self, offset: int, size: int) -> bytes:
        return self.content()[offset : offset + size]

    def read_cached(self, offset: int, size: int) -> bytes | None:
        content = self._content  # rendered already: no lock needed to read it
        if content is None and self._cheap:
            content = self.content()
        return None if content is None else content[offset : offset + size]

    def cached_size(self) -> int | None:
        content = self._content
        if content is None and self._cheap:
            content = self.content()
        return None if content is None else len(content)
