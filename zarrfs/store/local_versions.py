"""Conditional writes on a local directory (LocalStore.set_if), for mounts of one store
on one host or on several hosts sharing a filesystem (NFS, Lustre, CephFS).

A value's version is its content's digest (an inode number and times name no write for
sure: a freed inode comes back within the clock's tick). A conditional replace takes a
POSIX record lock (fcntl) on the file the name leads to, checks that the name still
leads to it once locked and that it holds the version's content, then renames the new
file over it: two writers that read one version cannot both replace it (the second finds
the name leads elsewhere once it has the lock). Record locks are a process's: the
threads of one process are kept apart by the caller (LocalStore's key locks).
A create links the new file in under the key (link fails where a name is), which is
atomic on every filesystem that has hard links, NFS included. fcntl locks are honoured
across hosts by NFS (v4, or v3 with lockd) and by Lustre mounted with `flock`; on a
filesystem whose locks are local to a host only, mounts of one host agree, not others.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os

from .deadlines import reached
from .keys import temporary_name
from .local_files import FILE_FLAGS, Root, directories, open_regular, read_at
from .local_writes import TEMP_FLAGS, write_all
from .records import content_version

_LOCK_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def read_versioned(root: Root, parts: list[str]) -> tuple[bytes | None, str | None]:
    """The value at key `parts` and its version, both of one file; (None, None) if none."""
    *dirs, name = parts
    try:
        with directories(root, dirs) as fds:
            reached("/".join(parts))
            opened = open_regular(fds[-1], name)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    if opened is None:
        return None, None
    fd, info = opened
    try:
        value = read_at(fd, 0, info.st_size)
    finally:
        os.close(fd)
    return value, content_version(value)


def write_if(root: Root, parts: list[str], value: bytes, version: str | None) -> bool:
    """Store `value` at key `parts` if the file there is still the one `version` names
    (None: if there is none); False where it is not, nothing written."""
    *dirs, name = parts
    with directories(root, dirs, create=version is None) as fds:
        parent = fds[-1]
        if version is None:
            return _create(parent, name, value)
        try:
            fd = os.open(name, _LOCK_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return False
        except PermissionError:  # a read-only file: flock, which a reader may take (one host)
            try:
                fd = os.open(name, FILE_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                return False
        try:
            _lock(fd)
            try:
                now = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return False
            held = os.fstat(fd)
            if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
                return False
            if content_version(read_at(fd, 0, held.st_size)) != version:
                return False
            temp = _written(parent, value)
            try:
                os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=parent)
            os.fsync(parent)
            return True
        finally:
            os.close(fd)  # the lock goes with it


def _create(parent: int, name: str, value: bytes) -> bool:
    temp = _written(parent, value)
    try:
        os.link(temp, name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
    except FileExistsError:
        return False
    finally:
        os.unlink(temp, dir_fd=parent)
    os.fsync(parent)
    return True


def _written(parent: int, value: bytes) -> str:
    """A temporary file beside the key holding `value`, durable; its name."""
    temp = temporary_name()  # (host and process: the next mount knows it stale once it is gone)
    fd = os.open(temp, TEMP_FLAGS, 0o666, dir_fd=parent)
    try:
        write_all(fd, value)
        os.fsync(fd)
    finally:
        os.close(fd)
    return temp


def _lock(fd: int) -> None:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
        fcntl.flock(fd, fcntl.LOCK_EX)  # opened read-only
