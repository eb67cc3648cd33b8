"""CPU accounting for the benchmarks: how many CPU seconds a daemon has used, and which
process serves a mountpoint."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def daemon_of(mountpoint: Path) -> int:
    """The pid of the zarrfs daemon serving `mountpoint`."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                args = (entry / "cmdline").read_bytes().split(b"\0")
                if str(mountpoint).encode() in args and any(b"zarrfs" in a for a in args):
                    return int(entry.name)
    raise RuntimeError(f"no daemon serves {mountpoint}")
