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


def test_a_node_moved_changes_every_node_below_it_and_no_other():
    kept = NodeTimes()
    kept.touch("h", below=True)
    moved = kept.get("h")
    assert kept.get("h/x") == kept.get("h/x/y") == moved
    assert kept.get("g/x") is None and kept.get("hx") is None
    kept.touch("h/x")
    assert kept.get("h/x") >= moved


def test_the_times_given_never_go_back_where_the_clock_does(monkeypatch):
    clock = iter([100.0, 50.0])
    monkeypatch.setattr(times.time, "time", lambda: next(clock))
    kept = NodeTimes()
    kept.touch("g/a")
    kept.touch("g/b")  # the clock stepped back (or a touch that read it first came last)
    assert kept.get("g") == 100.0 and kept.get("g/b") == 100.0
