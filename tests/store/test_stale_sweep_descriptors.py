"""The sweep for stale temporary files a writable local mount starts in the background
(zarrfs/store/stale_temporaries.py) holds one descriptor per level of the tree it walks,
never one per directory: it opened every directory of a group before visiting any, 20,000
at once for a group of 20,000 arrays, up to the process's limit, and meanwhile the mount's
own reads failed EMFILE: a `find` of the mount root right after the mount failed EIO."""

from __future__ import annotations

import os
import resource

import pytest

from zarrfs.store import LocalStore, stale_temporaries
from zarrfs.store.keys import HOST, TEMP_PREFIX

ARRAYS = 300


def _group(root) -> list[str]:
    """A group of ARRAYS arrays, each with a chunk directory; a stale temporary file in
    the last array's (one its writer, long gone, left)."""
    for i in range(ARRAYS):
        (root / f"a{i:03d}" / "c" / "0").mkdir(parents=True)
        (root / f"a{i:03d}" / "zarr.json").write_bytes(b"{}")
    stale = f"a{ARRAYS - 1:03d}/c/0/{TEMP_PREFIX}{HOST}.{2**22 + 1}.0123456789abcdef"
    (root / stale).write_bytes(b"half a chunk")
    return [stale]


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
def test_the_sweep_holds_a_descriptor_per_level_not_per_directory(tmp_path, monkeypatch):
    (stale,) = _group(tmp_path)
    store = LocalStore(str(tmp_path))
    most = [0]
    real_open = os.open

    def counted_open(*args, **kwargs):  # the descriptors open at each open
        fd = real_open(*args, **kwargs)
        most[0] = max(most[0], _open_descriptors())
        return fd

    before = _open_descriptors()
    monkeypatch.setattr(os, "open", counted_open)
    assert store.remove_stale_temporaries() == 1
    monkeypatch.undo()
    assert not (tmp_path / stale).exists()
    assert most[0] - before <= 8  # the tree is 4 levels deep
    assert _open_descriptors() == before  # and all closed


def test_reads_meanwhile_do_not_run_out_of_descriptors(tmp_path, monkeypatch):
    """With the process's limit a few dozen descriptors above what it holds, a read of
    the store after each of the sweep's opens is served (the mount reads as it sweeps)."""
    _group(tmp_path)
    store = LocalStore(str(tmp_path))
    failures: list[BaseException] = []

    def open_then_read(*args, **kwargs):
        fd = os.open(*args, **kwargs)
        try:
            assert store.get("a000/zarr.json") == b"{}"
        except Exception as exc:
            failures.append(exc)
        return fd

    monkeypatch.setattr(stale_temporaries, "os", _Os(open_then_read))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (_open_descriptors() + 64, hard))
    try:
        assert store.remove_stale_temporaries() == 1
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert failures == []


class _Os:
    """os, with the sweep's opens its own."""

    def __init__(self, open_) -> None:
        self.open = open_

    def __getattr__(self, name):
        return getattr(os, name)
