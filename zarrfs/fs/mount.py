"""Open a source and serve it at a mountpoint until unmounted or signalled."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import pyfuse3
import trio

from ..format import ChunkCache, Group, Hierarchy, IOContext, open_hierarchy
from ..store import open_store
from .operations import MountOptions, ZarrOperations
from .tree import Tree

log = logging.getLogger("zarrfs")

# the kernel's read requests grow with the FUSE device's readahead (see README: benchmarks)
_READ_AHEAD_KB = 1024


# glibc's mallopt parameters
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


class SourceError(Exception):
    """The source cannot be mounted: missing, unreachable, or not a Zarr hierarchy."""


@dataclass
class MountConfig:
    source: str
    mountpoint: str
    read_only: bool = False
    storage_options: dict = field(default_factory=dict)
    cache_size: int = 512 << 20
    metadata_ttl: float = 10.0
    consolidated: str = "auto"
    raw: bool = False
    fuse_options: set = field(default_factory=set)
    uid: int = os.getuid()
    gid: int = os.getgid()


def open_source(config: MountConfig) -> tuple[Hierarchy, ThreadPoolExecutor]:
    """The hierarchy to serve; raises SourceError when there is none."""
    try:
        store = open_store(config.source, config.storage_options, read_only=config.read_only)
    except Exception as exc:
        raise SourceError(f"cannot open {config.source}: {exc}") from None
    executor = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="zarrfs-codec")
    context = IOContext(executor=executor, cache=ChunkCache(config.cache_size))
    try:
        hierarchy = open_hierarchy(store, context, consolidated=config.consolidated, metadata_ttl=config.metadata_ttl)
        root = hierarchy.open_node("")
        if isinstance(root, Group) and root.implicit and not hierarchy.children(""):
            raise SourceError(f"{config.source} is not a Zarr hierarchy (no zarr.json, .zgroup or .zarray found)")
    except SourceError:
        executor.shutdown(wait=False)
        raise
    except Exception as exc:
        executor.shutdown(wait=False)
        raise SourceError(f"cannot read {config.source}: {exc}") from None
    return hierarchy, executor


def _set_read_ahead(target: str) -> None:
    """Raise the FUSE device's readahead so the kernel sends larger reads. `target` is the
    mountpoint's real path, resolved before mounting: the daemon must never touch its own
    mountpoint once mounted (a stat would wait on itself)."""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if fields[4] == target and " - fuse" in line:
                    with open(f"/sys/class/bdi/{fields[2]}/read_ahead_kb", "w") as ra:
                        ra.write(str(_READ_AHEAD_KB))
    except OSError as exc:  # not root, or no sysfs: the kernel default stays
        log.debug("read_ahead_kb unchanged: %s", exc)


def keep_freed_buffers() -> None:
    """Let the daemon reuse the memory of freed chunk buffers. glibc's default maps each
    large buffer fresh and returns it to the kernel when freed, so every decoded chunk and
    every fetched one paid for zero-filled pages: a fifth of the cold-read CPU time here.
    What is kept is bounded by the peak use, which the chunk cache bounds."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's maximum: larger buffers are still mapped
        libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20)
    except (OSError, AttributeError):  # not glibc: its defaults stay
        log.debug("mallopt unavailable")


def decoded_operations(config: MountConfig) -> tuple[ZarrOperations, Callable[[], None]]:
    """Operations for the decoded tree, and what to call once unmounted."""
    hierarchy, executor = open_source(config)
    format_read_only = getattr(hierarchy, "read_only", False)
    if format_read_only and not config.read_only:
        log.info("mounting read-only: %s", hierarchy.read_only_reason)
    options = MountOptions(
        read_only=config.read_only or hierarchy.store.read_only or format_read_only,
        uid=config.uid, gid=config.gid, metadata_ttl=config.metadata_ttl,
    )
    ops: ZarrOperations
    tree = Tree(hierarchy, config.metadata_ttl, lambda: ops.stats())
    ops = ZarrOperations(tree, options)
    return ops, lambda: executor.shutdown(wait=True)


def serve(config: MountConfig, ready: Callable[[], None]) -> None:
    """Mount and serve until unmounted, SIGTERM or SIGINT; then let the operations finish
    (flush what is dirty) and unmount. Calls `ready` once the mount is visible. Raises
    SourceError before mounting when the source cannot be served."""
    keep_freed_buffers()
    if config.raw:
        from .raw import raw_operations

        ops, cleanup = raw_operations(config)
    else:
        ops, cleanup = decoded_operations(config)
    # mount(8) and df show fsname as the source; a comma would end the option
    fsname = config.source if "," not in config.source else "zarrfs"
    fuse_options = set(pyfuse3.default_options) | {f"fsname={fsname}", "subtype=zarrfs"} | config.fuse_options
    if ops.options.read_only:
        fuse_options.add("ro")
    target = os.path.realpath(config.mountpoint)
    pyfuse3.init(ops, config.mountpoint, fuse_options)
    clean = False
    try:
        log.info("mounted %s at %s", config.source, config.mountpoint)
        ready()
        trio.run(_main, ops, target)
        clean = True
    finally:
        pyfuse3.close(unmount=True)
        cleanup()
        log.info("unmounted %s%s", config.mountpoint, "" if clean else " after an error")


async def _main(ops, target: str) -> None:
    try:
        async with trio.open_nursery() as nursery:
            ops.nursery = nursery
            nursery.start_soon(_stop_on_signal, ops)
            nursery.start_soon(_raise_read_ahead, target)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()
    finally:
        ops.nursery = None
        await ops.shutdown()  # even after an error: store what is buffered


async def _raise_read_ahead(target: str) -> None:
    """The kernel takes the readahead from FUSE's INIT reply, which the session loop sends
    once it runs: raise it after that (and again, should INIT have come late)."""
    for delay in (0.05, 0.25, 1.0):
        await trio.sleep(delay)
        _set_read_ahead(target)


async def _stop_on_signal(ops) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("signal %s: unmounting", signal.Signals(signum).name)
            await ops.quiesce()
            pyfuse3.terminate()
            return
