"""The names of the decoded tree that everyday programs use beside its nodes' own files:
scratch files (scratch.py) and their renames onto names that mean something (targets.py),
names removed while their node stays (removed.py), `NAME.npy` answering for array NAME
after a `.npy` copied in made it, and the modes, owners and times that chmod, chown and
utimensat set (modes.py). docs/posix.md says what each program sees."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

from ...format.metadata import METADATA_NAMES
from ...store import FileMeta
from ...store.keys import join_path
from ..core import Attributes, OpenFile
from ..directories import parent_of
from ..errors import FsError, errno_for
from .entries import ARRAY, CHUNK_DIR, FILE, GROUP, Entry
from .modes import HeldModes
from .removed import RemovedNames
from .scratch import ScratchFiles
from .targets import TargetCore, store_as, target_of

if TYPE_CHECKING:
    from ...format import AnyHierarchy
    from ..directories import DirectoryTimes
    from .tree import Tree

log = logging.getLogger(__name__)

# the directories a scratch file can be made in
SCRATCH_DIRECTORIES = (GROUP, ARRAY, CHUNK_DIR)


class NamesCore(TargetCore, Protocol):
    """What the everyday names ask of the decoded core (core.py): its tree and hierarchy,
    paths resolved as it resolves them, and the times of directories and nodes."""

    hierarchy: AnyHierarchy
    tree: Tree
    _dir_times: DirectoryTimes

    def _resolve(self, path: str) -> Entry | None: ...

    def _change_time(self, path: str, entry: Entry, is_dir: bool) -> float | None: ...


class EverydayNames:
    """Thread-safe: each table under its own lock."""

    def __init__(self, core: NamesCore, budget: int, spool_dir: str | None) -> None:
        self.core = core
        self.scratch = ScratchFiles(budget, spool_dir)
        self.removed = RemovedNames()
        self.modes = HeldModes()

    # ---------------------------------------------------------------- lookups
    def attributes(self, path: str) -> Attributes | None:
        """A scratch file's attributes, or None."""
        content = self.scratch.get(path)
        if content is None:
            return None
        with self.scratch.lock:
            return content.attributes()

    def npy_alias(self, path: str) -> Entry | None:
        """`NAME.npy` in a group where no node of that name is and array NAME is: its
        `data.npy` (not listed). So the `stat`, `utime` and `chmod` that shutil.copy2,
        copytree, move and `cp -p` make after the close that made the array succeed, and a
        second `rsync -a` finds the file it sent, with its size and the times it set."""
        parent, _, name = path.rpartition("/")
        if not name.endswith(".npy") or len(name) <= 4:
            return None
        try:
            group = self.core.tree.resolve(parent)
            if group.kind != GROUP:
                return None
            array = self.core.tree.resolve(join_path(group.node, name[:-4]))
            if array.kind != ARRAY:
                return None
            return self.core.tree.resolve(join_path(array.node, "data.npy"))
        except Exception:
            return None

    @staticmethod
    def is_alias(path: str, entry: Entry) -> bool:
        return entry.kind == FILE and join_path(entry.node, entry.name) != path

    def listed(self, directory: str) -> list[tuple[str, Attributes]]:
        scratch = self.scratch.under(directory)
        with self.scratch.lock:
            return [(name, content.attributes()) for name, content in scratch]

    def without_removed(
        self, directory: str, entries: Iterable[tuple[str, Attributes]]
    ) -> list[tuple[str, Attributes]]:
        return [(n, a) for n, a in entries if not self.removed.hides(join_path(directory, n))]

    # ------------------------------------------------------------------ files
    def open(self, path: str, flags: int) -> OpenFile | None:
        content = self.scratch.get(path)
        if content is None:
            return None
        file = self.scratch.opened(content)
        if flags & os.O_TRUNC:
            file.truncate(0)
        return file

    def create(self, path: str, directory: Entry) -> OpenFile:
        """A file of a name that means nothing in `directory`: a scratch file."""
        if directory.kind not in SCRATCH_DIRECTORIES:
            raise FsError(errno.EPERM, "files can be made only in groups, arrays and chunk directories")
        self.core._dir_times.touch(parent_of(path))
        return self.scratch.opened(self.scratch.create(path))

    def truncate(self, path: str, size: int) -> bool:
        content = self.scratch.get(path)
        if content is None:
            return False
        self.scratch.truncate(content, size)
        return True

    def unlink(self, path: str) -> bool:
        if not self.scratch.remove(path):
            return False
        self.modes.forget(path)
        self.core._dir_times.touch(parent_of(path))
        return True

    def set_attributes(self, path: str, meta: FileMeta) -> Attributes | None:
        content = self.scratch.get(path)
        if content is None:
            return None
        return self.scratch.set_meta(content, meta)

    # ---------------------------------------------------------------- renames
    def rename(self, src: str, dst: str, replace: bool) -> bool:
        """A rename from or onto a scratch file; False where neither is one."""
        content = self.scratch.get(src)
        if content is not None:
            self._from_scratch(src, dst, replace)
            return True
        entry = self.core._resolve(src)
        if entry is None or entry.kind != FILE or entry.name not in METADATA_NAMES or self.is_alias(src, entry):
            return False
        if not self._scratch_name(dst):
            return False
        # a document renamed away (vim's backupcopy=no): copied, never taken from its node,
        # which holds it until a new one is stored
        document = self.core.hierarchy.open_node(entry.node).documents[entry.name]  # as stored now
        if not replace and self.scratch.get(dst) is not None:
            raise FsError(errno.EEXIST, "the destination exists")
        self.scratch.add(dst, document)
        self.removed.hide(src)
        self.core._dir_times.touch(parent_of(src), parent_of(dst))
        return True

    def _scratch_name(self, path: str) -> bool:
        """Whether a file at `path` would be a scratch file: in a directory that holds them,
        under a name that neither is anything nor means anything there."""
        if self.scratch.get(path) is not None:
            return True
        directory = self.core._resolve(parent_of(path))
        if directory is None or directory.kind not in SCRATCH_DIRECTORIES:
            return False
        found = self.core._resolve(path) or self._hidden_chunk(path)
        return found is None and target_of(self.core, directory, path.rpartition("/")[2], None) is None

    def _hidden_chunk(self, path: str) -> Entry | None:
        """The chunk file at `path` whose name a second unlink took away: still a chunk to
        store what is renamed onto it (as one made again is), never a scratch name."""
        try:
            return self.removed.made_again(path, self.core.tree.resolve)
        except Exception:
            return None

    def _from_scratch(self, src: str, dst: str, replace: bool) -> None:
        if self._scratch_name(dst):
            if not replace and self.scratch.get(dst) is not None:
                raise FsError(errno.EEXIST, "the destination exists")
            self.scratch.rename(src, dst)
            self.modes.forget(dst)
            self.core._dir_times.touch(parent_of(src), parent_of(dst))
            return
        directory = self.core._resolve(parent_of(dst))
        if directory is None:
            raise FsError(errno.ENOENT, "no such directory")
        found = self.core._resolve(dst)
        target = target_of(self.core, directory, dst.rpartition("/")[2], found or self._hidden_chunk(dst))
        if target is None:
            raise FsError(
                errno.EPERM,
                "a scratch file can be renamed onto another scratch name, NAME.npy in a group, "
                "a metadata document, a chunk file or a store key of an array",
            )
        if found is not None and not replace:
            raise FsError(errno.EEXIST, "the destination exists")
        content = self.scratch.get(src)
        assert content is not None
        with self.scratch.lock:
            content.opens += 1  # (kept while it is read, even if its name goes meanwhile)
        try:
            store_as(self.core, dst, content.size(), lambda offset, size: self._read(content, offset, size))
        except Exception as exc:  # (ENOENT would say the source is missing)
            code = errno_for(exc)
            raise FsError(
                errno.EINVAL if code == errno.ENOENT else code, f"not stored as {target.kind}: {exc}"
            ) from None
        finally:
            self.scratch.released(content)
        self.scratch.remove(src)
        stored = self.core._resolve(dst)
        self.modes.forget(dst)
        if stored is not None:
            self.modes.set(dst, content.meta, self.core._change_time(dst, stored, False))
        self.core._dir_times.touch(parent_of(src), parent_of(dst))

    def _read(self, content: Any, offset: int, size: int) -> bytes:
        with self.scratch.lock:
            return cast(bytes, content.read(offset, size))

    # ---------------------------------------------------------------- unmount
    def left_at_unmount(self) -> None:
        left = self.scratch.left()
        if left:
            log.warning(
                "%d scratch file(s) left at unmount, never stored: %s",
                len(left),
                ", ".join("/" + p for p in left),
            )
