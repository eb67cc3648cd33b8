"""Atomic, durable writes confined to a local directory, for LocalStore (see
local_files.py for the confinement): a temporary file beside the key (or an unnamed one
given to write_file_atomic, linked in), filled, fsynced and renamed over the key.

Durability: a change is durable when its call returns, as docs/errors.md promises of `fsync` and
`close`: a written file is fsynced before its rename, and every directory whose entries
changed (the one holding the name, the parent of a directory made or removed) after.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from typing import overload

from .deadlines import progressed
from .errors import ConfinementError
from .keys import temporary_name
from .local_files import Root, directories, open_regular

TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_WRITE_ATTEMPTS = 3


def write_atomic(root: Root, parts: list[str], value: bytes) -> None:
    """Replace the value at key `parts` so that readers see the old or new bytes only.
    A link at the key itself is replaced (renameat never follows it); a link among its
    parents is refused."""
    _replace_atomic(root, parts, lambda fd: write_all(fd, value))


def copy_atomic(root: Root, src: list[str], dst: list[str]) -> bool:
    """Replace the value at key `dst` with a copy of the regular file at `src`, as
    write_file_atomic does. False if `src` is absent."""
    *dirs, name = src
    try:
        with directories(root, dirs) as fds:
            opened = open_regular(fds[-1], name)
    except (FileNotFoundError, NotADirectoryError, ConfinementError):
        return False
    if opened is None:
        return False
    source, _ = opened
    try:
        write_file_atomic(root, dst, source)
    finally:
        os.close(source)
    return True


def write_file_atomic(root: Root, parts: list[str], source: int, consume: bool = False) -> int:
    """Replace the value at key `parts` with the content of the open file `source` (read
    at explicit offsets; its own offset moves), as write_atomic does; returns its size.
    With `consume`, a `source` that is an unnamed file (O_TMPFILE) on the key's
    filesystem is linked in and renamed over the key: nothing is copied. Otherwise the
    kernel copies it (copy_file_range: no buffer of ours, and a reflink or server-side
    copy where the filesystem has one), data regions only: a hole stays a hole."""
    if consume:
        size = _replace_atomic(root, parts, lambda fd: 0, link=source)
        if size is not None:
            return size
    return _replace_atomic(root, parts, lambda fd: copy_file(source, fd))


_COPY_PIECE = 8 << 20


def write_all(fd: int, value: bytes) -> int:
    written = 0
    with memoryview(value) as view:
        while written < len(view):
            written += os.write(fd, view[written:])
    return len(value)


def copy_file(source: int, target: int) -> int:
    """Copy what the open file `source` holds into the empty file `target`, in the kernel
    and keeping holes (as write_file_atomic); returns the size copied.
    Each piece renews the call's deadline (deadlines.progressed): a long copy is not a
    hung one."""
    size = os.fstat(source).st_size
    for start, end in _data_regions(source, size):
        offset = start
        while offset < end:
            offset += _copy_piece(source, target, offset, min(_COPY_PIECE, end - offset))
            progressed()
    os.ftruncate(target, size)  # a trailing hole, or a file that shrank meanwhile
    return size


def _copy_piece(source: int, target: int, offset: int, count: int) -> int:
    try:
        copied = os.copy_file_range(source, target, count, offset, offset)
    except OSError as exc:  # not between these filesystems: through memory, one piece
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            raise
        piece = os.pread(source, count, offset)
        copied = len(piece) and os.pwrite(target, piece, offset)
    return copied or count  # 0: the source shrank meanwhile; the truncate settles its size


def _data_regions(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the regions of `fd` that hold data, skipping holes (SEEK_DATA);
    the whole file where the filesystem cannot tell."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here on
                return
            if exc.errno != errno.EINVAL:
                raise
            yield offset, size
            return
        if start >= size:
            return
        yield start, end
        offset = end


@overload
def _replace_atomic(root: Root, parts: list[str], fill: Callable[[int], int], link: None = None) -> int: ...


@overload
def _replace_atomic(root: Root, parts: list[str], fill: Callable[[int], int], link: int) -> int | None: ...


def _replace_atomic(root: Root, parts: list[str], fill: Callable[[int], int], link: int | None = None) -> int | None:
    """Write the value at key `parts` by `fill(descriptor)` (which returns its size) into
    a temporary file beside it, fsync it, then rename it over the key (see write_atomic).
    With `link`, that open unnamed file is the temporary file, linked in beside the key;
    None if it cannot be (another filesystem, or not an O_TMPFILE)."""
    *dirs, name = parts
    for _ in range(_WRITE_ATTEMPTS):
        with directories(root, dirs, create=True) as fds:
            parent = fds[-1]
            temp = temporary_name()
            try:
                if link is None:
                    fd = os.open(temp, TEMP_FLAGS, 0o666, dir_fd=parent)
                else:
                    fd = _link_in(link, parent, temp)
                    if fd is None:
                        return None
            except FileNotFoundError:
                continue  # a concurrent erase pruned the directory; create it again
            try:
                try:
                    size = fill(fd) if link is None else os.fstat(fd).st_size
                    progressed()  # the fsync of a large file gets a deadline of its own
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
                os.fsync(parent)
                return size
            except IsADirectoryError as exc:
                raise FileExistsError(errno.EEXIST, "the key names an existing prefix", "/".join(parts)) from exc
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=parent)
    raise FileNotFoundError(errno.ENOENT, "directory removed while writing", "/".join(dirs))


def _link_in(source: int, parent: int, temp: str) -> int | None:
    """Link the open unnamed file `source` as `temp` in directory `parent`, with the mode
    a file created there would have; a new descriptor of it, or None where it cannot be
    linked (another filesystem, or a file that was named and removed)."""
    try:
        os.link(f"/proc/self/fd/{source}", temp, dst_dir_fd=parent, follow_symlinks=True)
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.fstat(parent).st_nlink == 0:
            raise  # the directory itself was removed meanwhile
        if exc.errno in (errno.EXDEV, errno.ENOENT, errno.EPERM, errno.EACCES, errno.EOPNOTSUPP, errno.EMLINK):
            return None
        raise
    os.fchmod(source, 0o666 & ~_umask())
    return os.dup(source)


def _umask() -> int:
    """The process's umask, read without changing it (os.umask would, for every thread)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022
