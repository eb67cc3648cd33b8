"""File operations that make a local directory behave like an object store: atomic
writes (temporary file, then rename), and removal of directories left empty, so that
an erased prefix disappears. Paths are absolute; nothing here goes above `root`."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets

from .keys import TEMP_PREFIX

_WRITE_ATTEMPTS = 3


def write_atomic(path: str, value: bytes) -> None:
    """Replace the file at `path` with `value` so that readers see the old or new bytes only."""
    directory = os.path.dirname(path)
    for _ in range(_WRITE_ATTEMPTS):
        try:
            os.makedirs(directory, exist_ok=True)
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
            os.replace(temp, path)
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
    prune_empty_dirs(os.path.dirname(path), root)


def remove_tree(path: str, root: str) -> None:
    """Remove every file under `path` (keeping in-flight temporary files) and empty dirs."""
    for directory, _, files in os.walk(path, topdown=False):
        for name in files:
            if not name.startswith(TEMP_PREFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))
        if os.path.normpath(directory) != os.path.normpath(root):
            _remove_dir_if_empty(directory)
    prune_empty_dirs(os.path.dirname(path), root)


def rename(src: str, dst: str, root: str) -> None:
    """Rename a file or directory atomically, creating the parents of `dst`."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.rename(src, dst)
    prune_empty_dirs(os.path.dirname(src), root)


def prune_empty_dirs(directory: str, root: str) -> None:
    """Remove `directory` and its ancestors while they are empty, stopping below `root`."""
    root = os.path.normpath(root)
    directory = os.path.normpath(directory)
    while directory.startswith(root.rstrip(os.sep) + os.sep):
        if not _remove_dir_if_empty(directory):
            return
        directory = os.path.dirname(directory)


def _remove_dir_if_empty(directory: str) -> bool:
    """rmdir `directory`; False if it is not empty (so its ancestors are not either)."""
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True
