"""Serving a core at a mountpoint: the FUSE session on one trio thread until unmounted
or signalled, then the core stores what it holds before the daemon exits."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable

import pyfuse3
import trio

from ...daemon import mounts_at
from ..core import FilesystemCore
from .adapter import FuseAdapter
from .kernel import KernelState
from .requests import AdapterOptions

log = logging.getLogger(__name__)

# the kernel's read requests grow with the FUSE device's readahead (docs/reads.md: "The device's readahead")
_READ_AHEAD_KB = 1024


def serve(
    core: FilesystemCore,
    kernel: KernelState,
    mountpoint: str,
    fuse_options: set[str],
    options: AdapterOptions,
    ready: Callable[[], None],
    stopping: Callable[[], None] = lambda: None,
    fsname: str = "zarrfs",
) -> None:
    """Mount and serve until unmounted, SIGTERM, SIGINT or SIGHUP; then let the core
    store what is buffered, and unmount. `kernel`: the state the core's hooks reach.
    Calls `ready` once the mount answers (the kernel's first request came), `stopping`
    when the daemon starts to shut down."""
    init_came = trio.Event()
    adapter = FuseAdapter(core, options, kernel, on_init=init_came.set)
    # mount(8) and df show fsname as the source; a comma would end the option
    fsname = fsname if "," not in fsname else "zarrfs"
    # an fsname or subtype given with -o replaces zarrfs's (libfuse would take either of two)
    given = {option.partition("=")[0] for option in fuse_options}
    defaults = {f"{name}={value}" for name, value in (("fsname", fsname), ("subtype", "zarrfs")) if name not in given}
    opts = set(pyfuse3.default_options) | defaults | set(fuse_options)
    if core.read_only:
        opts.add("ro")
    target = os.path.realpath(mountpoint)
    pyfuse3.init(adapter, mountpoint, opts)
    clean = False
    try:
        log.info("mounted %s at %s", fsname, mountpoint)
        trio.run(_main, adapter, init_came, target, ready, stopping)
        clean = True
    finally:
        pyfuse3.close(unmount=True)
        log.info("unmounted %s%s", mountpoint, "" if clean else " after an error")


async def _main(
    adapter: FuseAdapter,
    init_came: trio.Event,
    target: str,
    ready: Callable[[], None],
    stopping: Callable[[], None],
) -> None:
    # the signal receivers live until the core has stored what it holds: a SIGUSR1, or a
    # second SIGTERM, during the final flush must not kill the daemon (default action)
    async with trio.open_nursery() as signals:
        await signals.start(_stop_on_signal, adapter, stopping)
        await signals.start(_dump_on_signal, adapter)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_ready_after_init, init_came, target, ready, adapter.core.warm_up)
                await pyfuse3.main()
                nursery.cancel_scope.cancel()
        finally:
            stopping()  # (a second time after SIGTERM: harmless)
            with trio.CancelScope(shield=True):
                await adapter.shutdown()  # even after an error: store what is buffered
            signals.cancel_scope.cancel()


async def _ready_after_init(
    init_came: trio.Event, target: str, ready: Callable[[], None], warm_up: Callable[[], None]
) -> None:
    """The kernel lowers the device's readahead to what FUSE's INIT reply says, and a file
    keeps the readahead it was opened with: so raise it once that reply has gone (the
    session loop writes it before this task runs again), and only then say the mount is
    ready, lest a reader that opens at once get 128 KiB reads for good. Then the core
    warms up on a thread of its own (the mount answers meanwhile)."""
    await init_came.wait()
    try:
        _set_read_ahead(target)
    except Exception as exc:  # a speed-up only: the mount must still say it is ready
        log.warning("read_ahead_kb unchanged: %s", exc)
    ready()
    log.info("ready: %s answers", target)
    threading.Thread(target=warm_up, name="zarrfs-warm-up", daemon=True).start()


async def _stop_on_signal(
    adapter: FuseAdapter, stopping: Callable[[], None], task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        task_status.started()
        stopped = False
        async for signum in signals:
            if stopped:  # kept, not restored to the default: that would kill the flush
                log.info("signal %s: already unmounting", signal.Signals(signum).name)
                continue
            stopped = True
            log.info("signal %s: unmounting", signal.Signals(signum).name)
            stopping()
            await adapter.quiesce()
            pyfuse3.terminate()


async def _dump_on_signal(adapter: FuseAdapter, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """SIGUSR1: the counters and every thread's stack, to the log."""
    with trio.open_signal_receiver(signal.SIGUSR1) as signals:
        task_status.started()
        async for _ in signals:
            log.warning("SIGUSR1: counters %s", json.dumps(adapter.core.stats(), sort_keys=True))
            threads = {t.ident: t for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                stack = "".join(traceback.format_stack(frame)).rstrip()
                thread = threads.get(ident)
                name, native = (thread.name, thread.native_id) if thread else ("?", "?")
                if ident == threading.get_ident():  # (after the fork, the main thread's native_id is its parent's)
                    native = threading.get_native_id()
                log.warning("SIGUSR1: thread %s (%s, native %s):\n%s", name, ident, native, stack)


def _set_read_ahead(target: str) -> None:
    """Raise the FUSE device's readahead so the kernel sends larger reads. `target` is the
    mountpoint's real path, resolved before mounting: the daemon must never touch its own
    mountpoint once mounted (a stat would wait on itself)."""
    try:
        for fields in mounts_at(target):
            if fields[fields.index("-") + 1].startswith("fuse"):  # the file system type
                with open(f"/sys/class/bdi/{fields[2]}/read_ahead_kb", "w") as ra:
                    ra.write(str(_READ_AHEAD_KB))
    except OSError as exc:  # not root, or no sysfs: the kernel default stays
        log.debug("read_ahead_kb unchanged: %s", exc)
