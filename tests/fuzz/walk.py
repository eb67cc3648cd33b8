"""One generated store through the kernel-free decoded core, as the daemon builds it
(fs/mount.py build_core): every directory listed, every file looked up, opened and read,
each node's extended attributes asked, then the valid arrays read and compared with what
zarr-python read of them. Whatever fails must fail as the adapter would answer it: one of
the documented errno values from one of the layers' own exceptions; any other exception
is a bug. The store must be left as it was (reading writes nothing), and the walk must end
by its deadline with the process's peak memory within bounds."""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz.stores import Case, zarr_reads
from zarrfs.format import FormatError
from zarrfs.fs.core import FilesystemCore
from zarrfs.fs.errors import FsError, errno_for
from zarrfs.fs.mount import MountConfig, SourceError, build_core
from zarrfs.store import StoreError

# docs/errors.md: what a reader of a broken store may be answered
ALLOWED = {errno.ENOENT, errno.EIO, errno.EINVAL, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ETIMEDOUT,
           errno.EACCES, errno.ENODATA}  # fmt: skip
LISTED = 64  # entries of one directory walked (chunk grids can be huge)
WALKED = 600  # paths walked per store
READ = 128 << 10  # bytes read of one file, from its start and before its end (a kernel read's most)
STORE_TIMEOUT = 5.0  # --timeout of the generated mounts
DEADLINE = 120.0  # a walk that has not ended by then hangs
MEMORY = 512 << 20  # peak resident memory a store may add to the process's


@dataclass
class Report:
    """What a walk found wrong (empty: nothing), and what it did."""

    problems: list[str] = field(default_factory=list)
    calls: int = 0
    failures: dict[int, int] = field(default_factory=dict)  # errno -> times

    def failed(self, what: str, exc: BaseException) -> None:
        code = errno_for(exc)
        if not isinstance(exc, (FsError, FormatError, StoreError, OSError)):
            self.problems.append(f"{what}: unexpected {type(exc).__name__}: {exc}"[:400])
        elif code not in ALLOWED:
            self.problems.append(f"{what}: {errno.errorcode.get(code, code)} ({type(exc).__name__}: {exc})"[:400])
        self.failures[code] = self.failures.get(code, 0) + 1


def _call(report: Report, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    report.calls += 1
    try:
        return fn(*args)
    except Exception as exc:
        report.failed(what, exc)
        return None


def _read_file(core: FilesystemCore, report: Report, path: str) -> None:
    attributes = _call(report, f"lookup {path}", core.lookup, path)
    file = _call(report, f"open {path}", core.open, path, os.O_RDONLY)
    if file is None:
        return
    try:
        size = attributes.size if attributes is not None else 0
        head = _call(report, f"read {path}", file.read, 0, READ)
        if head is not None and not file.direct_io and len(head) != min(size, READ):
            report.problems.append(f"read {path}: {len(head)} bytes where its size says {size}")
        if size > READ:
            tail = _call(report, f"read {path} at {size - READ}", file.read, size - READ, READ)
            if tail is not None and not file.direct_io and len(tail) != READ:
                report.problems.append(f"read {path} at its end: {len(tail)} bytes of {READ}")
    finally:
        _call(report, f"release {path}", file.release)


def _walk(core: FilesystemCore, report: Report, start: str) -> None:
    todo, walked = [start], 0
    while todo and walked < WALKED:
        path = todo.pop()
        walked += 1
        entries = _call(report, f"list {path!r}", lambda p: list(_first(core.list_dir(p), LISTED)), path)
        _call(report, f"xattrs {path!r}", core.xattrs, path)
        for name, attributes in entries or []:
            child = f"{path}/{name}" if path else name
            if attributes.is_dir:
                todo.append(child)
            else:
                walked += 1
                _read_file(core, report, child)


def _first(entries: Any, count: int) -> Any:
    for i, entry in enumerate(entries):
        if i == count:
            return
        yield entry


def _check_arrays(core: FilesystemCore, report: Report, expected: dict[str, bytes], strict: bool) -> None:
    """`strict`: the arrays are valid, and must read; else they may fail (zarrfs may refuse
    what zarr-python reads: a checksum, an oversized chunk), but never read otherwise."""
    for path, value in expected.items():
        try:
            file = core.open(f"{path}/data", os.O_RDONLY)
            try:
                read = file.read(0, len(value) + 1)
            finally:
                file.release()
        except Exception as exc:
            report.failed(f"read {path}/data", exc)
            if strict:
                report.problems.append(f"{path}: a valid array does not read ({type(exc).__name__}: {exc})"[:400])
            continue
        if read != value:
            report.problems.append(
                f"{path}: reads {bytes(read)[:24]!r}… ({len(read)} bytes), zarr-python {value[:24]!r}… ({len(value)})"
            )


def walk_core(case: Case, mountpoint: Path, zarr_read: dict[str, bytes]) -> Report:
    """Mount `case` kernel-free, walk it and check it; the report says what went wrong."""
    report = Report()
    before = _snapshot(case.store)
    config = MountConfig(str(case.source), str(mountpoint), timeout=STORE_TIMEOUT, memory_target=256 << 20,
                         cache_size=64 << 20)  # fmt: skip
    try:
        core, cleanup = build_core(config)
    except SourceError:  # `zarrfs mount` refuses it, with one line
        report.failures[-1] = 1
        return report
    except Exception as exc:
        report.failed("mount", exc)
        return report
    try:
        for start in ("", ".zarrfs"):
            _walk(core, report, start)
        _check_arrays(core, report, case.expected(), strict=True)
        _check_arrays(core, report, zarr_read, strict=False)
    finally:
        _call(report, "shutdown", core.shutdown)
        _call(report, "close", cleanup)
    if _snapshot(case.store) != before:
        report.problems.append("the store changed under a walk that only read")
    return report


def _snapshot(directory: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry below `directory`, links not followed: its type and mode, size, inode
    and times of change (a write, truncate, chmod, link or rename changes its st_ctime,
    or its directory's), and link targets. (Reading every byte before and after each walk
    cost the harness as much as a tenth of the walk.)"""
    out: dict[str, tuple[Any, ...]] = {}
    todo, start = [str(directory)], len(str(directory)) + 1
    while todo:
        with os.scandir(todo.pop()) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                if entry.is_symlink():
                    out[entry.path[start:]] = ("->", os.readlink(entry.path))
                    continue
                out[entry.path[start:]] = (info.st_mode, info.st_size, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
    return out


def walk_within_limits(case: Case, mountpoint: Path) -> Report:
    """walk_core on a thread of its own, failing past DEADLINE or past MEMORY more peak."""
    outcome: list[Any] = []
    zarr_read = zarr_reads(case)  # (before the walk: its memory is not the mount's)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10

    def run() -> None:
        try:
            outcome.append(walk_core(case, mountpoint, zarr_read))
        except BaseException as exc:  # (reported below)
            outcome.append(exc)

    thread = threading.Thread(target=run, name="fuzz-walk", daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if not outcome:
        return Report([f"the walk did not end within {DEADLINE} s"])
    if isinstance(outcome[0], BaseException):
        return Report([f"the walk failed: {type(outcome[0]).__name__}: {outcome[0]}"])
    report = outcome[0]
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10) - peak
    if grown > MEMORY:
        report.problems.append(f"the process's peak memory grew by {grown >> 20} MiB")
    return report
