"""What running as a service takes (docs/troubleshooting.md): where the logs go so that none
is lost, the pid file, what is mounted where, telling systemd (`NOTIFY_SOCKET`) when the
mount is ready and when it stops."""

from __future__ import annotations

import logging
import os
import re
import sys

log = logging.getLogger(__name__)
# every module logs to a logger of its own name, below this one, which setup_logging directs
_PACKAGE_LOG = logging.getLogger("zarrfs")

_FORMAT = "%(asctime)s zarrfs[%(process)d] %(levelname)s %(message)s"


def mounts_at(path: str, mountinfo: str = "/proc/self/mountinfo") -> list[list[str]]:
    """The `mountinfo` lines (this process's by default), split into fields, of what is
    mounted at `path` (a real path). The kernel writes a space, tab, newline or backslash
    in a mount point as an octal escape (`\\040` …), so mount points are compared unescaped."""
    with open(mountinfo) as f:
        lines = [line.split() for line in f]
    return [fields for fields in lines if _unescaped(fields[4]) == path]


def namespace_holders(mountpoint: str) -> list[str]:
    """The processes ("PID (NAME)", one per mount namespace) of other mount namespaces
    that hold a FUSE mount at `mountpoint`: a namespace made (`unshare --mount`) while it
    was mounted keeps a copy, and the FUSE connection lives as long as any copy does."""
    seen, found = {os.readlink("/proc/self/ns/mnt")}, []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            namespace = os.readlink(f"/proc/{pid}/ns/mnt")
            if namespace in seen:
                continue
            seen.add(namespace)
            if any(_fuse(fields) for fields in mounts_at(mountpoint, f"/proc/{pid}/mountinfo")):
                with open(f"/proc/{pid}/comm") as f:
                    found.append(f"{pid} ({f.read().strip()})")
        except OSError:  # gone meanwhile, or not ours to look at
            continue
    return found


def busy_holders(mountpoint: str) -> list[str]:
    """The processes ("PID (NAME)") that keep `mountpoint` busy, as `fuser -m` finds them:
    a working directory, root, open file or mapped file below it. Read from /proc's links
    alone, so that nothing here waits on the mount itself."""
    below = mountpoint.rstrip("/") + "/"

    def inside(target: str) -> bool:
        target = target.removesuffix(" (deleted)")
        return target == mountpoint or target.startswith(below)

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            links = [os.readlink(f"/proc/{pid}/{name}") for name in ("cwd", "root")]
            links += [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            with open(f"/proc/{pid}/maps") as f:
                links += [line.split(None, 5)[5].strip() for line in f if line.count(" ") >= 5 and "/" in line]
            if any(inside(link) for link in links):
                with open(f"/proc/{pid}/comm") as f:
                    found.append(f"{pid} ({f.read().strip()})")
        except (OSError, IndexError):  # gone meanwhile, or not ours to look at
            continue
    return found


def _fuse(fields: list[str]) -> bool:
    """Whether a mountinfo line's filesystem (the field after the "-" that ends the
    optional fields) is a FUSE one."""
    kind = fields[fields.index("-", 6) + 1] if "-" in fields[6:] else ""
    return kind == "fuse" or kind.startswith("fuse.")


def _unescaped(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def syslog_socket() -> str:
    return os.environ.get("ZARRFS_SYSLOG_SOCKET", "/dev/log")


def default_log_file(mountpoint: str) -> str:
    """Where a daemonized mount logs when there is neither --log-file nor syslog: one file
    per mountpoint, under $ZARRFS_LOG_DIR if set, else /var/log/zarrfs for root,
    ~/.local/state/zarrfs for others."""
    if os.environ.get("ZARRFS_LOG_DIR"):
        directory = os.environ["ZARRFS_LOG_DIR"]
    elif os.geteuid() == 0:
        directory = "/var/log/zarrfs"
    else:
        state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        directory = os.path.join(state, "zarrfs")
    name = os.path.realpath(mountpoint).strip("/").replace("/", "-") or "root"
    return os.path.join(directory, f"{name}.log")


def log_destination(log_file: str | None, foreground: bool, mountpoint: str | None) -> str | None:
    """The file a mount will log to, or None for standard error (foreground) or syslog."""
    if log_file:
        return os.path.abspath(log_file)
    if foreground or os.path.exists(syslog_socket()):
        return None
    return default_log_file(mountpoint) if mountpoint else None


def setup_logging(level: str, log_file: str | None, foreground: bool) -> None:
    if log_file:
        os.makedirs(os.path.dirname(log_file), exist_ok=True)
        # a file name that is not UTF-8 (a lone surrogate) is escaped, never the line lost
        handler: logging.Handler = logging.FileHandler(log_file, errors="backslashreplace")
    elif foreground:
        handler = logging.StreamHandler(sys.stderr)
    else:
        from logging.handlers import SysLogHandler

        handler = SysLogHandler(syslog_socket())
    handler.setFormatter(logging.Formatter(_FORMAT))
    _PACKAGE_LOG.handlers[:] = [handler]
    _PACKAGE_LOG.setLevel(level)
    _PACKAGE_LOG.propagate = False


def pid_file(mountpoint: str) -> str:
    import hashlib

    runtime = os.environ.get("XDG_RUNTIME_DIR") or ("/run" if os.geteuid() == 0 else "/tmp")
    directory = os.path.join(runtime, f"zarrfs-{os.geteuid()}")
    os.makedirs(directory, exist_ok=True)
    digest = hashlib.sha1(os.path.realpath(mountpoint).encode()).hexdigest()[:16]
    return os.path.join(directory, f"{digest}.pid")


def notify(state: str) -> None:
    """Tell the service manager (`NOTIFY_SOCKET`, as systemd's sd_notify does); nothing
    without one. Never fails the mount: a lost notification is logged."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    import socket

    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(state.encode(), address)
    except OSError as exc:
        log.warning("cannot notify the service manager (%s): %s", state, exc)
