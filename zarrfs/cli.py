"""The `zarrfs` command: mount (daemonized until the mount is ready), umount, info, demo.
Also accepts the `zarrfs SOURCE MOUNTPOINT -o OPTS` form that mount.fuse3 uses for fstab."""

from __future__ import annotations

import argparse
import hashlib
import logging
import logging.handlers
import os
import subprocess
import sys
import time

from . import __version__

log = logging.getLogger("zarrfs")

_COMMANDS = {"mount", "umount", "info", "demo", "-h", "--help", "--version"}
# FUSE options that libfuse accepts but that break the session once mounted
_REFUSED_OPTIONS = {"max_read": "libfuse 3 refuses a read size that differs from the kernel's"}
# mount(8) options that mean nothing to FUSE
_IGNORED_OPTIONS = {"rw", "defaults", "auto", "noauto", "nofail", "user", "users", "dev", "nodev",
                    "suid", "nosuid", "exec", "noexec", "atime", "noatime", "relatime"}


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    text = text.strip().lower().removesuffix("ib").removesuffix("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zarrfs", description="Mount a Zarr hierarchy as a filesystem.")
    parser.add_argument("--version", action="version", version=f"zarrfs {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    m = sub.add_parser("mount", help="mount SOURCE at MOUNTPOINT (returns once the mount is ready)")
    m.add_argument("source")
    m.add_argument("mountpoint")
    m.add_argument("-f", "--foreground", action="store_true", help="stay in the foreground")
    m.add_argument("--raw", action="store_true", help="passthrough mode: the store's keys as files")
    m.add_argument("--read-only", action="store_true", help="refuse every write (EROFS)")
    m.add_argument("-o", dest="options", action="append", default=[], metavar="OPTS",
                   help="mount options: allow_other, default_permissions, uid=N, gid=N, ro, …")
    m.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="passed to fsspec (repeatable)")
    m.add_argument("--cache-size", type=_size, default=512 << 20, help="decoded-chunk cache (default 512MiB)")
    m.add_argument("--metadata-ttl", type=float, default=10.0,
                   help="seconds metadata may be served from cache (default 10)")
    m.add_argument("--consolidated", choices=("auto", "never"), default="auto")
    _logging_arguments(m)

    u = sub.add_parser("umount", help="flush, unmount and wait for the daemon to exit")
    u.add_argument("mountpoint")
    u.add_argument("--timeout", type=float, default=60.0)

    i = sub.add_parser("info", help="print the tree, or one node's info, without mounting")
    i.add_argument("source")
    i.add_argument("node", nargs="?")
    i.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE")
    _logging_arguments(i)

    d = sub.add_parser("demo", help="write the built-in demo hierarchy into DIR")
    d.add_argument("directory")
    return parser


def _logging_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-level", default="WARNING", type=str.upper,
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.add_argument("--log-file")


def setup_logging(level: str, log_file: str | None, foreground: bool) -> None:
    if log_file:
        handler: logging.Handler = logging.FileHandler(log_file)
    elif foreground:
        handler = logging.StreamHandler(sys.stderr)
    elif os.path.exists("/dev/log"):
        handler = logging.handlers.SysLogHandler("/dev/log")
    else:
        handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s zarrfs[%(process)d] %(levelname)s %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False


def pid_file(mountpoint: str) -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR") or ("/run" if os.geteuid() == 0 else "/tmp")
    directory = os.path.join(runtime, f"zarrfs-{os.geteuid()}")
    os.makedirs(directory, exist_ok=True)
    digest = hashlib.sha1(os.path.realpath(mountpoint).encode()).hexdigest()[:16]
    return os.path.join(directory, f"{digest}.pid")


def is_mounted(mountpoint: str) -> bool:
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


# ------------------------------------------------------------------------ mount
def _mount_config(args: argparse.Namespace):
    from .fs.mount import MountConfig
    from .store import parse_storage_options

    config = MountConfig(
        source=args.source if "://" in args.source or "::" in args.source else os.path.abspath(args.source),
        mountpoint=os.path.abspath(args.mountpoint),
        read_only=args.read_only,
        storage_options=parse_storage_options(args.storage_option),
        cache_size=args.cache_size,
        metadata_ttl=args.metadata_ttl,
        consolidated=args.consolidated,
        raw=args.raw,
    )
    for group in args.options:
        for opt in filter(None, group.split(",")):
            name, _, value = opt.partition("=")
            if name == "ro":
                config.read_only = True
            elif name == "uid":
                config.uid = int(value)
            elif name == "gid":
                config.gid = int(value)
            elif name in _IGNORED_OPTIONS or name.startswith(("_", "x-")):
                continue
            elif name in _REFUSED_OPTIONS:
                raise SystemExit(f"zarrfs: -o {name} is not supported: {_REFUSED_OPTIONS[name]}")
            else:
                config.fuse_options.add(opt)
    return config


def _check_mountpoint(config) -> str | None:
    if not os.path.isdir(config.mountpoint):
        return f"mountpoint {config.mountpoint} does not exist or is not a directory"
    if is_mounted(config.mountpoint):
        return f"mountpoint {config.mountpoint} is busy: something is already mounted there"
    if not os.path.exists("/dev/fuse"):
        return "FUSE is not available: /dev/fuse is missing (install fuse3, load the fuse module)"
    if "://" not in config.source and "::" not in config.source and not os.path.exists(config.source):
        return f"source {config.source} does not exist"
    return None


def cmd_mount(args: argparse.Namespace) -> int:
    config = _mount_config(args)
    problem = _check_mountpoint(config)
    if problem:
        print(f"zarrfs: {problem}", file=sys.stderr)
        return 1
    log_file = os.path.abspath(args.log_file) if args.log_file else None
    if args.foreground:
        setup_logging(args.log_level, log_file, True)
        return _serve(config, lambda: None)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:  # parent: report how the mount went
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.read().decode(errors="replace")
        if message.startswith("ok"):
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
    setup_logging(args.log_level, log_file, False)

    def ready() -> None:
        os.write(write_end, b"ok\n")
        os.close(write_end)

    code = _serve(config, ready, report=lambda msg: os.write(write_end, msg.encode()))
    os._exit(code)


def _serve(config, ready, report=None) -> int:
    from .fs.fuse import AdapterOptions, serve
    from .fs.mount import SourceError, build_core, keep_freed_buffers

    pidfile = pid_file(config.mountpoint)
    try:
        with open(pidfile, "w") as f:
            f.write(str(os.getpid()))
        keep_freed_buffers()
        core, cleanup = build_core(config)
        try:
            options = AdapterOptions(uid=config.uid, gid=config.gid, metadata_ttl=config.metadata_ttl)
            serve(core, config.mountpoint, config.fuse_options, options, ready, fsname=config.source)
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
        try:
            os.unlink(pidfile)
        except OSError:
            pass


# ----------------------------------------------------------------------- umount
def cmd_umount(args: argparse.Namespace) -> int:
    mountpoint = os.path.abspath(args.mountpoint)
    if not is_mounted(mountpoint):
        print(f"zarrfs: nothing is mounted at {mountpoint}", file=sys.stderr)
        return 1
    pid = None
    try:
        with open(pid_file(mountpoint)) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        pass
    result = subprocess.run(["fusermount3", "-u", mountpoint], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"zarrfs: cannot unmount {mountpoint}: {result.stderr.strip()}", file=sys.stderr)
        return 1
    deadline = time.monotonic() + args.timeout
    while pid and process_alive(pid):
        if time.monotonic() > deadline:
            print(f"zarrfs: the daemon (pid {pid}) has not exited after {args.timeout:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.05)
    return 0


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


# ------------------------------------------------------------------------- info
def cmd_info(args: argparse.Namespace) -> int:
    from .format import Array, FormatError, open_hierarchy
    from .store import StoreError, open_store, parse_storage_options
    from .views.info import render_info

    setup_logging(args.log_level, args.log_file, True)
    try:
        hierarchy = open_hierarchy(open_store(args.source, parse_storage_options(args.storage_option), read_only=True))
        if args.node is not None:
            node_path = args.node.strip("/")
            print(render_info(hierarchy.open_node(node_path), "/" + node_path), end="")
            return 0
        _print_tree(hierarchy, "", 0, Array)
        return 0
    except (FormatError, StoreError) as exc:
        print(f"zarrfs: {exc}", file=sys.stderr)
        return 1


def _print_tree(hierarchy, path: str, depth: int, array_type) -> None:
    from .format import FormatError

    try:
        node = hierarchy.open_node(path)
    except FormatError as exc:
        print(f"{'  ' * depth}{path.rpartition('/')[2] or '/'}  [unreadable: {exc}]")
        return
    name = path.rpartition("/")[2] or "/"
    if isinstance(node, array_type):
        m = node.metadata
        print(f"{'  ' * depth}{name}  array {m.dtype.name} {list(m.shape)} chunks {list(node.chunk_shape)}")
        return
    print(f"{'  ' * depth}{name}{'/' if name != '/' else ''}  group")
    for child in hierarchy.children(path):
        _print_tree(hierarchy, f"{path}/{child}" if path else child, depth + 1, array_type)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import write_demo

    write_demo(args.directory)
    print(f"wrote the demo hierarchy to {args.directory}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] not in _COMMANDS and not argv[0].startswith("-"):
        argv.insert(0, "mount")  # mount.fuse3: zarrfs SOURCE MOUNTPOINT -o OPTS
    args = build_parser().parse_args(argv)
    handler = {"mount": cmd_mount, "umount": cmd_umount, "info": cmd_info, "demo": cmd_demo}[args.command]
    return handler(args)


def mount_helper(argv: list[str] | None = None) -> int:
    """`mount.fuse.zarrfs SOURCE MOUNTPOINT [-n] [-s] [-v] [-o OPTS]`, as mount(8) calls a
    helper for an fstab line of type `fuse.zarrfs`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    kept = [a for a in argv if a not in ("-n", "-s", "-v", "-f")]
    return main(["mount", *kept])


if __name__ == "__main__":
    sys.exit(main())
