"""The `zarrfs` command: mount (daemonized until the mount is ready), umount, info, stats,
demo. Also accepts the `zarrfs SOURCE MOUNTPOINT -o OPTS` form that mount.fuse3 uses for
fstab. What a running daemon needs (logs, pid file, notifications) is daemon.py.

This front end imports none of the libraries the filesystem runs on (numpy, pyfuse3,
trio, fsspec…): parsing, `umount` and `stats` never need them, and `mount` forks the
daemon first, which imports what its source needs (docs/reads.md, "Until the mount is ready")."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from .arguments import build_parser, mount_config, subcommand_parser, virtual_chunks
from .daemon import busy_holders, log_destination, mounts_at, namespace_holders, notify, pid_file, setup_logging

if TYPE_CHECKING:
    from .format import AnyHierarchy
    from .fs.mount import MountConfig

log = logging.getLogger(__name__)

_COMMANDS = {"mount", "umount", "info", "stats", "demo", "commit", "-h", "--help", "--version"}


def is_mounted(mountpoint: str) -> bool:
    return bool(mounts_at(os.path.realpath(mountpoint)))


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------------ mount
def _check_mountpoint(config: MountConfig, allow_non_empty: bool) -> str | None:
    if is_mounted(config.mountpoint):  # (first: a mount that fails its stat is still busy)
        return f"mountpoint {config.mountpoint} is busy: something is already mounted there"
    if not os.path.isdir(config.mountpoint):
        return f"mountpoint {config.mountpoint} does not exist or is not a directory"
    if not allow_non_empty and os.listdir(config.mountpoint):
        return f"mountpoint {config.mountpoint} is not empty (its files would be hidden); use --allow-non-empty"
    if not os.path.exists("/dev/fuse"):
        return "FUSE is not available: /dev/fuse is missing (install fuse3, load the fuse module)"
    return _check_source(config.source)


def _check_source(source: str) -> str | None:
    if "://" not in source and "::" not in source and not os.path.exists(source):
        return f"source {source} does not exist"
    return None


def cmd_mount(args: argparse.Namespace) -> int:
    config = mount_config(args)
    problem = _check_mountpoint(config, args.allow_non_empty)
    if problem:
        print(f"zarrfs: {problem}", file=sys.stderr)
        return 1
    destination = log_destination(args.log_file, args.foreground, config.mountpoint)
    if args.foreground:
        setup_logging(args.log_level, destination, True)
        return _serve(config, lambda: notify("READY=1"))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:  # parent: report how the mount went
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.read().decode(errors="replace")
        if message.startswith("ok"):
            if destination and not args.log_file:
                print(f"zarrfs: logging to {destination}", file=sys.stderr)
            return 0
        os.waitpid(pid, 0)
        print(f"zarrfs: {message.strip() or 'the daemon exited before the mount was ready'}", file=sys.stderr)
        return 1
    os.close(read_end)
    os.setsid()
    if os.fork():  # the session leader leaves; the daemon cannot reacquire a terminal
        os._exit(0)
    os.chdir("/")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    setup_logging(args.log_level, destination, False)

    def ready() -> None:
        notify("READY=1")
        os.write(write_end, b"ok\n")
        os.close(write_end)

    code = _serve(config, ready, report=lambda msg: os.write(write_end, msg.encode()))
    os._exit(code)


def _serve(config: MountConfig, ready: Callable[[], None], report: Callable[[str], object] | None = None) -> int:
    from .fs.mount import SourceError, build_core_soon, keep_freed_buffers, no_blas_threads
    from .fs.thread_names import name_os_threads

    pidfile = pid_file(config.mountpoint)
    try:
        with open(pidfile, "w") as f:
            f.write(str(os.getpid()))
        keep_freed_buffers()
        no_blas_threads()
        name_os_threads()
        from .fs.fuse.kernel import KernelState

        kernel = KernelState()
        # the source's requests wait on the network while the FUSE adapter is imported
        built = build_core_soon(config, kernel.core_hooks(storing=lambda left: _note_storing(pidfile, left)))
        from .fs.fuse.requests import AdapterOptions
        from .fs.fuse.session import serve

        core, cleanup = built()
        try:
            options = AdapterOptions(
                uid=config.uid, gid=config.gid, metadata_ttl=config.metadata_ttl, owner_given=config.owner_given
            )
            serve(
                core,
                kernel,
                config.mountpoint,
                config.fuse_options,
                options,
                ready,
                stopping=lambda: notify("STOPPING=1"),
                fsname=config.source,
            )
        finally:
            cleanup()
        return 0
    except SourceError as exc:
        log.error("%s", exc)
        (report or (lambda m: print(f"zarrfs: {m}", file=sys.stderr)))(str(exc))
        return 1
    except Exception as exc:  # e.g. FUSE refused the options; logged first: the pipe may be closed
        log.error("cannot mount %s: %s", config.mountpoint, exc, exc_info=exc)
        (report or (lambda m: print(f"zarrfs: {m}", file=sys.stderr)))(f"cannot mount: {exc}")
        return 1
    finally:
        for path in (pidfile, pidfile + ".storing"):
            with contextlib.suppress(OSError):
                os.unlink(path)


def _note_storing(pidfile: str, left: int) -> None:
    """While the daemon stores buffered writes at shutdown: how many bytes are left, for
    `zarrfs umount` to show."""
    with open(pidfile + ".storing", "w") as f:
        f.write(str(left))


# ----------------------------------------------------------------------- umount
def cmd_umount(args: argparse.Namespace) -> int:
    import subprocess

    mountpoint = os.path.abspath(args.mountpoint)
    if not is_mounted(mountpoint):
        print(f"zarrfs: nothing is mounted at {mountpoint}", file=sys.stderr)
        return 1
    pidfile = pid_file(mountpoint)
    try:
        with open(pidfile) as f:
            pid: int | None = int(f.read().strip())
    except (OSError, ValueError):
        pid = None
    dead = pid is not None and not process_alive(pid)
    result = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True, text=True, check=False)
    if result.returncode != 0 and dead:  # a dead mount that something still holds
        result = subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        held = busy_holders(mountpoint) if "busy" in result.stderr else []
        because = f"; held by {', '.join(held)}" if held else ""
        print(f"zarrfs: cannot unmount {mountpoint}: {result.stderr.strip()}{because}", file=sys.stderr)
        return 1
    if dead:
        print(f"zarrfs: the daemon (pid {pid}) had died; removed its dead mount at {mountpoint}")
        for path in (pidfile, pidfile + ".storing"):
            if os.path.exists(path):
                os.unlink(path)
        return 0
    code = _wait_for_daemon(pid, pidfile, args.timeout)
    if code and (holders := namespace_holders(mountpoint)):
        print(
            "zarrfs: other mount namespaces still hold a copy of the mount, so its daemon cannot end "
            f"until they let it go (`umount -l` there, or end them): {', '.join(holders)}",
            file=sys.stderr,
        )
    return code


def _wait_for_daemon(pid: int | None, pidfile: str, timeout: float) -> int:
    """Wait while the daemon stores what it holds; on a terminal, after a second, show how
    many bytes are left."""
    start = time.monotonic()
    shown = False
    while pid and process_alive(pid):
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            print(f"\nzarrfs: the daemon (pid {pid}) has not exited after {timeout:.0f}s", file=sys.stderr)
            return 1
        if elapsed > 1 and sys.stderr.isatty():
            try:
                with open(pidfile + ".storing") as f:
                    left = int(f.read() or 0)
                print(
                    f"\rzarrfs: storing buffered writes, {left / (1 << 20):.1f} MiB left ",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
                shown = True
            except (OSError, ValueError):
                pass
        time.sleep(0.05)
    if shown:
        print(file=sys.stderr)
    return 0


# ------------------------------------------------------------------ info, stats
def cmd_info(args: argparse.Namespace) -> int:
    from .format import FormatError
    from .fs.mount import MountConfig, SourceError, open_source
    from .store import IcechunkStore, StoreError, parse_storage_options
    from .store.urls import is_url
    from .views.info import InfoView
    from .views.neighbours import HierarchyNeighbours

    setup_logging(args.log_level, args.log_file, True)
    source = args.source if is_url(args.source) else os.path.abspath(args.source)
    problem = _check_source(source)
    if problem:
        print(f"zarrfs: {problem}", file=sys.stderr)
        return 1
    try:
        config = MountConfig(
            source=source,
            mountpoint="",
            read_only=True,
            ref=args.ref,
            snapshot=args.snapshot,
            virtual_chunks=virtual_chunks(args),
            storage_options=parse_storage_options(args.storage_option),
            s3_backend=args.s3_backend,
        )
        hierarchy, shutdown = open_source(config)
    except SourceError as exc:
        print(f"zarrfs: {exc}", file=sys.stderr)
        return 1
    try:
        if isinstance(hierarchy.store, IcechunkStore):  # which version of the repository this is
            print(f"# {hierarchy.store.version}")
        if args.node is not None:
            node_path = args.node.strip("/")
            neighbours = HierarchyNeighbours(hierarchy, node_path)
            print(InfoView(hierarchy.open_node(node_path), "/" + node_path, neighbours).text(), end="")
            return 0
        _print_tree(hierarchy, "", 0)
        return 0
    except (FormatError, StoreError) as exc:
        print(f"zarrfs: {exc}", file=sys.stderr)
        return 1
    finally:
        shutdown(False)


def _print_tree(hierarchy: AnyHierarchy, path: str, depth: int) -> None:
    """The tree, one node a line, its columns aligned (name, kind, data type, shape, chunks)."""
    rows: list[tuple[str, ...]] = []
    _tree_rows(hierarchy, path, depth, rows)
    widths = [max((len(row[i]) for row in rows if len(row) > i + 1), default=0) for i in range(5)]
    for row in rows:
        print("  ".join(cell.ljust(widths[i]) if i + 1 < len(row) else cell for i, cell in enumerate(row)))


def _tree_rows(hierarchy: AnyHierarchy, path: str, depth: int, rows: list[tuple[str, ...]]) -> None:
    from .format import Array, FormatError
    from .store.keys import join_path
    from .views.info_text import data_type_text

    try:
        node = hierarchy.open_node(path)
    except FormatError as exc:
        rows.append((f"{'  ' * depth}{path.rpartition('/')[2] or '/'}", f"[unreadable: {exc}]"))
        return
    name = path.rpartition("/")[2] or "/"
    if isinstance(node, Array):
        m = node.metadata
        shape, chunks = str(list(m.shape)), f"chunks {list(node.chunk_shape)}"
        rows.append((f"{'  ' * depth}{name}", "array", data_type_text(m.dtype), shape, chunks))
        return
    rows.append((f"{'  ' * depth}{name}{'/' if name != '/' else ''}", "group"))
    for child in hierarchy.children(path):
        _tree_rows(hierarchy, join_path(path, child), depth + 1, rows)


def cmd_stats(args: argparse.Namespace) -> int:
    mountpoint = os.path.abspath(args.mountpoint)
    if not is_mounted(mountpoint):
        print(f"zarrfs: nothing is mounted at {mountpoint}", file=sys.stderr)
        return 1
    try:
        with open(os.path.join(mountpoint, ".zarrfs", "stats")) as f:
            stats = json.load(f)
    except FileNotFoundError:
        print(
            f"zarrfs: {mountpoint} shows no /.zarrfs/stats (a passthrough mount: SIGUSR1 writes its "
            "counters to the log)",
            file=sys.stderr,
        )
        return 1
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:  # the daemon was killed: the kernel still holds its mount
            print(
                f"zarrfs: the daemon of {mountpoint} has died; `zarrfs umount` removes its dead mount", file=sys.stderr
            )
        else:
            print(f"zarrfs: cannot read the counters of {mountpoint}: {exc.strerror}", file=sys.stderr)
        return 1
    print(json.dumps(stats, indent=2, sort_keys=True))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import write_demo

    write_demo(args.directory)
    print(f"wrote the demo hierarchy to {args.directory}")
    return 0


# ----------------------------------------------------------------------- commit
# Icechunk: the daemon commits when its control file is written and fsynced, and the
# file then reads as the outcome (see zarrfs/fs/versions/commit.py).
def cmd_commit(args: argparse.Namespace) -> int:
    control = os.path.join(os.path.abspath(args.mountpoint), ".zarrfs", "commit")
    try:
        fd = os.open(control, os.O_RDWR)
    except FileNotFoundError:
        print(f"zarrfs: {args.mountpoint} is not a writable mount of an Icechunk branch", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"zarrfs: cannot commit {args.mountpoint}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        os.write(fd, args.message.encode())
        with contextlib.suppress(OSError):  # the outcome says why
            os.fsync(fd)
        outcome = os.pread(fd, 1 << 16, 0).decode(errors="replace").strip()
    finally:
        os.close(fd)
    word, _, rest = outcome.partition(" ")
    if word == "committed":
        print(rest)
        return 0
    if word == "unchanged":
        print(rest)
        print("zarrfs: nothing was staged", file=sys.stderr)
        return 0
    print(f"zarrfs: not committed, the changes stay staged: {outcome or 'no answer'}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    as_program = argv is None  # (not a caller in Python)
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] not in _COMMANDS and not argv[0].startswith("-"):
        argv.insert(0, "mount")  # mount.fuse3: zarrfs SOURCE MOUNTPOINT -o OPTS
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # refused by the command's own usage, with the option meant where one is near
        command = subcommand_parser(parser, args.command)
        options = [o for a in command._actions for o in a.option_strings]
        near = difflib.get_close_matches(unknown[0].partition("=")[0], options, n=1)
        command.error(f"unrecognized arguments: {' '.join(unknown)}" + (f" (did you mean {near[0]}?)" if near else ""))
    handler = {
        "mount": cmd_mount,
        "umount": cmd_umount,
        "info": cmd_info,
        "stats": cmd_stats,
        "demo": cmd_demo,
        "commit": cmd_commit,
    }[args.command]
    try:
        code = handler(args)
    except BrokenPipeError:  # `zarrfs info X | head`: the reader has gone, as for any filter
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + signal.SIGPIPE
    if as_program:
        _exit_at_once(code)
    return code


# Run as the program, a command has nothing left to do once it returns, and exits without
# the interpreter's finalization: Icechunk's runtime threads, still alive then, crashed it
# now and then (SIGABRT or SIGBUS after `info` of a repository had printed, about 1 exit in
# 50 with two at once on 2 cores). A foreground mount, as systemd runs it, returns only once
# it has unmounted and stored what it buffered; the daemon itself ends with os._exit.
def _exit_at_once(code: int) -> NoReturn:
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader has gone (as in main)
        code = 128 + signal.SIGPIPE
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def mount_helper(argv: list[str] | None = None) -> int:
    """`mount.fuse.zarrfs SOURCE MOUNTPOINT [-n] [-s] [-v] [-o OPTS]`, as mount(8) calls a
    helper for an fstab line of type `fuse.zarrfs`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    kept = [a for a in argv if a not in ("-n", "-s", "-v", "-f")]
    return main(["mount", *kept])


if __name__ == "__main__":
    sys.exit(main())
