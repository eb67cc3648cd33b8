"""The versions of an Icechunk repository as one core (docs/formats.md): the root's tree (a
DecodedCore) serves every path but `/.zarrfs/versions/…`, which lists the branches,
tags and snapshots and routes each (and `branches/NAME@TIME`) to a read-only DecodedCore
of that snapshot, opened on first use (a few are kept); `/.zarrfs/commit` (commit.py) is
the control file of a branch mount. A commit is rebased onto other writers' commits where
Icechunk's conflict detector finds the changes apart; a conflict fails the fsync with
EBUSY naming the paths, the changes staying staged."""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar, cast

from ...defaults import METADATA_TTL
from ...store import CommitConflictError, FileMeta, IcechunkStore, KeyNotFoundError, Store
from ...store.icechunk_repository import BRANCHES, SNAPSHOTS, TAGS
from ...views.base import BytesView
from ..core import Attributes, FilesystemCore, NotAtHand, OpenFile
from ..decoded.core import DecodedCore
from ..decoded.view_files import ViewFile
from ..errors import FsError, log_failure
from ..hooks import NO_HOOKS, CoreHooks
from .commit import CommitFile
from .periodic import PeriodicCommits

log = logging.getLogger(__name__)
T = TypeVar("T")

INTERNAL = ".zarrfs"
VERSIONS = ".zarrfs/versions"
COMMIT = ".zarrfs/commit"
_KINDS = (BRANCHES, TAGS, SNAPSHOTS)
_FILES = ("log", "current")
UNMOUNT_MESSAGE = "zarrfs: committed at unmount"
_DIR = Attributes(True, writable=False)
# a "/" in a branch's or tag's name (icechunk 2 takes git's `feature/x`), shown as rclone
# shows one in a file name; a name "." or ".." is not listed (it can name no directory)
_SLASH = "\uff0f"  # FULLWIDTH SOLIDUS


@dataclass(frozen=True)
class _Place:
    """What a path names: a path of the root's tree ("main"), a directory or file of the
    versions tree, or the commit file (a path inside one version: _InVersion)."""

    kind: Literal["main", "dir", "file", "commit"]
    rest: str = ""
    name: str = ""


@dataclass(frozen=True)
class _InVersion:
    """A path inside one version: the version's core, the path there and the snapshot."""

    rest: str
    core: FilesystemCore
    snapshot: str
    kind: Literal["version"] = "version"


class VersionsCore(FilesystemCore):
    """Thread-safe: the kept version cores, the resolved names and the snapshots paths were
    opened in are under `_lock`; commits (and the stores of buffered writes before them)
    one at a time under `_commit_lock`; the cores routed to are thread-safe themselves."""

    def __init__(
        self,
        main: DecodedCore,
        store: IcechunkStore,
        open_version: Callable[[Store], FilesystemCore],
        *,
        metadata_ttl: float = METADATA_TTL,
        keep: int = 4,
        commit_every: float | None = None,
        hooks: CoreHooks = NO_HOOKS,
    ) -> None:
        """`hooks`: the root's tree's own (the trees of other versions change nothing)."""
        super().__init__(hooks)
        self.main = main
        self.store = store
        self.repository = store.repository
        self.read_only = main.read_only
        self.xattr_prefix = main.xattr_prefix
        self.commits = not main.read_only and not store.read_only
        self._open_version = open_version
        self._ttl = metadata_ttl
        self._keep = keep
        self._cores: OrderedDict[str, FilesystemCore] = OrderedDict()  # by snapshot id, LRU
        self._resolved: dict[tuple[str, str], tuple[float, object]] = {}
        self._resolved_at = store.snapshot_id  # the snapshot the root's tree began from then
        # the snapshot each path under the versions tree was last opened in: a branch's
        # name moves to new snapshots at the same path (and inode), so the kernel's pages
        # of the old one are dropped at the first open after the move
        self._opened_in: dict[str, str] = {}
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self._periodic = None
        if commit_every and self.commits:
            self._periodic = PeriodicCommits(lambda message: self.commit(message, rebase=True), commit_every)
            self._periodic.start()

    # ------------------------------------------------------------------ routing
    def _place(self, path: str) -> _Place | _InVersion:
        if path == COMMIT and self.commits:
            return _Place("commit")
        if path != VERSIONS and not path.startswith(VERSIONS + "/"):
            return _Place("main", path)
        parts = path.split("/")[2:]
        if not parts:
            return _Place("dir")
        kind = parts[0]
        if len(parts) == 1 and kind in _FILES:
            return _Place("file", name=kind)
        if kind not in _KINDS:
            raise FsError(errno.ENOENT, "no such entry", quiet=True)
        if len(parts) == 1:
            return _Place("dir", name=kind)
        name = parts[1].replace(_SLASH, "/")
        snapshot = self._cached((kind, name), lambda: self.repository.resolve(kind, name))
        return _InVersion("/".join(parts[2:]), self._version(snapshot), snapshot)

    def _cached(self, key: tuple[str, str], compute: Callable[[], T]) -> T:
        """A name resolved or a listing made less than metadata_ttl seconds ago, and since
        the mount last moved its branch (a commit, or a move that commits by itself)."""
        self._follow_branch()
        now = time.monotonic()
        with self._lock:
            made, value = self._resolved.get(key, (0.0, None))
        if value is None or now - made >= self._ttl:
            try:
                value = compute()
            except KeyNotFoundError as exc:
                raise FsError(errno.ENOENT, exc.message, quiet=True) from None
            with self._lock:
                self._resolved[key] = (now, value)
        return cast(T, value)  # (what `compute` made for this key)

    def _follow_branch(self) -> None:
        """Where the mount has moved its branch (a commit, a move that commits by itself),
        forget the names resolved and have the kernel drop what it holds of the versions
        tree: sizes and pages under `branches/NAME/` are the old head's."""
        at = self.store.snapshot_id
        with self._lock:
            if self._resolved_at == at:
                return
            self._resolved.clear()
            self._resolved_at = at
        self.changed(VERSIONS)

    def _version(self, snapshot: str) -> FilesystemCore:
        with self._lock:
            core = self._cores.get(snapshot)
            if core is not None:
                self._cores.move_to_end(snapshot)
                return core
        core = self._open_version(self.repository.snapshot_store(snapshot))
        with self._lock:
            kept = self._cores.setdefault(snapshot, core)
            self._cores.move_to_end(snapshot)
            evicted = [self._cores.popitem(last=False)[1] for _ in range(len(self._cores) - self._keep)]
        if kept is not core:  # another thread opened it meanwhile
            evicted.append(core)
        for old in evicted:  # files still open on it keep reading through its hierarchy
            old.close()
        return kept

    # ------------------------------------------------------------------ reading
    def _in_main(self, path: str) -> bool:
        """Whether the root's tree serves `path` (known without a call to the repository)."""
        return not (path in (COMMIT, VERSIONS) or path.startswith(VERSIONS + "/"))

    def _main_at_hand(self, path: str, listed: bool = False) -> FilesystemCore:
        """The root's tree, for a call with `wait=False` on `path` (NotAtHand outside it, and
        for a `listed` /.zarrfs, whose entries this core adds)."""
        if not self._in_main(path) or (listed and path == INTERNAL):
            raise NotAtHand
        return self.main

    def lookup(self, path: str, *, wait: bool = True) -> Attributes | None:
        if not wait:
            return self._main_at_hand(path).lookup(path, wait=False)
        try:
            place = self._place(path)
        except FsError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise
        if place.kind == "main":
            return self.main.lookup(path)
        if place.kind == "dir":
            return _DIR
        if place.kind == "file":
            return self._file_attributes(place.name)
        if place.kind == "commit":
            return Attributes(False, 0)
        attributes = place.core.lookup(place.rest)
        return None if attributes is None else replace(attributes, writable=False)

    def list_dir(self, path: str, *, wait: bool = True) -> Iterator[tuple[str, Attributes]]:
        if not wait:
            return self._main_at_hand(path, listed=True).list_dir(path, wait=False)
        place = self._place(path)
        if place.kind == "main":
            entries = self.main.list_dir(path)
            if path != INTERNAL:
                return entries
            extra = [("versions", _DIR)] + ([("commit", Attributes(False, 0))] if self.commits else [])
            return iter([*entries, *extra])
        if place.kind == "dir" and not place.name:
            return iter([(kind, _DIR) for kind in _KINDS] + [(name, self._file_attributes(name)) for name in _FILES])
        if place.kind == "dir":
            names = self._cached(("list", place.name), lambda: self.repository.names(place.name))
            return iter([(name.replace("/", _SLASH), _DIR) for name in names if name not in (".", "..")])
        if place.kind == "version":
            return ((name, replace(a, writable=False)) for name, a in place.core.list_dir(place.rest))
        raise FsError(errno.ENOTDIR, "not a directory")

    def open(self, path: str, flags: int, *, wait: bool = True) -> OpenFile:
        if not wait:
            return self._main_at_hand(path).open(path, flags, wait=False)
        place = self._place(path)
        if place.kind == "main":
            return self.main.open(path, flags)
        if place.kind == "commit":
            return CommitFile(lambda message: self.commit(message, rebase=True))
        if place.kind == "dir":
            raise FsError(errno.EISDIR, "is a directory")
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            raise FsError(errno.EROFS, "older versions are read-only")
        if place.kind == "file":
            text = self._render(place.name)
            return ViewFile(BytesView(lambda: text), None, direct_io=True, keep_cache=False)
        file = place.core.open(place.rest, flags)
        with self._lock:
            if self._opened_in.setdefault(path, place.snapshot) != place.snapshot:
                self._opened_in[path] = place.snapshot
                file.keep_cache = False
        return file

    def xattrs(self, path: str) -> dict[str, bytes]:
        place = self._place(path)
        if place.kind == "main":
            return self.main.xattrs(path)
        return place.core.xattrs(place.rest) if place.kind == "version" else {}

    def _file_attributes(self, name: str) -> Attributes:
        return Attributes(False, len(self._render(name)), writable=False)

    def _render(self, name: str) -> bytes:
        if name == "current":
            staged = "changes staged, not committed\n" if self.commits and self.store.has_staged_changes() else ""
            return f"{self.store.version}\n{staged}".encode()
        return self._cached(("log", ""), self._log)

    def _log(self) -> bytes:
        # the log of the mounted branch, which may have moved
        head = self.repository.resolve(BRANCHES, self.store.branch) if self.commits else self.store.snapshot_id
        return "".join(entry.log_line() + "\n" for entry in self.repository.log(head)).encode()

    # ------------------------------------------------------------------ writing
    def _main_only(self, path: str) -> None:
        kind = self._place(path).kind
        if kind != "main":
            raise FsError(errno.EROFS, "the versions tree is read-only")

    def create(self, path: str) -> tuple[OpenFile, Attributes]:
        self._main_only(path)
        return self.main.create(path)

    def truncate(self, path: str, size: int) -> None:
        if self._place(path).kind == "commit":
            return  # the message starts empty at each open
        self._main_only(path)
        self.main.truncate(path, size)

    def mkdir(self, path: str) -> Attributes:
        self._main_only(path)
        return self.main.mkdir(path)

    def set_attributes(self, path: str, meta: FileMeta) -> Attributes:
        self._main_only(path)
        return self.main.set_attributes(path, meta)

    def unlink(self, path: str) -> None:
        self._main_only(path)
        self.main.unlink(path)

    def rmdir(self, path: str) -> None:
        self._main_only(path)
        self.main.rmdir(path)

    def rename(self, src: str, dst: str, replace: bool = True) -> None:
        self._main_only(src)
        self._main_only(dst)
        self.main.rename(src, dst, replace)
        self._follow_branch()

    def link(self, src: str, dst: str) -> Attributes:
        self._main_only(dst)
        return self.main.link(src, dst)

    def set_xattr(self, path: str, name: str, value: bytes) -> None:
        self._main_only(path)
        self.main.set_xattr(path, name, value)

    def remove_xattr(self, path: str, name: str) -> None:
        self._main_only(path)
        self.main.remove_xattr(path, name)

    # ------------------------------------------------------------------ commits
    def commit(self, message: str, *, rebase: bool = False) -> str:
        """Store what is buffered, commit what is staged: `committed ID` or `unchanged
        ID`. Raises CommitConflictError, the changes staying staged."""
        with self._commit_lock:
            self.main.store_buffered()
            snapshot = self.store.commit(message, rebase=rebase)
        self._follow_branch()
        if snapshot is None:
            return f"unchanged {self.store.snapshot_id}"
        log.info("committed branch %s: snapshot %s (%s)", self.store.branch, snapshot, message)
        return f"committed {snapshot}"

    # ---------------------------------------------------------------- the mount
    def stats(self) -> dict[str, Any]:
        return self.main.stats()

    def warm_up(self) -> None:
        self.main.warm_up()

    def shutdown(self) -> None:
        """Store what is buffered, then commit what is staged. A conflict is rebased
        where the other writer touched other chunks; where it touched the same ones, the
        changes are committed onto a new branch of their own, and the log names it."""
        if self._periodic is not None:
            self._periodic.stop()
        self.main.shutdown()
        if not self.commits or not self.store.has_staged_changes():
            return
        name = self.store.branch
        try:
            try:
                log.info("at unmount: %s", self.commit(UNMOUNT_MESSAGE, rebase=True))
            except CommitConflictError as exc:
                branch, snapshot = self.store.commit_aside(UNMOUNT_MESSAGE)
                log.error(
                    "the changes staged on branch %s conflict with its new commits (%s): "
                    "committed as snapshot %s on a new branch %s",
                    name,
                    exc.message,
                    snapshot,
                    branch,
                )
        except Exception as exc:
            log_failure("commit at unmount", "/", exc)
            log.error("the changes staged on branch %s are lost: %s", name, exc)

    def close(self) -> None:
        self.main.close()
        with self._lock:
            cores, self._cores = list(self._cores.values()), OrderedDict()
        for core in cores:
            core.close()
        self.repository.close()
