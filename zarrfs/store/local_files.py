"""File operations that make a local directory behave like an object store: atomic
writes (temporary file, then rename), and removal of directories left empty, so that
an erased prefix disappears. Paths are absolute; nothing here goes above `root`.

Durability: a change is made durable before it returns, as SPEC §6 asks of `fsync` and
`close`: a written file is fsynced before its rename, and every directory whose entries
changed (the one holding the name, the parents of directories created or removed) after."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets

from .keys import TEMP_PREFIX

_WRITE_ATTEMPTS = 3


def write_atomic(path: str, value: bytes) -> None:
    """Replace the file at `path` with `value`: readers see the old or the new bytes only,
    and the new ones survive a power loss once this returns."""
    directory = os.path.dirname(path)
    for _ in range(_WRITE_ATTEMPTS):
        try:
            created = _make_dirs(directory)
        except (FileExistsError, NotADirectoryError) as exc:
            raise FileExistsError(errno.EEXIST, "a parent of the key is a value", path) from exc
        temp = os.path.join(directory, TEMP_PREFIX + secrets.token_hex(8))
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileNotFoundError:
            continue  # a concurrent erase pruned the directory; create it again
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(value)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temp, path)
            _fsync_dirs([directory, *(os.path.dirname(d) for d in created)])
            return
        except IsADirectoryError as exc:
            raise FileExistsError(errno.EEXIST, "the key names an existing prefix", path) from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
    raise FileNotFoundError(errno.ENOENT, "directory removed while writing", directory)


def remove_file(path: str, root: str) -> None:
    """Remove the file at `path` if it is there, then its parents left empty."""
    try:
        os.unlink(path)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return
    fsync_dir(prune_empty_dirs(os.path.dirname(path), root))


def remove_tree(path: str, root: str) -> None:
    """Remove every file under `path` (keeping in-flight temporary files) and empty dirs."""
    for directory, _, files in os.walk(path, topdown=False):
        for name in files:
            if not name.startswith(TEMP_PREFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))
        if os.path.normpath(directory) != os.path.normpath(root):
            _remove_dir_if_empty(directory)
    fsync_dir(prune_empty_dirs(os.path.dirname(path), root))


def rename(src: str, dst: str, root: str) -> None:
    """Rename a file or directory atomically, creating the parents of `dst`."""
    created = _make_dirs(os.path.dirname(dst))
    os.rename(src, dst)
    _fsync_dirs([os.path.dirname(dst), *(os.path.dirname(d) for d in created)])
    fsync_dir(prune_empty_dirs(os.path.dirname(src), root))


def prune_empty_dirs(directory: str, root: str) -> str:
    """Remove `directory` and its ancestors while they are empty, stopping below `root`;
    returns the innermost directory left, whose entries changed."""
    root = os.path.normpath(root)
    directory = os.path.normpath(directory)
    while directory.startswith(root.rstrip(os.sep) + os.sep):
        if not _remove_dir_if_empty(directory):
            return directory
        directory = os.path.dirname(directory)
    return directory


def fsync_dir(directory: str) -> None:
    """Make the entries of `directory` durable (names added, replaced or removed)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:  # removed meanwhile: its parent holds the change
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dirs(directories: list[str]) -> None:
    for directory in dict.fromkeys(directories):
        fsync_dir(directory)


def _make_dirs(directory: str) -> list[str]:
    """os.makedirs(directory, exist_ok=True), returning the directories it created."""
    missing = []
    while not os.path.isdir(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
    return missing


def _remove_dir_if_empty(directory: str) -> bool:
    """rmdir `directory`; False if it is not empty (so its ancestors are not either)."""
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
