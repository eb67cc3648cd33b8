"""The command line's grammar: every command, argument and option with its help, its
default and examples (`zarrfs COMMAND --help`); cli.py carries the commands out."""

from __future__ import annotations

import argparse
import math
from typing import Any, cast

from .defaults import METADATA_TTL, STORE_TIMEOUT

_SIZE_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

_MOUNT_EXAMPLES = """examples:
  zarrfs mount ./survey.zarr /mnt/z                        # a local directory
  zarrfs mount s3://bucket/survey.zarr /mnt/z --read-only  # credentials from AWS_* variables
  zarrfs mount s3://bucket/survey.zarr /mnt/z --storage-option anon=true   # a public bucket
  zarrfs mount --raw s3://bucket/survey.zarr /mnt/raw      # the store's keys as files
  zarrfs mount s3://bucket/survey.zarr /mnt/z --cache-dir ~/.cache/zarrfs   # chunks kept on disk
  zarrfs mount ./survey.zarr /mnt/z -f --log-level DEBUG   # in the foreground, verbose
  zarrfs mount ./survey.zarr /mnt/z -o allow_other,uid=1000,gid=1000

SOURCE is a local path (a directory, or a .zip file) or an fsspec URL: s3://, gs://,
https://, memory://. MOUNTPOINT is an empty directory. The command returns once the
mount answers; the daemon logs to --log-file, else to syslog, else to a file whose path
it prints. `zarrfs umount MOUNTPOINT` stores buffered writes and unmounts."""


def _s3_backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--s3-backend",
        choices=("auto", "obstore", "s3fs"),
        default="auto",
        help="the client for s3:// sources. auto: obstore where it is installed and "
        "understands every --storage-option given (and knows the bucket's region), "
        "else s3fs (default: auto)",
    )


def storage_option(text: str) -> str:
    """A --storage-option as given, once it has the KEY=VALUE form (its value is converted
    later, by store.parse_storage_options)."""
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (for example anon=true)")
    return text


def containers_file(path: str) -> dict[str, dict[str, Any]]:
    """A --virtual-chunks-file read: its containers and their storage options."""
    from .store.containers import read_containers_file

    try:
        return read_containers_file(path)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def virtual_chunks(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The containers --virtual-chunks and --virtual-chunks-file authorize, with the
    storage options the file gives each (a later one wins)."""
    containers: dict[str, dict[str, Any]] = {prefix: {} for prefix in args.virtual_chunks}
    for named in args.virtual_chunks_file:
        containers.update(named)
    return containers


def parse_size(text: str) -> int:
    """A size in bytes: 512MiB, 2G, 64k, 1048576."""
    value = text.strip().lower().removesuffix("ib").removesuffix("b")
    try:
        if value and value[-1] in _SIZE_UNITS:
            return int(float(value[:-1]) * _SIZE_UNITS[value[-1]])
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (examples: 512MiB, 2G, 1048576)") from None


def seconds(text: str) -> float:
    """A duration of more than 0 seconds (a deadline of 0 or less fails every call)."""
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0 (for example 30)")
    return value


def seconds_or_zero(text: str) -> float:
    """A duration of 0 seconds or more (0: never served from cache)."""
    value = _number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds, 0 or more (for example 10)")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds")
    return value


class _VersionAction(argparse.Action):
    """`zarrfs --version`: zarrfs and what it runs on, and which optional extras are there
    (read from the installed packages' metadata and libfuse itself: nothing is imported)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the versions and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from .about import versions

        print(versions())
        parser.exit()


def subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one command of `build_parser()`'s (its own usage, its own options)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return cast("argparse.ArgumentParser", action.choices[command])
    raise KeyError(command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zarrfs",
        description="Mount a Zarr hierarchy (a local directory, an object-store bucket) as a "
        "filesystem: groups are directories, arrays are directories of decoded files.",
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    m = sub.add_parser(
        "mount",
        help="mount SOURCE at MOUNTPOINT (returns once the mount is ready)",
        description="Mount a Zarr hierarchy at MOUNTPOINT.",
        epilog=_MOUNT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    m.add_argument("source", metavar="SOURCE", help="the hierarchy: a local path or an fsspec URL (s3://…)")
    m.add_argument("mountpoint", metavar="MOUNTPOINT", help="an empty directory to mount it at")
    m.add_argument(
        "-f",
        "--foreground",
        action="store_true",
        help="stay in the foreground, logging to standard error (systemd: Type=notify)",
    )
    m.add_argument("--raw", action="store_true", help="passthrough mode: the store's keys as files, undecoded")
    m.add_argument(
        "--use-server-modtime",
        action="store_true",
        help="--raw on an object store: show the times the store's listings give and keep modes "
        "and times set through the mount in memory, with no request per object (no HEAD to read "
        "its metadata, no copy to change it)",
    )
    m.add_argument("--read-only", action="store_true", help="refuse every write with EROFS")
    m.add_argument(
        "-o",
        dest="options",
        action="append",
        default=[],
        metavar="OPTS",
        help="comma-separated mount options: allow_other, default_permissions, auto_unmount, "
        "uid=N, gid=N, ro (as --read-only), cache_dir=DIR, cache_dir_size=SIZE; "
        "fstab's _netdev, nofail, x-* are ignored",
    )
    m.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        type=storage_option,
        help="for the store's client (fsspec, s3fs, obstore), repeatable (anon=true, endpoint_url=…, profile=…); "
        "true/false, numbers and JSON are converted",
    )
    m.add_argument(
        "--memory-target",
        type=parse_size,
        default=1 << 30,
        metavar="SIZE",
        help="the daemon's memory budget, shared by the decoded-chunk cache (half), read-ahead "
        "(a quarter), write buffers and upload parts (an eighth each) (default: 1GiB)",
    )
    m.add_argument(
        "--cache-size",
        type=parse_size,
        default=None,
        metavar="SIZE",
        help="memory for decoded chunks (default: 512MiB, half the memory target)",
    )
    m.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="keep the chunks read from an object store (s3://, gs://, https://) in DIR, so that "
        "later mounts read them from disk; metadata and listings are never kept there "
        "(fstab: -o cache_dir=DIR)",
    )
    m.add_argument(
        "--cache-dir-size",
        type=parse_size,
        default=10 << 30,
        metavar="SIZE",
        help="bound of --cache-dir, least recently used chunks out first "
        "(default: 10GiB; fstab: -o cache_dir_size=SIZE)",
    )
    m.add_argument(
        "--metadata-ttl",
        type=seconds_or_zero,
        default=METADATA_TTL,
        metavar="SECONDS",
        help=f"how long metadata and listings are served from cache (default: {METADATA_TTL:g})",
    )
    m.add_argument(
        "--consolidated",
        choices=("auto", "never"),
        default="auto",
        help="auto: browse from consolidated metadata when the store has it; never: list the "
        "store instead (default: auto)",
    )
    m.add_argument(
        "--timeout",
        type=seconds,
        default=STORE_TIMEOUT,
        metavar="SECONDS",
        help=f"deadline of one store call, retries included; then EIO (default: {STORE_TIMEOUT:g})",
    )
    _s3_backend_argument(m)
    m.add_argument(
        "--allow-non-empty",
        action="store_true",
        help="mount even over a directory that holds files (they are hidden while mounted)",
    )
    _version_arguments(m)
    m.add_argument(
        "--commit-every",
        type=_positive_seconds,
        metavar="SECONDS",
        help="Icechunk: commit what is staged every SECONDS, rebased onto other writers' commits",
    )
    _logging_arguments(m)

    u = sub.add_parser(
        "umount",
        help="store buffered writes, unmount and wait for the daemon to exit",
        description="Unmount a zarrfs mount: the daemon stores every buffered write first. "
        "A mount whose daemon died is cleaned up.",
    )
    u.add_argument("mountpoint", metavar="MOUNTPOINT", help="where it is mounted")
    u.add_argument(
        "--timeout",
        type=seconds,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for the daemon to store what it holds and exit (default: 60)",
    )

    i = sub.add_parser(
        "info",
        help="print the tree, or one node's info, without mounting",
        description="Print a hierarchy's tree, or one node's info, without mounting it.",
        epilog="examples:\n  zarrfs info ./survey.zarr\n  zarrfs info s3://bucket/survey.zarr climate/temp",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    i.add_argument("source", metavar="SOURCE", help="as for mount")
    i.add_argument("node", nargs="?", metavar="NODE", help="a node's path in the hierarchy (default: the tree)")
    i.add_argument(
        "--storage-option", action="append", default=[], metavar="KEY=VALUE", type=storage_option, help="as for mount"
    )
    _s3_backend_argument(i)
    _version_arguments(i)
    _logging_arguments(i)

    s = sub.add_parser(
        "stats",
        help="print a mount's counters as JSON",
        description="Print the counters of a mount (requests, store calls, cache, errors).",
    )
    s.add_argument("mountpoint", metavar="MOUNTPOINT", help="where it is mounted")

    d = sub.add_parser("demo", help="write the built-in demo hierarchy into DIR")
    d.add_argument("directory", metavar="DIR", help="where to write it (made if missing)")

    c = sub.add_parser(
        "commit",
        help="Icechunk: commit the changes staged on a mount; prints the snapshot id",
        description="Commit what a mount of an Icechunk branch has staged; print the snapshot id.",
    )
    c.add_argument("mountpoint", metavar="MOUNTPOINT", help="where it is mounted")
    c.add_argument("-m", "--message", default="zarrfs commit", help="the commit message (default: zarrfs commit)")
    return parser


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"a number of seconds above 0, not {text!r}")
    return seconds


def _version_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ref", metavar="BRANCH|TAG", help="Icechunk: show this branch or tag (default: main)")
    p.add_argument("--snapshot", metavar="ID", help="Icechunk: show this snapshot (read-only)")
    p.add_argument(
        "--virtual-chunks",
        action="append",
        default=[],
        metavar="PREFIX",
        help="Icechunk: read virtual chunks from this container (file:///data/, s3://bucket/prefix/), repeatable; "
        "the repository's config names its containers; none is read unless given",
    )
    p.add_argument(
        "--virtual-chunks-file",
        action="append",
        default=[],
        metavar="FILE",
        type=containers_file,
        help="as --virtual-chunks, for the containers a JSON (or .toml) FILE names, each with its "
        'storage options: {"s3://bucket/data/": {"endpoint_url": "...", "key": "...", "secret": "..."}}',
    )


def _logging_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="(default: WARNING)",
    )
    p.add_argument(
        "--log-file",
        metavar="FILE",
        help="log here (default: syslog, else a file under /var/log/zarrfs or ~/.local/state/zarrfs)",
    )
