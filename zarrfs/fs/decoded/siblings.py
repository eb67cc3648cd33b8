"""A group's members refreshed together once `--metadata-ttl` has passed: a walk (`find`,
`ls -lR`, `du`) longer than the ttl comes to each member of a group again, one after
the other, in the order they are listed. The refresh of one reads the documents of the
next members known (as old as half the ttl, or older) with its own, in one batch of
store reads (in parallel: one round trip on a remote store), and refreshes them too: a
group of N is read again in N / AHEAD batches, and the walk finds the next members
known, answered without a worker thread or a store read each."""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from ...format import AnyHierarchy, FormatError
from ...store import StoreError
from ...store.keys import join_path

log = logging.getLogger(__name__)

AHEAD = 64  # members refreshed along with the one asked for


class Loaded(Protocol):
    loaded: float


S = TypeVar("S", bound=Loaded)


def following(names: Sequence[str], path: str, states: Mapping[str, S], now: float, ttl: float) -> list[tuple[str, S]]:
    """(path, state) of the members listed after the one at `path` among its group's
    `names` (sorted, as listings are), up to AHEAD of them, whose states are known and as
    old as half the ttl. None where `path` is not listed there. Costs AHEAD, and log N
    to find the place: no pass over the group."""
    parent, _, name = path.rpartition("/")
    at = bisect.bisect_right(names, name)
    if not path or at == 0 or names[at - 1] != name:
        return []
    out = []
    for sibling in names[at : at + AHEAD]:
        sibling_path = join_path(parent, sibling)
        state = states.get(sibling_path)
        if state is not None and now - state.loaded >= ttl / 2:
            out.append((sibling_path, state))
    return out


def refresh(
    hierarchy: AnyHierarchy, path: str, state: S, along: list[tuple[str, S]], load: Callable[[str, S], S | None]
) -> S | None:
    """load(path, state), the documents of the members `along` read with its, and each of
    them loaded after it (a failure of theirs is left for the one asked for it)."""
    if along:
        try:
            hierarchy.read_ahead([path] + [p for p, _ in along])
        except (FormatError, StoreError) as exc:  # each node reads its own and reports
            log.debug("reading ahead of /%s: %s", path, exc)
    fresh = load(path, state)
    for sibling_path, sibling_state in along:
        try:
            load(sibling_path, sibling_state)
        except (FormatError, StoreError) as exc:
            log.debug("refresh of /%s along with /%s: %s", sibling_path, path, exc)
    return fresh
