"""File operations confined to a local directory, for LocalStore (docs/errors.md, Confinement).

Every path is walked from the root one component at a time, each directory opened with
O_NOFOLLOW relative to the one before it (openat). A symbolic link anywhere below the
root (to a file, a directory, `..`, itself, /dev/zero) is therefore never followed, and a
directory swapped for a link while we walk cannot lead out either: the walk holds the
real directories, not names. This is race-free where resolving with realpath and then
checking the prefix is not, and costs about the same: one open per component.

Only regular files are opened: each is lstat'ed in its directory first (a FIFO, socket
or device is never opened), then opened O_NOFOLLOW|O_NONBLOCK and checked again with
fstat (something swapped in between can neither block nor pass). Listings show regular
files and directories and never descend through a link; removals and renames act on
directory entries (unlinkat, renameat), which never follow links. Writes are atomic: a
temporary file (or an unnamed one given to write_file_atomic, linked in), then a rename
over the key (local_writes.py). Nothing here goes above the root; the root path itself is followed as
given (the user chose it).

The root is the directory found at its path when the store opened (Root, which holds it
open so that its inode number stays its own): every call opens it by path, as it always
did, and compares (st_dev, st_ino) with one fstat, well under a microsecond. Gone or
replaced (docs/errors.md, a store that vanishes), it raises StoreVanishedError: no key reads as
missing, and no directory is made, in a root that is not the store's. Only a root that
did not exist when the store opened is made (at its first write).

Walks tell deadlines.reached() how far they got: a call that hangs on a filesystem
mounted below the root (NFS, FUSE) names the directory where it hangs.

Writes (atomic and durable) are local_writes.py's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Iterator

from .deadlines import reached
from .errors import ConfinementError, StoreVanishedError
from .keys import TEMP_PREFIX

_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# Listings and removals go at most this many directories deep below where they start:
# each level holds a descriptor, and no Zarr key is this deep (ndim + group depth).
MAX_DEPTH = 128


def _open_dir(parent: int, name: str, path: str) -> int:
    """Open directory `name` in `parent`: FileNotFoundError if absent, NotADirectoryError
    for a file, ConfinementError for a link or special file."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
    mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    if stat.S_ISREG(mode):
        raise NotADirectoryError(errno.ENOTDIR, "a parent of the key is a value", path)
    raise ConfinementError("a parent of the key is a link or special file, not followed", path)


class Root:
    """The directory a store is confined to: its path, and which directory is there
    (None until one is: a store opened on a path not made yet makes it at its first
    write, and holds to that directory from then on)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.identity: tuple[int, int] | None = None
        self._held: int | None = None
        self._dev = self._ino = -1  # the identity's, compared on every call
        self._lock = threading.Lock()
        with contextlib.suppress(OSError):
            os.close(self.open())

    def __del__(self) -> None:
        if self._held is not None:
            os.close(self._held)

    def open(self, create: bool = False) -> int:
        """A descriptor of the root; StoreVanishedError where the directory at its path is
        not (or no longer) the store's. With `create`, a root never seen is made."""
        try:
            fd = os.open(self.path, _ROOT_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            if self.identity is not None:
                raise self._vanished("removed") from None
            if not create:
                raise
            os.makedirs(self.path, exist_ok=True)
            fd = os.open(self.path, _ROOT_FLAGS)
        info = os.fstat(fd)
        if info.st_ino == self._ino and info.st_dev == self._dev:
            return fd
        if self.identity is None:
            with self._lock:
                if self.identity is None:
                    # held open for good: while it is, no other directory can take its inode
                    # number (a root removed and made again would have the same one, on most
                    # filesystems)
                    self._held, self.identity = os.dup(fd), (info.st_dev, info.st_ino)
                    self._dev, self._ino = self.identity
            if info.st_ino == self._ino and info.st_dev == self._dev:
                return fd
        os.close(fd)
        raise self._vanished("replaced by another directory")

    def _vanished(self, how: str) -> StoreVanishedError:
        return StoreVanishedError(f"the store's directory {self.path} was {how} since it was opened")


@contextlib.contextmanager
def directories(root: Root, parts: list[str], create: bool = False) -> Iterator[list[int]]:
    """Descriptors of the root and of each directory `parts` names below it, opened one
    inside the other. With `create`, missing directories are made (the root only if it
    never existed: see Root)."""
    fds = [root.open(create)]
    try:
        for i, name in enumerate(parts):
            path = "/".join(parts[: i + 1])
            reached(path)
            try:
                fds.append(_open_dir(fds[-1], name, path))
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fds[-1])
                    os.fsync(fds[-1])  # the new directory's name
                fds.append(_open_dir(fds[-1], name, path))
        yield fds
    finally:
        for fd in fds:
            os.close(fd)


def open_regular(directory: int, name: str) -> tuple[int, os.stat_result] | None:
    """(descriptor, fstat) of the regular file `name` in `directory`; None if it is absent
    or anything else (a link, directory, FIFO, socket or device is never opened)."""
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode):
            return None
        fd = os.open(name, FILE_FLAGS, dir_fd=directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # became a link since the lstat
            return None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    return fd, info


def read_at(fd: int, offset: int, size: int) -> bytes:
    """`size` bytes from `offset`, fewer only at the end of the file."""
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        piece = os.pread(fd, size - got, offset + got)
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)


def regular_info(directory: int, name: str) -> os.stat_result | None:
    """lstat of `name` if it is a regular file, else None."""
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def remove_file(root: Root, parts: list[str], prune: bool = True) -> None:
    """Remove the regular file at key `parts` if it is there, then (`prune`) its parents
    left empty."""
    *dirs, name = parts
    try:
        with directories(root, dirs) as fds:
            if regular_info(fds[-1], name) is None:
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fds[-1])
            os.fsync(_prune(fds, dirs) if prune else fds[-1])
    except (FileNotFoundError, NotADirectoryError, ConfinementError):
        return


def remove_tree(root: Root, parts: list[str], prune: bool = True) -> None:
    """Remove every regular file below prefix `parts` (keeping in-flight temporary files
    and anything that is not a regular file or directory) and the directories left empty:
    its own, and (`prune`) its parents'."""
    try:
        with directories(root, parts) as fds:
            _clear(fds[-1], 0)
            os.fsync(_prune(fds, parts) if prune else _prune(fds[-2:], parts[-1:]))
    except (FileNotFoundError, NotADirectoryError, ConfinementError):
        return


def rename(root: Root, src: list[str], dst: list[str], prune: bool = True) -> None:
    """Rename the regular file or directory at `src` to `dst` atomically, creating the
    parents of `dst` and (`prune`) removing those of `src` left empty."""
    *src_dirs, src_name = src
    *dst_dirs, dst_name = dst
    with directories(root, src_dirs) as src_fds:
        mode = os.stat(src_name, dir_fd=src_fds[-1], follow_symlinks=False).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise ConfinementError("a link or special file is never moved", "/".join(src))
        with directories(root, dst_dirs, create=True) as dst_fds:
            os.rename(src_name, dst_name, src_dir_fd=src_fds[-1], dst_dir_fd=dst_fds[-1])
            os.fsync(dst_fds[-1])
        os.fsync(_prune(src_fds, src_dirs) if prune else src_fds[-1])


def scan(directory: int, with_info: bool = False) -> list[tuple[str, bool, os.stat_result | None]]:
    """(name, is_directory, lstat of files when `with_info`) of the regular files and
    directories in `directory`; links, FIFOs, sockets and devices are left out."""
    found: list[tuple[str, bool, os.stat_result | None]] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    found.append((entry.name, True, None))
                elif entry.is_file(follow_symlinks=False):
                    found.append((entry.name, False, entry.stat(follow_symlinks=False) if with_info else None))
            except FileNotFoundError:
                continue  # removed since the directory was read
    return found


def walk_files(
    directory: int, prefix: str, with_info: bool = False, depth: int = 0
) -> Iterator[tuple[str, os.stat_result | None]]:
    """(`prefix` + path below `directory`, lstat when `with_info`) of every regular file
    below `directory`, descending into real directories only, MAX_DEPTH deep."""
    for name, is_dir, info in scan(directory, with_info):
        if not is_dir:
            yield prefix + name, info
        elif depth < MAX_DEPTH:
            reached(prefix + name)
            sub = _open_listed_dir(directory, name)
            if sub is None:
                continue
            try:
                yield from walk_files(sub, f"{prefix}{name}/", with_info, depth + 1)
            finally:
                os.close(sub)


def _clear(directory: int, depth: int) -> None:
    for name, is_dir, _ in scan(directory):
        if not is_dir:
            if not name.startswith(TEMP_PREFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=directory)
            continue
        if depth >= MAX_DEPTH:
            continue
        sub = _open_listed_dir(directory, name)
        if sub is None:
            continue
        try:
            _clear(sub, depth + 1)
        finally:
            os.close(sub)
        _remove_dir_if_empty(directory, name)


def _open_listed_dir(directory: int, name: str) -> int | None:
    """Open a directory a scan found; None if it went, or was swapped for a link, since."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise


def _prune(fds: list[int], parts: list[str]) -> int:
    """Remove the directories `parts` names, deepest first, while they are empty; never
    the root. fds[i] is the directory that holds parts[i]. Returns the descriptor of the
    directory whose entries changed last (to fsync)."""
    for i in range(len(parts) - 1, -1, -1):
        if not _remove_dir_if_empty(fds[i], parts[i]):
            return fds[i + 1]
    return fds[0]


def _remove_dir_if_empty(parent: int, name: str) -> bool:
    """rmdir `name` in `parent`; False if it is not empty (so its ancestors are not either)."""
    try:
        os.rmdir(name, dir_fd=parent)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def entry_info(root: Root, parts: list[str], directory: bool) -> os.stat_result | None:
    """lstat of the regular file (with `directory`: the directory) at `parts`; None if
    there is none (or something else is there)."""
    *dirs, name = parts
    with directories(root, dirs) as fds:
        reached("/".join(parts))
        try:
            info = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
        except FileNotFoundError:
            return None
    wanted = stat.S_ISDIR if directory else stat.S_ISREG
    return info if wanted(info.st_mode) else None


def set_attributes(
    root: Root,
    parts: list[str],
    directory: bool,
    mode: int | None,
    owner: tuple[int, int] | None,
    times_ns: tuple[int | None, int | None] | None,
) -> bool:
    """Set the mode, owner (uid, gid; -1 leaves one) and (atime, mtime) in nanoseconds
    (None leaves one) of the regular file (with `directory`: the directory, made where
    missing) at `parts`; False if there is none. The entry is opened O_PATH|O_NOFOLLOW
    and changed through /proc/self/fd, so nothing is reached through a link."""
    *dirs, name = parts
    with directories(root, dirs, create=directory) as fds:
        reached("/".join(parts))
        if directory:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=fds[-1])
        try:
            fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1])
        except FileNotFoundError:
            return False
        try:
            info = os.fstat(fd)
            if not (stat.S_ISDIR if directory else stat.S_ISREG)(info.st_mode):
                return False
            path = f"/proc/self/fd/{fd}"
            if owner is not None:
                os.chown(path, *owner)  # before the mode: a change of owner clears set-id bits
            if mode is not None:
                os.chmod(path, mode)
            if times_ns is not None:
                atime, mtime = times_ns
                os.utime(
                    path,
                    ns=(info.st_atime_ns if atime is None else atime, info.st_mtime_ns if mtime is None else mtime),
                )
        finally:
            os.close(fd)
    return True
