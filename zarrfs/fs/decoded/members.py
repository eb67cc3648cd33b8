"""What a group's views need from its members, kept per group (tree.py): what each of its
arrays decided of its place in the group's `dataset.nc` (name, shape, data type,
dimension names: views/netcdf.py's Member, not the parsed array, which the node cache
holds within the metadata share), the names of its children as a set, and the plan of
its `dataset.nc` (which arrays it holds, over which dimensions). Every array's `info` and
`data.tif` and the group's listing ask for them; derived once per state of the group
(its own node, its listing) and updated as its members change: an erased member is
taken out of what is kept, a member found changed in the store is gathered again alone
(the plan made again from what each other array decided before: no node read, no
parse). A `find` or `ls -l` of a group of N arrays costs N, not N squared; a `rm -r` of
one array, or one member changed, does not grow with N in what is read."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...views.netcdf import Member


class _Kept:
    """One group's: made at `made`, from its listing `names` (the list object the tree
    holds: a listing read again and found different is another one). A child erased
    since is in `gone` (left out where asked: no pass over the others per erasure); one
    found changed, in `stale` (gathered again alone where asked)."""

    __slots__ = ("gathered", "gone", "made", "name_set", "names", "plan", "stale")

    def __init__(self, made: float, names: Sequence[str]) -> None:
        self.made, self.names = made, names
        self.name_set: frozenset[str] | None = None
        self.gone: frozenset[str] = frozenset()
        self.stale: frozenset[str] = frozenset()
        self.gathered: list[tuple[str, Member]] | None = None  # before the erasures in `gone`
        self.plan: Any = _UNSET

    def has(self, name: str) -> bool:
        if self.name_set is None:
            self.name_set = frozenset(self.names)
        return name in self.name_set and name not in self.gone

    def arrays(self) -> list[tuple[str, Member]] | None:
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
        self._changes = 0  # advanced by every change: what was derived across one is not kept
        self._lock = threading.Lock()

    def changed(self, path: str) -> None:
        """The node at `path` was found changed in the store: what it derived from its own
        members is dropped; its parent gathers it again alone when next asked, and plans
        again from what the others decided before (kept: a pass, no node read)."""
        with self._lock:
            self._changes += 1
            self._kept.pop(path, None)
            if not path:
                return
            parent, _, name = path.rpartition("/")
            kept = self._kept.get(parent)
            if kept is not None:
                kept.stale = kept.stale | {name}
                kept.plan = _UNSET

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
            return
        for p in [p for p in self._kept if p == path or p.startswith(path + "/")]:
            del self._kept[p]

    def removed(self, path: str, names: Sequence[str], now_names: Sequence[str]) -> None:
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
            now.stale = kept.stale - {name}
            if kept.plan is None or kept.plan is _UNSET or now.stale:
                now.plan = kept.plan  # (None: no arrays, and none now)
            else:
                without = kept.plan.without(name)
                now.plan = _UNSET if without is None else without

    def _current(self, path: str, names: Sequence[str]) -> _Kept:
        """The group's kept values where they were derived from this listing; else a
        fresh, empty one (kept as it is filled, unless a change comes). They are kept as
        long as the listing is the same and the group unchanged: each member is refreshed
        on its own when asked for (one found changed is gathered again alone), a group of
        N is not read again per ttl."""
        with self._lock:
            kept = self._kept.get(path)
            if kept is not None and kept.names is names:
                return kept
            kept = _Kept(time.monotonic(), names)
            self._kept[path] = kept
            return kept

    def due(self, path: str, names: Sequence[str]) -> bool:
        """Whether the group's members were last brought up to date (`renewed`) longer
        than the ttl ago, for what shows them all (dataset.nc: its layout follows their
        metadata as stored)."""
        kept = self._current(path, names)
        return time.monotonic() - kept.made >= self.ttl

    def renewed(self, path: str, names: Sequence[str], since: float) -> None:
        """Each member's state was refreshed after `since` (those found changed marked
        `stale` by `changed`): what is kept holds as of then."""
        kept = self._current(path, names)
        with self._lock:
            kept.made = max(kept.made, since)

    def has_child(self, path: str, names: Sequence[str], name: str) -> bool:
        """Whether `name` is among the group's children (`names`, its listing)."""
        kept = self._current(path, names)
        with self._lock:
            return kept.has(name)

    def arrays(
        self, path: str, names: Sequence[str], gather: Callable[[Sequence[str]], list[tuple[str, Member]]]
    ) -> list[tuple[str, Member]]:
        """What the group's arrays decided, by name, as `gather` finds them among `names`:
        all of them once, then those found changed since (`stale`) alone, in the listing's
        order."""
        kept = self._current(path, names)
        with self._lock:
            arrays, stale = kept.arrays(), kept.stale
            if arrays is not None and not stale:
                return arrays
            changes = self._changes
        if arrays is None:
            arrays = gather(names)
        else:
            with self._lock:
                listed = [n for n in sorted(stale) if kept.has(n)]
            merged = {n: a for n, a in arrays if n not in stale}
            merged.update(gather(listed))  # (a dict of N, and a pass over the names: no node read)
            arrays = [(n, merged[n]) for n in kept.names if n in merged]
        with self._lock:
            if changes == self._changes and self._kept.get(path) is kept:
                kept.gathered, kept.stale = arrays, frozenset()
        return arrays

    def derived_value(self, path: str, names: Sequence[str], derive: Callable[[], Any]) -> Any:
        """What `derive` makes of the group's members (its dataset.nc plan), once, and
        again once a member changes."""
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
