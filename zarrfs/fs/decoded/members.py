"""What a group's views need from its members, kept per group (tree.py): its arrays, the
names of its children as a set, and the plan of its `dataset.nc` (which arrays it holds,
over which dimensions). Every array's `info` and `data.tif` and the group's listing ask
for them; derived once per group and kept until one of its members, its listing or the
group itself changes (or the ttl passes), a `find` or `ls -l` of a group of N arrays
costs N, not N squared."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...format import Array


class _Kept:
    """One group's: made at `made`, from its listing `names` (the list object the tree
    holds: a listing read again is another one)."""

    __slots__ = ("made", "names", "name_set", "arrays", "plan")

    def __init__(self, made: float, names: list[str]) -> None:
        self.made, self.names = made, names
        self.name_set = frozenset(names)
        self.arrays: list[tuple[str, Array]] | None = None
        self.plan: Any = _UNSET


_UNSET: Any = object()


class GroupMembers:
    """Group path -> what is derived from its members. Thread-safe. A value derived while
    a change came is returned but not kept (it may be the state before the change)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._kept: dict[str, _Kept] = {}
        # what each array alone decided of its place in the group's dataset.nc (views/netcdf.py)
        self.memos: dict[str, dict] = {}
        self._changes = 0  # advanced by every change: what was derived across one is not kept
        self._lock = threading.Lock()
        self.derived = 0  # times a group's arrays were gathered (tests count them)

    def changed(self, path: str) -> None:
        """The node at `path` changed (made, erased, moved, found changed, or its own
        documents): what its parent and itself derived from their members is dropped."""
        with self._lock:
            self._changes += 1
            self._kept.pop(path, None)
            if path:
                self._kept.pop(path.rpartition("/")[0], None)

    def forget(self, path: str) -> None:
        """What the groups at and below `path` (and its parent) derived ("": all)."""
        with self._lock:
            self._changes += 1
            self._drop_below(path)
            if path:
                self._kept.pop(path.rpartition("/")[0], None)

    def _drop_below(self, path: str) -> None:
        if not path:
            self._kept.clear()
            self.memos.clear()
            return
        for kept in (self._kept, self.memos):
            for p in [p for p in kept if p == path or p.startswith(path + "/")]:
                del kept[p]

    def removed(self, path: str, names: list[str], now_names: list[str]) -> None:
        """The child `path` was erased: its parent's listing went from `names` to
        `now_names`; what the parent derived loses that child, without a pass over the
        others' metadata (a `rm -r` of one array of N costs no planning of N)."""
        parent, _, name = path.rpartition("/")
        with self._lock:
            self._changes += 1
            self._drop_below(path)
            kept = self._kept.pop(parent, None)
            if kept is None or kept.names is not names or time.monotonic() - kept.made >= self.ttl:
                return
            now = self._kept[parent] = _Kept(kept.made, now_names)
            if kept.arrays is not None:
                now.arrays = [(n, a) for n, a in kept.arrays if n != name]
            if kept.plan is None or kept.plan is _UNSET:
                now.plan = kept.plan  # (None: no arrays, and none now)
            else:
                without = kept.plan.without(name)
                now.plan = _UNSET if without is None else without

    def _current(self, path: str, names: list[str]) -> _Kept:
        """The group's kept values where they were derived from this listing within the
        ttl; else a fresh, empty one (kept as it is filled, unless a change comes)."""
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(path)
            if kept is not None and kept.names is names and now - kept.made < self.ttl:
                return kept
            kept = _Kept(now, names)
            self._kept[path] = kept
            return kept

    def has_child(self, path: str, names: list[str], name: str) -> bool:
        """Whether `name` is among the group's children (`names`, its listing)."""
        return name in self._current(path, names).name_set

    def arrays(
        self, path: str, names: list[str], gather: Callable[[list[str]], list[tuple[str, Array]]]
    ) -> list[tuple[str, Array]]:
        """The group's arrays by name, as `gather` finds them among `names`."""
        kept = self._current(path, names)
        if kept.arrays is not None:
            return kept.arrays
        with self._lock:
            changes = self._changes
            self.derived += 1
        arrays = gather(names)
        with self._lock:
            if changes == self._changes and self._kept.get(path) is kept:
                kept.arrays = arrays
        return arrays

    def derived_value(self, path: str, names: list[str], derive: Callable[[], Any]) -> Any:
        """What `derive` makes of the group's members (its dataset.nc plan), once."""
        kept = self._current(path, names)
        if kept.plan is not _UNSET:
            return kept.plan
        with self._lock:
            changes = self._changes
        value = derive()
        with self._lock:
            if changes == self._changes and self._kept.get(path) is kept:
                kept.plan = value
        return value
