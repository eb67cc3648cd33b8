"""From a mount's configuration to the filesystem core that serves it: the source opened
(a hierarchy for the decoded tree, a store for passthrough), the caches and threads it
needs, and what to call once the daemon is done with it.

The command line reads MountConfig before it forks the daemon, so this module imports
nothing at first: the store, format and core modules come with the first source opened,
and only the core the mount asks for (passthrough, decoded, Icechunk versions)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..defaults import METADATA_TTL, STORE_TIMEOUT
from .budget import MemoryBudget

if TYPE_CHECKING:
    from ..format import AnyHierarchy, IOContext
    from ..store import Store
    from .core import FilesystemCore
    from .decoded.core import DecodedCore
    from .hooks import CoreHooks

log = logging.getLogger(__name__)

# store requests in flight at once: an object store answers many in parallel, each after
# a round trip; a local disk gains little past a few
IO_REQUESTS_REMOTE = 32
IO_REQUESTS_LOCAL = 4
# --cache-dir-size: a fixed bound (rclone's --vfs-cache-max-size has none by default)
DISK_CACHE_SIZE = 10 << 30
# decoded shard indexes kept (16 bytes per inner chunk)
SHARD_INDEX_CACHE = 64 << 20
# glibc's mallopt parameters
_M_ARENA_MAX = -8
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4


class SourceError(Exception):
    """The source cannot be mounted: missing, unreachable, or not a Zarr hierarchy."""


@dataclass
class MountConfig:
    source: str
    mountpoint: str
    read_only: bool = False
    storage_options: dict[str, Any] = field(default_factory=dict)
    # the daemon's memory budget (--memory-target), shared out by MemoryBudget; the
    # chunk cache's share given (--cache-size), or None: the budget's
    memory_target: int = 1 << 30
    cache_size: int | None = None
    metadata_ttl: float = METADATA_TTL
    consolidated: str = "auto"
    raw: bool = False
    server_modtime: bool = False  # --raw on an object store: no user metadata read or changed
    fuse_options: set[str] = field(default_factory=set)
    uid: int = os.getuid()
    gid: int = os.getgid()
    owner_given: bool = False  # -o uid= or gid= given: every file shows that owner
    timeout: float = STORE_TIMEOUT  # seconds, per store call, retries included
    ref: str | None = None  # Icechunk: the branch or tag the root shows
    snapshot: str | None = None  # Icechunk: the snapshot the root shows
    virtual_chunks: dict[str, dict[str, Any]] = field(
        default_factory=dict
    )  # the containers read, each with its storage options
    cache_dir: str | None = None  # where chunks of a remote store are kept between sessions
    cache_dir_size: int = DISK_CACHE_SIZE
    cache_validate: str = "metadata"  # when a kept chunk is checked against the store: never, metadata, always
    s3_backend: str = "auto"  # which client serves s3:// sources: auto, obstore, s3fs
    commit_every: float | None = None  # Icechunk: seconds between commits of what is staged

    @property
    def memory(self) -> MemoryBudget:
        return MemoryBudget.of(self.memory_target, self.cache_size)


def _open_store(config: MountConfig) -> Store:
    from ..store import open_store

    try:
        store = open_store(
            config.source,
            config.storage_options,
            read_only=config.read_only,
            timeout=config.timeout,
            ref=config.ref,
            snapshot=config.snapshot,
            s3_backend=config.s3_backend,
            virtual_chunks=config.virtual_chunks,
        )
    except Exception as exc:
        raise SourceError(f"cannot open {config.source}: {exc}") from None
    store.limit_uploads(config.memory.upload_parts)
    return _with_disk_cache(store, config) if config.cache_dir else store


def _with_disk_cache(store: Store, config: MountConfig) -> Store:
    """The store with its chunks kept in --cache-dir. Only object stores and web servers
    have one: a local store is on disk already, and the keys of Icechunk repositories and
    references do not name the same bytes from one session to the next."""
    from ..format.metadata import is_metadata_key
    from ..store import DiskCache, FsspecStore, ObstoreStore

    if not (isinstance(store, (FsspecStore, ObstoreStore)) and store.remote):
        raise SourceError(
            f"--cache-dir keeps chunks of object stores and web servers (s3://, gs://, https://); "
            f"{config.source} is not one"
        )
    assert config.cache_dir is not None  # (called only with one)
    directory = os.path.realpath(config.cache_dir)
    mountpoint = os.path.realpath(config.mountpoint)
    if os.path.commonpath([directory, mountpoint]) == mountpoint:
        raise SourceError(f"the cache directory {directory} lies inside the mountpoint")
    try:
        validate_after = {"never": None, "metadata": config.metadata_ttl, "always": 0.0}[config.cache_validate]
        return DiskCache(
            store, directory, config.cache_dir_size, uncached=is_metadata_key, validate_after=validate_after
        )
    except OSError as exc:
        raise SourceError(f"cannot use the cache directory {directory}: {exc}") from None


def open_source(config: MountConfig) -> tuple[AnyHierarchy, Callable[[bool], None]]:
    """The hierarchy to serve, and what shuts its thread pools down (wait or not);
    raises SourceError when there is none."""
    from ..format import ChunkCache, Group, IOContext, open_hierarchy
    from ..format.context import codec_executor, io_executor
    from ..store import UnansweredFetches

    store = _open_store(config)
    codec = codec_executor(max(2, os.cpu_count() or 2))
    remote = store.remote
    io = io_executor(IO_REQUESTS_REMOTE if remote else IO_REQUESTS_LOCAL)
    context = IOContext(
        executor=codec,
        cache=ChunkCache(config.memory.chunk_cache),
        io_executor=io,
        # a shard rewritten by another writer is read with a fresh index
        # within the ttl, as its metadata would be
        shard_indexes=ChunkCache(SHARD_INDEX_CACHE, max_age=config.metadata_ttl),
        outputs_ahead=remote,
        unanswered=UnansweredFetches(config.timeout),
    )

    def shutdown(wait: bool) -> None:
        io.shutdown(wait=wait)
        codec.shutdown(wait=wait)

    try:
        hierarchy = open_hierarchy(store, context, consolidated=config.consolidated, metadata_ttl=config.metadata_ttl)
        root = hierarchy.open_node("")
        if isinstance(root, Group) and root.implicit and not hierarchy.children(""):
            raise SourceError(f"{config.source} is not a Zarr hierarchy (no zarr.json, .zgroup or .zarray found)")
        hierarchy.keep_fetched("", dict(root.documents))  # the tree's first look at the root: no GET again
    except SourceError:
        shutdown(False)
        raise
    except Exception as exc:
        shutdown(False)
        raise SourceError(f"cannot read {config.source}: {exc}") from None
    return hierarchy, shutdown


def no_blas_threads() -> None:
    """The daemon does no linear algebra, but numpy's OpenBLAS starts a thread per core at
    import, and they spin a while at the first array read: about 0.1 CPU-second of the two
    cores a cold read needs. A user's own setting stands."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def keep_freed_buffers() -> None:
    """Let the daemon reuse the memory of freed chunk buffers. glibc's default maps each
    large buffer fresh and returns it to the kernel when freed, so every decoded chunk and
    every fetched one paid for zero-filled pages: a fifth of the cold-read CPU time here.
    What is kept is bounded by the peak use, which the chunk cache bounds. One arena for
    all threads: a buffer freed by one thread (a shard the I/O stage fetched, freed once
    the codec pool decoded it) is reused by the next, where per-thread arenas gave and
    took memory back each on its own (sharded dd on S3: 0.70-0.78 s against 0.80-0.94 s,
    a fifth less daemon CPU and a lower peak)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's maximum for mapping a buffer of its own
        libc.mallopt(_M_MMAP_MAX, 0)  # and none mapped at all: a band (64 MiB) reuses a freed one's pages
        libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
        libc.mallopt(_M_ARENA_MAX, 1)
    except (OSError, AttributeError):  # not glibc: its defaults stay
        log.debug("mallopt unavailable")


def build_core_soon(
    config: MountConfig, hooks: CoreHooks | None = None
) -> Callable[[], tuple[FilesystemCore, Callable[[], None]]]:
    """Start `build_core` on a thread of its own; the function returned waits for it and
    returns or raises what it did. Opening a remote source is mostly waiting for its
    first requests, which then overlaps whatever the caller does meanwhile."""
    outcome: list[tuple[tuple[FilesystemCore, Callable[[], None]] | None, BaseException | None]] = []

    def build() -> None:
        try:
            outcome.append((build_core(config, hooks), None))
        except BaseException as exc:  # handed to the caller, who reports it
            outcome.append((None, exc))

    thread = threading.Thread(target=build, name="zarrfs-open", daemon=True)
    thread.start()

    def result() -> tuple[FilesystemCore, Callable[[], None]]:
        thread.join()
        value, error = outcome[0]
        if error is not None:
            raise error
        assert value is not None  # (built, since nothing was raised)
        return value

    return result


def remove_stale_temporaries_soon(store: Store) -> None:
    """Remove in the background what killed mounts left in the store: a local store's
    temporary files (a SIGKILL between a write and its rename), an object store's
    multipart uploads (store/pending_uploads.py)."""
    if store.read_only or not hasattr(store, "remove_stale_temporaries"):
        return

    def remove() -> None:
        try:
            removed = store.remove_stale_temporaries()
        except Exception as exc:  # (a store that vanished, or is unreadable: nothing to clean)
            log.debug("stale temporary files not removed: %s", exc)
            return
        if removed:
            log.info("removed %d temporary files or uploads that killed writers left in the store", removed)

    threading.Thread(target=remove, name="zarrfs-stale-temporaries", daemon=True).start()


def build_core(config: MountConfig, hooks: CoreHooks | None = None) -> tuple[FilesystemCore, Callable[[], None]]:
    """The core that serves `config`, and what to call once the daemon is done with it;
    `hooks`: what it tells the side that serves it (none: nothing). Raises SourceError
    when the source cannot be served."""
    from ..store import IcechunkStore
    from .hooks import NO_HOOKS
    from .spool import spool_directory

    hooks = hooks or NO_HOOKS

    try:
        spool_dir = spool_directory(config.mountpoint)
    except ValueError as exc:
        raise SourceError(str(exc)) from None
    if config.raw:
        from ..store import UnansweredFetches
        from .passthrough.core import PassthroughCore

        store = _open_store(config)
        try:
            store.list_dir("")
        except Exception as exc:
            raise SourceError(f"cannot open {config.source}: {exc}") from None
        if not config.read_only:
            remove_stale_temporaries_soon(store)
        # an Icechunk repository's keys are shown, never staged: --raw has no commit
        read_only = config.read_only or store.read_only or isinstance(store, IcechunkStore)
        raw = PassthroughCore(
            store,
            read_only=read_only,
            metadata_ttl=config.metadata_ttl,
            spool_dir=spool_dir,
            readahead_memory=config.memory.readahead,
            metadata_memory=config.memory.metadata,
            unanswered=UnansweredFetches(config.timeout),
            object_meta=not (config.server_modtime and store.remote),
            hooks=hooks,
        )
        return raw, raw.close
    from .decoded.core import DecodedCore

    hierarchy, shutdown = open_source(config)
    if not config.read_only:
        remove_stale_temporaries_soon(hierarchy.store)
    format_read_only = hierarchy.read_only
    if format_read_only and not config.read_only:
        log.info("mounting read-only: %s", hierarchy.read_only_reason)
    decoded = DecodedCore(
        hierarchy,
        read_only=config.read_only or hierarchy.store.read_only or format_read_only,
        metadata_ttl=config.metadata_ttl,
        spool_dir=spool_dir,
        dirty_limit=config.memory.write_buffers,
        scratch_limit=config.memory.scratch_files,
        metadata_limit=config.memory.metadata,
        hooks=hooks,
    )
    core: FilesystemCore = decoded
    if isinstance(hierarchy.store, IcechunkStore):
        from .versions.core import VersionsCore

        core = VersionsCore(
            decoded,
            hierarchy.store,
            lambda store: _version_core(store, config, hierarchy.context, hooks),
            metadata_ttl=config.metadata_ttl,
            commit_every=config.commit_every,
            hooks=hooks,
        )

    def cleanup() -> None:
        core.close()
        shutdown(True)

    return core, cleanup


def _version_core(store: Store, config: MountConfig, root: IOContext, hooks: CoreHooks) -> DecodedCore:
    """A read-only decoded tree of one more version of an Icechunk repository, on the root
    tree's thread pools; several are kept, so each caches an eighth of what the root's may.
    It changes nothing: of the root's hooks it takes the session's counters alone."""
    from ..format import ChunkCache, IOContext, open_hierarchy
    from ..store import UnansweredFetches
    from .decoded.core import DecodedCore
    from .hooks import CoreHooks

    context = IOContext(
        executor=root.executor,
        cache=ChunkCache(config.memory.chunk_cache // 8),
        io_executor=root.io_executor,
        shard_indexes=ChunkCache(SHARD_INDEX_CACHE // 8),
        unanswered=None if root.unanswered is None else UnansweredFetches(root.unanswered.deadline),
    )
    hierarchy = open_hierarchy(store, context, consolidated=config.consolidated, metadata_ttl=config.metadata_ttl)
    return DecodedCore(
        hierarchy,
        read_only=True,
        metadata_ttl=config.metadata_ttl,
        hooks=CoreHooks(session_stats=hooks.session_stats),
    )
