"""What a group's views need from its members, kept per group (tree.py): its arrays, the
names of its children as a set, and the plan of its `dataset.nc` (which arrays it holds,
over which dimensions). Every array's `info` and `data.tif` and the group's listing ask
for them; derived once per group and kept until one of its members, its listing or the
group itself is found changed (an erased member is taken out of what is kept), a `find`
or `ls -l` of a group of N arrays costs N, not N squared, and a `rm -r` of one array
does not grow with N."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...format import Array


class _Kept:
    """One group's: made at `made`, from its listing `names` (the list object the tree
    holds: a listing read again and found different is another one). A child erased
    since is in `gone` (left out where asked: no pass over the others per erasure)."""

    __slots__ = ("gathered", "gone", "made", "name_set", "names", "plan")

    def __init__(self, made: float, names: list[str]) -> None:
        self.made, self.names = made, names
        self.name_set: frozenset[str] | None = None
        self.gone: frozenset[str] = frozenset()
        self.gathered: list[tuple[str, Array]] | None = None  # before the erasures in `gone`
        self.plan: Any = _UNSET

    def has(self, name: str) -> bool:
        if self.name_set is None:
            self.name_set = frozenset(self.names)
        return name in self.name_set and name not in self.gone

    def arrays(self) -> list[tuple[str, Array]] | None:
        if self.gathered is not None and self.gone:  # once per run of erasures, when asked
            self.gathered, self.gone = [(n, a) for n, a in self.gathered if n not in self.gone], frozenset()
            self.name_set = None
        return self.gathered


_UNSET: Any = object()


class GroupMembers:
    """Group path -> what is derived from its members. Thread-safe. A value derived while
    a change came is returned but not kept (it may be the state before the change)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._kept: dict[str, _Kept] = {}
        # what each array alone decided of its place in the group's dataset.nc (views/netcdf.py)
        self.memos: dict[str, dict[Any, Any]] = {}
        self._changes = 0  # advanced by every change: what was derived across one is not kept
        self._lock = threading.Lock()

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
            if kept is None or kept.names is not names:
                return
            now = self._kept[parent] = _Kept(kept.made, now_names)
            now.name_set, now.gathered, now.gone = kept.name_set, kept.gathered, kept.gone | {name}
            if kept.plan is None or kept.plan is _UNSET:
                now.plan = kept.plan  # (None: no arrays, and none now)
            else:
                without = kept.plan.without(name)
                now.plan = _UNSET if without is None else without

    def _current(self, path: str, names: list[str], within_ttl: bool = False) -> _Kept:
        """The group's kept values where they were derived from this listing (and, with
        `within_ttl`, within the ttl: its members are read again past it); else a fresh,
        empty one (kept as it is filled, unless a change comes). Without it they are kept
        as long as the listing is the same and no member is found changed: each member is
        refreshed on its own when asked for, a group of N is not read again per ttl."""
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(path)
            if kept is not None and kept.names is names and (not within_ttl or now - kept.made < self.ttl):
                return kept
            kept = _Kept(now, names)
            self._kept[path] = kept
            return kept

    def has_child(self, path: str, names: list[str], name: str) -> bool:
        """Whether `name` is among the group's children (`names`, its listing)."""
        kept = self._current(path, names)
        with self._lock:
            return kept.has(name)

    def arrays(
        self,
        path: str,
        names: list[str],
        gather: Callable[[list[str]], list[tuple[str, Array]]],
        within_ttl: bool = False,
    ) -> list[tuple[str, Array]]:
        """The group's arrays by name, as `gather` finds them among `names`."""
        kept = self._current(path, names, within_ttl)
        with self._lock:
            arrays = kept.arrays()
            if arrays is not None:
                return arrays
            changes = self._changes
        arrays = gather(names)
        with self._lock:
            if changes == self._changes and self._kept.get(path) is kept:
                kept.gathered = arrays
        return arrays

    def derived_value(self, path: str, names: list[str], derive: Callable[[], Any], within_ttl: bool = False) -> Any:
        """What `derive` makes of the group's members (its dataset.nc plan), once."""
        kept = self._current(path, names, within_ttl)
        if kept.plan is not _UNSET:
            return kept.plan
        with self._lock:
            changes = self._changes
        value = derive()
        with self._lock:
            if changes == self._changes and self._kept.get(path) is kept:
                kept.plan = value
        return value
