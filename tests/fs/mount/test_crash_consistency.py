"""SIGKILL of the daemon in the middle of writes (tests/fs/mount/crash.py), again and again, on
four stores at once: a local directory and a moto bucket, each as a Zarr hierarchy
(chunks, documents and the consolidated metadata, `.npy` copies into a v3 group and a v2
dataset, `mv` of arrays) and
with --raw (keys of three upload parts, small keys, `mv`). No torn chunk, document, node
or key; consolidated metadata that is JSON and lists no node whose document is missing;
every write whose fsync or close returned is there; the next mount removes what the
killed one left (temporary files, multipart uploads) and the spools are gone with it
(docs/reliability.md)."""

from __future__ import annotations

import pytest

from tests.fs.mount.crash import KILLS, make_lane, moto_server, run_lanes

SEED = 49


@pytest.mark.mount
def test_writes_acknowledged_before_a_sigkill_are_kept_and_nothing_is_torn(tmp_path, monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    with moto_server() as endpoint:
        lanes = [make_lane(name, tmp_path / name, endpoint if name.startswith("moto") else None) for name in KILLS]
        run_lanes(lanes, KILLS, SEED)
    for lane in lanes:
        assert not lane.problems, f"{lane.name}:\n" + "\n".join(lane.problems[:40])
        assert lane.kills == KILLS[lane.name] and lane.acknowledged > lane.kills
    # the kills hit where they should: mid-upload (a multipart upload left for the next
    # mount to abort) on the moto --raw lane, between a write and its rename (a
    # temporary file left) on the local ones
    assert lanes[3].uploads_left > 0
    assert lanes[0].temporaries_left + lanes[1].temporaries_left > 0
