"""The decoded core's start and end: the libraries imported ahead of the first request,
what it stores at unmount (every buffered write: the contents of files open for writing,
those that failed to store at their last close and whose node nothing changed since,
the pending chunks of `data`), and what it counts of itself for `zarrfs stats`."""

from __future__ import annotations

import errno
import logging
import resource
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import FsError, log_failure

if TYPE_CHECKING:
    from ...format import AnyHierarchy
    from ...format.pending import PendingWrites
    from .files import BufferFile

log = logging.getLogger(__name__)


def warm_up() -> None:
    """numpy (the first array opened needs it) and numcodecs (the first chunk decoded
    or encoded): 0.1-0.2 s of imports that the first `dd`, `cp` or `find` would
    otherwise wait for. These libraries only, never zarrfs's own modules, which a
    request's thread may be importing meanwhile: libraries that never import zarrfs
    cannot wait on it (no import deadlock)."""
    try:
        import numcodecs  # noqa: F401  (numpy with it)
    except Exception as exc:  # the first request that needs it says what is wrong
        log.debug("warming up: %s", exc)


def store_left(
    files: list[BufferFile],
    superseded: list[BufferFile],
    dirty: list[PendingWrites],
    storing: Callable[[int], None],
) -> None:
    """Store `files` and the `dirty` pending writes, telling `storing` the bytes left
    as it goes; each failure is logged, and so is each content of `superseded`, which is
    not stored: a content is never stored over a later write."""
    for file in superseded:
        log_failure(
            "flush at unmount",
            "/" + file.node_path,
            FsError(
                errno.EIO,
                "a content that failed to store at its close was not stored again: "
                "its node was written, erased or moved since",
            ),
        )
    left = sum(p.nbytes for p in dirty) + sum(f.size() for f in files if f.dirty)
    storing(left)
    for file in files:
        try:
            file.commit()
        except Exception as exc:  # e.g. a chunk file left short: not stored
            log_failure("flush at unmount", "/" + file.node_path, exc)
    for pending in dirty:
        left -= pending.nbytes
        try:
            pending.flush()
        except Exception as exc:
            log_failure("flush at unmount", "/" + pending.array.path + "/data", exc)
        storing(max(0, left))


def core_stats(
    hierarchy: AnyHierarchy, dirty: list[PendingWrites], tracked: int, session: dict[str, Any]
) -> dict[str, Any]:
    """The stats of a decoded core: the hierarchy's reads and cache, its store's requests,
    the adapter's `session` counters, the nodes `tracked` by the core's tables, the bytes
    of `dirty` pending writes, consolidated metadata written, the peak resident memory."""
    context = hierarchy.context
    stats: dict[str, Any] = {"bytes_fetched": 0, "bytes_stored": 0, "cache_hits": 0, "cache_misses": 0}
    stats.update(context.stats.snapshot())
    stats.update(getattr(hierarchy.store, "request_stats", dict)())
    stats.update(session)
    if context.cache is not None:
        stats["cache_bytes"] = context.cache.nbytes
        stats["cache_evictions"] = context.cache.evictions
    stats["nodes_tracked"] = tracked + sum(context.cache.table_sizes() if context.cache is not None else ())
    stats["dirty_bytes"] = sum(p.nbytes for p in dirty)
    if hierarchy.upkeep is not None:
        stats["consolidated_writes"] = hierarchy.upkeep.writes
        stats["consolidated_retries"] = hierarchy.upkeep.retries
    stats["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return stats
