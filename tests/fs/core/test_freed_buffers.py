"""The daemon's allocator settings (fs/mount.py `keep_freed_buffers`): a freed buffer larger
than glibc's mapping threshold (a band of 64 MiB) is reused by the next, not given back to
the kernel and faulted in again page by page. Each case runs in a process of its own, as
the daemon sets them once for its process; the page faults are the kernel's count."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_PROBE = """
import json, resource, sys
from zarrfs.fs.mount import keep_freed_buffers
if sys.argv[1] == "kept":
    keep_freed_buffers()
import numpy as np

def faults_of_a_band():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    band = np.empty(64 << 20, dtype=np.uint8)
    band[:] = 1
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del band
    return faults

first = faults_of_a_band()
print(json.dumps([first, faults_of_a_band(), faults_of_a_band()]))
"""

BAND_PAGES = (64 << 20) // os.sysconf("SC_PAGE_SIZE")


def _faults(mode: str) -> list[int]:
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": "0"}  # one fault per page, whatever the default
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, env=env, check=True)
    return list(json.loads(done.stdout))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_freed_band_is_reused_without_faults() -> None:
    # glibc's default: every band is mapped fresh, each of its pages faulted in and zeroed
    fresh = _faults("default")
    assert all(f >= BAND_PAGES * 0.9 for f in fresh), fresh
    # the daemon's: the first band's pages are faulted in once, the next bands reuse them
    kept = _faults("kept")
    assert kept[0] >= BAND_PAGES * 0.9, kept
    assert all(f < BAND_PAGES * 0.05 for f in kept[1:]), kept
