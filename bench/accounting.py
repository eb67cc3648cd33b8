"""CPU accounting for the benchmarks: how many CPU seconds a daemon has used, in all and
per thread, and which process serves a mountpoint.

Threads are read from /proc/PID/task/*/stat and named by /proc/PID/task/*/comm (the
daemon gives each of its threads its Python name, `zarrfs/fs/thread_names.py`). Threads
of one kind are summed under one name: a trailing number goes (`zarrfs-codec_3`,
`Trio thread 12`), and the process's first thread, which runs the FUSE loop in the
daemon, is `main (FUSE loop)`. CPU of threads that ended meanwhile is `(ended threads)`."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

# the daemons a benchmark starts log into a directory of the run's own (not /var/log/zarrfs)
if "ZARRFS_LOG_DIR" not in os.environ:  # a directory made only where none was named
    os.environ["ZARRFS_LOG_DIR"] = tempfile.mkdtemp(prefix="zarrfs-bench-logs-")

TICK = os.sysconf("SC_CLK_TCK")
MAIN = "main (FUSE loop)"
ENDED = "(ended threads)"


def _ticks(stat: str) -> int:
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (its ended threads included)."""
    return _ticks(Path(f"/proc/{pid}/stat").read_text()) / TICK


def _kind(name: str) -> str:
    """The kind of thread a name says: its trailing number dropped."""
    return re.sub(r"[ _-]?\d+$", "", name) or name


def thread_ticks(pid: int, main: str = MAIN) -> dict[int, tuple[str, int]]:
    """{thread id: (kind, CPU ticks)} for each live thread of `pid`; its first thread is
    named `main`."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended meanwhile
            tid = int(task.name)
            ticks = _ticks((task / "stat").read_text())
            name = main if tid == pid else _kind((task / "comm").read_text().strip())
            out[tid] = (name, ticks)
    return out


class ThreadClock:
    """CPU seconds per kind of thread of `pid` between `start()` and `stop()`; `total` is
    the process's own count over the same span."""

    def __init__(self, pid: int, main: str = MAIN) -> None:
        self.pid, self.main = pid, main
        self.by_kind: dict[str, float] = {}
        self.total = 0.0

    def start(self) -> ThreadClock:
        self._total = _ticks(Path(f"/proc/{self.pid}/stat").read_text())
        self._threads = thread_ticks(self.pid, self.main)
        return self

    def stop(self) -> ThreadClock:
        threads = thread_ticks(self.pid, self.main)
        total = _ticks(Path(f"/proc/{self.pid}/stat").read_text())
        by_kind: dict[str, int] = {}
        for tid, (name, ticks) in threads.items():
            used = ticks - self._threads.get(tid, (name, 0))[1]
            by_kind[name] = by_kind.get(name, 0) + used
        ended = (total - self._total) - sum(by_kind.values())
        if ended > 0:
            by_kind[ENDED] = ended
        self.by_kind = {name: ticks / TICK for name, ticks in by_kind.items() if ticks > 0}
        self.total = (total - self._total) / TICK
        return self

    def seconds(self, kind: str) -> float:
        return self.by_kind.get(kind, 0.0)

    def per_gib(self, size: int, largest: int = 5) -> str:
        """`kind s/GiB, …`: the busiest kinds per GiB of `size` bytes read, the first
        thread first."""
        gib = size / (1 << 30)
        kinds = sorted(self.by_kind.items(), key=lambda item: (item[0] != self.main, -item[1]))
        shown = [f"{name} {seconds / gib:.2f}" for name, seconds in kinds[:largest]]
        rest = sum(seconds for _, seconds in kinds[largest:])
        if rest:
            shown.append(f"others {rest / gib:.2f}")
        return f"{self.total / gib:.2f} s/GiB in all: " + ", ".join(shown)


def daemon_of(mountpoint: Path) -> int:
    """The pid of the zarrfs daemon serving `mountpoint`."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                args = (entry / "cmdline").read_bytes().split(b"\0")
                if str(mountpoint).encode() in args and any(b"zarrfs" in a for a in args):
                    return int(entry.name)
    raise RuntimeError(f"no daemon serves {mountpoint}")
