"""NodeTimes (fs/decoded/times.py): the time a decoded file shows never goes back to before
a change its node went through, however many nodes the mount changed."""

from __future__ import annotations

import time

from zarrfs.fs.decoded import times
from zarrfs.fs.decoded.times import NodeTimes


def test_a_change_reaches_the_node_and_the_groups_above_it_only():
    kept = NodeTimes()
    assert kept.get("g/a") is None  # never changed: the mount's start time
    before = time.time()
    kept.touch("g/a")
    assert all(kept.get(p) >= before for p in ("g/a", "g", ""))
    assert kept.get("g/b") is None and kept.get("g/a/x") is None


def test_a_node_forgotten_for_room_shows_a_time_no_earlier_than_its_change(monkeypatch):
    monkeypatch.setattr(times, "KEPT", 8)
    kept = NodeTimes()
    kept.touch("first")
    changed = kept.get("first")
    for i in range(20):
        kept.touch(f"n{i}")
    assert kept.get("first") >= changed  # forgotten: the floor, later than its change
    assert kept.get("never") is not None and kept.get("never") >= changed
    assert kept.get("n19") >= kept.get("never")
