"""Temporary files of the local store's atomic writes that a killed process left behind
(SIGKILL between creating one and renaming it over its key). Their names say which host
and process wrote them, so that the next mount removes those of processes that are gone;
another host's are removed once a day old. Listings never show them either way."""

from __future__ import annotations

import contextlib
import logging
import os
import time

from .keys import HOST, TEMP_PREFIX
from .local_files import DIR_FLAGS, MAX_DEPTH, Root, directories, scan

log = logging.getLogger(__name__)

# a temporary file of another host (a shared filesystem), or of the old naming, is left
# alone until this old: a live writer on a shared filesystem may still rename it
OTHER_HOSTS_AFTER = 24 * 3600.0


def is_stale(name: str, mtime: float, now: float) -> bool:
    """Whether the temporary file `name` (last written at `mtime`) was left by a process
    that is gone: one of this host whose process no longer runs, or any once old."""
    host, _, rest = name[len(TEMP_PREFIX) :].rpartition(".")[0].rpartition(".")
    if host == HOST and rest.isdigit():
        try:
            os.kill(int(rest), 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # (another user's process: alive)
            return False
        return _zombie(int(rest))  # killed, not yet reaped (a namespace whose init reaps none)
    return now - mtime > OTHER_HOSTS_AFTER


def _zombie(pid: int) -> bool:
    """Whether process `pid` has ended and only waits to be reaped: it writes nothing more."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[:1] == [b"Z"]
    except OSError:
        return False


def remove_stale(root: Root) -> int:
    """Remove the stale temporary files below `root`; how many. Walks real directories
    only, MAX_DEPTH deep, as listings do: depth first, one descriptor open per level (not
    one per directory waiting its turn: a group of 20,000 arrays held 20,000 at once, up
    to the process's limit, and the mount's own reads failed EMFILE meanwhile)."""
    removed, now = 0, time.time()
    with directories(root, []) as fds:
        top = os.dup(fds[0])
    # (a directory open, the names of its directories still to visit)
    levels: list[tuple[int, list[str]]] = []
    directory: int | None = top
    while directory is not None or levels:
        if directory is not None:
            found, subdirectories = _sweep(directory, now, walk_on=len(levels) < MAX_DEPTH)
            removed += found
            levels.append((directory, subdirectories))
        directory = None
        parent, subdirectories = levels[-1]
        if not subdirectories:
            os.close(parent)
            levels.pop()
            continue
        with contextlib.suppress(OSError):
            directory = os.open(subdirectories.pop(), DIR_FLAGS, dir_fd=parent)
    return removed


def _sweep(directory: int, now: float, walk_on: bool) -> tuple[int, list[str]]:
    """Remove the stale temporary files in `directory`: how many, and the names of its
    directories (none unless `walk_on`)."""
    removed, subdirectories = 0, []
    try:
        for name, is_dir, info in scan(directory, with_info=True):
            if is_dir:
                if walk_on:
                    subdirectories.append(name)
            elif name.startswith(TEMP_PREFIX) and info is not None and is_stale(name, info.st_mtime, now):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=directory)
                    removed += 1
    except OSError as exc:
        log.debug("looking for stale temporary files: %s", exc)
    return removed, subdirectories
