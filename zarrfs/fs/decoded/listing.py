"""A group's listing as the node cache keeps it (nodes.py): its names, sorted, and the
listing once one child is erased through the mount (`without`), made without a copy of
the N names. The listings made one from another share the names as listed and those
erased since, each seeing the ones erased by its own step; a thread that holds one (a
`readdir` in progress, what a group's views derived from it) keeps seeing it as it was."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from typing import overload


class _Listed:
    """What a line of listings share: the names as listed, and each name erased since with
    the step it went at. Only the line's last listing adds to it (`last`)."""

    __slots__ = ("gone", "last", "names")

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.gone: dict[str, int] = {}
        self.last = 0


class Listing(Sequence[str]):
    """The names of a group's children, sorted. Immutable."""

    __slots__ = ("_count", "_listed", "_live", "_step")

    def __init__(self, names: list[str]) -> None:
        self._listed, self._step, self._count = _Listed(names), 0, len(names)
        self._live: list[str] | None = names  # the names as a list, where made

    def gone(self, name: str) -> bool:
        at = self._listed.gone.get(name)
        return at is not None and at <= self._step

    def without(self, name: str) -> Listing:
        """This listing without `name` (the same names where it holds none): a step of
        the line this one is the last of; a copy where it is not, or where a quarter of
        the line's names are gone (a removal in N / 4)."""
        listed = self._listed
        if listed.last != self._step:
            return self._copied().without(name)
        out = Listing.__new__(Listing)
        out._listed, out._step, out._live = listed, self._step + 1, None
        held = name in self
        if held:
            listed.gone[name] = out._step
        listed.last = out._step
        out._count = self._count - held
        if 4 * len(listed.gone) > len(listed.names) + 256:
            return out._copied()
        return out

    def _copied(self) -> Listing:
        """This listing, the first of a line of its own (its names copied)."""
        return Listing(list(self))

    def _list(self) -> list[str]:
        """The names as a list (made once per listing, where one asks by position)."""
        live = self._live
        if live is None:
            live = self._live = list(self)
        return live

    def __contains__(self, name: object) -> bool:
        names = self._listed.names
        at = bisect.bisect_left(names, name)  # type: ignore[call-overload]
        return at < len(names) and names[at] == name and not self.gone(names[at])

    def __iter__(self) -> Iterator[str]:
        if self._live is not None:
            return iter(self._live)
        return (n for n in self._listed.names if not self.gone(n))

    def __reversed__(self) -> Iterator[str]:
        if self._live is not None:
            return reversed(self._live)
        return (n for n in reversed(self._listed.names) if not self.gone(n))

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, at: int) -> str: ...
    @overload
    def __getitem__(self, at: slice) -> list[str]: ...
    def __getitem__(self, at: int | slice) -> str | list[str]:
        return self._list()[at]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Listing):
            return other is self or list(self) == list(other)
        return isinstance(other, list) and list(self) == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Listing({list(self)!r})"


def listing(names: Sequence[str]) -> Listing:
    """`names` (sorted) as a Listing: the same one where it is one; a list is held, not copied."""
    return names if isinstance(names, Listing) else Listing(list(names) if not isinstance(names, list) else names)
