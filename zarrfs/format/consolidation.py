"""Consolidated metadata kept true after changes (docs/semantics.md): which nodes changed, and the
consolidated documents (v3 `consolidated_metadata` in a group's zarr.json, v2
`.zmetadata`) rewritten from the store's own node documents as `zarr.consolidate_metadata`
writes them. When to write is the caller's choice (`flush`); this room knows what."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from ..store import Store
from ..store.keys import ancestors
from .consolidated_erases import WAIT, held_nodes
from .consolidated_erases import kept as kept_consolidated_of
from .consolidated_writes import NOT_CONSOLIDATED as _NOT_CONSOLIDATED
from .consolidated_writes import WRITE_ATTEMPTS, conflict, group_document, pause
from .consolidated_writes import dump_consolidated as _dump
from .consolidated_writes import relative_to as _relative
from .errors import MetadataError
from .metadata import load_json
from .nodes import MAX_DOCUMENT_BYTES, V2_NAMES

# zarr-python marks each group it lists in consolidated metadata as holding none below it
_EMPTY_CONSOLIDATED = {"kind": "inline", "must_understand": False, "metadata": {}}


def groups_of(path: str) -> set[str]:
    """The groups whose consolidated documents a change of the node at `path` concerns:
    those above it, and its own (a v2 group's .zmetadata lists the group's documents)."""
    path = path.strip("/")
    return {path, *ancestors(path)}


def _is_group_entry(entry: Any) -> bool:
    """Whether a consolidated entry (v3: the document; v2: the documents by name) is a group's."""
    if not isinstance(entry, dict):
        return False
    return entry.get("node_type") == "group" or (".zgroup" in entry and ".zarray" not in entry)


class ConsolidatedUpkeep:
    """Thread-safe. `touched` records a change (a node's documents, or a whole subtree:
    erased, moved, made); `flush` rewrites the consolidated documents of every group above
    the changes that carries them, reading the changed nodes' documents from the store,
    and writes nothing where no group carries any. A failed flush keeps its changes for
    the next one."""

    def __init__(self, store: Store, listener: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.listener = listener  # told after each change recorded
        self._lock = threading.Lock()  # guards the two sets below
        self._nodes: set[str] = set()  # paths whose own documents changed
        self._subtrees: set[str] = set()  # paths whose whole subtree changed
        self._flushing = threading.Lock()  # one flush at a time
        self._leaving: set[str] = set()  # nodes being erased or moved away: listed by no rewrite
        # groups an erase stripped of their consolidated metadata: (v2, what it held, [when
        # stripped, when last erased below]) until a flush writes it back (consolidated_erases.py)
        self._stripped: dict[str, tuple[bool, dict[str, Any], list[float]]] = {}
        # held by each rewrite of a document and each erase's step there (taken last, after
        # the callers' document locks): a write back of what was kept never lists a node
        # whose erase took it out meanwhile
        self._rewriting = threading.Lock()
        self.waiting = True  # whether a group stripped by erases waits for them to pause
        self._plain: dict[str, float] = {}  # groups found carrying none, when (consolidated_erases.py)
        self._erased: dict[str, float] = {}  # groups by when a node below was last erased (the same)
        self.writes = 0  # consolidated documents written (for the stats)
        self.retries = 0  # rewrites made again on another writer's version (for the stats)

    def touched(self, path: str, subtree: bool = False) -> None:
        with self._lock:
            (self._subtrees if subtree else self._nodes).add(path.strip("/"))
            self._plain.pop(path.strip("/"), None)  # (its document may carry some now)
        self.listener()

    @contextlib.contextmanager
    def leaving(self, path: str, erased: bool = False) -> Iterator[None]:
        """While the node at `path` is erased or moved away: first the consolidated
        documents above it are rewritten without it (and what is below it), and no rewrite
        lists it until the block ends; so that a crash at any point of an erase or move
        that is not atomic (an object store's copies and deletes) leaves consolidated
        metadata that lists no node whose documents are gone. Its new name is listed by
        a later flush (`touched`). `erased`: see `_erasing`."""
        path = path.strip("/")
        with self._lock:
            self._leaving.add(path)
        try:
            for group in ancestors(path):
                if erased:
                    self._erasing(group, path)
                else:
                    self._write_group(group, set(), {path}, set(), {})
            yield
        finally:
            with self._lock:
                self._leaving.discard(path)

    def _unless_leaving(self, read: Callable[..., Any]) -> Callable[[list[str]], dict[str, tuple[Any, bool]]]:
        def reading(paths: list[str]) -> dict[str, tuple[Any, bool]]:
            with self._lock:
                leaving = tuple(self._leaving)
            found = read(paths)
            return {p: v for p, v in found.items() if not any(p == x or p.startswith(x + "/") for x in leaving)}

        return reading

    def _erasing(self, group: str, path: str) -> None:
        from .consolidated_erases import erasing

        erasing(self, group, path)

    @property
    def pending(self) -> bool:
        with self._lock:
            return bool(self._nodes or self._subtrees or self._stripped)

    def flush(
        self,
        paths: Iterable[str] = (),
        locked: Callable[[list[str]], contextlib.AbstractContextManager[Any]] = lambda groups: contextlib.nullcontext(),
        now: bool = False,
    ) -> int:
        """Write the consolidated documents the pending changes concern, and those of the
        groups at and above `paths` rewritten as they are (to learn before a change that
        they can be written), each read and written within `locked(groups)` (the callers'
        locks of those groups' documents). `now`: groups that erases stripped are written
        back even while the erases go on (an fsync, the unmount). Returns the documents
        written; raises the store's error, keeping the changes pending."""
        with self._flushing:
            self.waiting = not now
            with self._lock:
                nodes, subtrees = self._nodes, self._subtrees
                self._nodes, self._subtrees = set(), set()
                stripped = set(self._stripped)
            probed = set().union(*map(groups_of, paths)) - set(paths)
            groups = sorted(set().union(probed, stripped, *map(groups_of, nodes | subtrees)))
            try:
                with locked(groups):
                    return self._write(groups, nodes, subtrees, probed)
            except BaseException:
                with self._lock:
                    self._nodes |= nodes
                    self._subtrees |= subtrees
                raise

    # ------------------------------------------------------------------ writing
    def _write(self, ordered: list[str], nodes: set[str], subtrees: set[str], probed: set[str]) -> int:
        seen: dict[tuple[str, bool], Any] = {}  # the changed nodes' entries as read, to check after
        written = sum(self._write_group(group, nodes, subtrees, probed, seen) for group in ordered)
        self._check_unchanged(seen)
        return written

    def _write_group(
        self,
        group: str,
        nodes: set[str],
        subtrees: set[str],
        probed: set[str],
        seen: dict[tuple[str, bool], Any],
    ) -> int:
        """Rewrite the consolidated document of `group` (its zarr.json, else its v2
        .zmetadata) on the version read: where another writer replaced it meanwhile, the
        changes are applied again to what it wrote (its entries stay). 1 if written."""
        for attempt in range(WRITE_ATTEMPTS):
            with self._rewriting:
                key, raw, version, v2 = group_document(self.store, group)
                kept = kept_consolidated_of(self, group, raw, v2, wait=group not in probed)
                if kept is WAIT:  # erases below it go on: its changes wait for the next flush
                    with self._lock:
                        self._nodes |= {p for p in nodes if _relative(p, group) is not None}
                        self._subtrees |= {p for p in subtrees if _relative(p, group) is not None}
                    return 0
                if kept is not None:  # stripped by an erase: what it held is written back,
                    # each node read again (other writers' changes while it was stripped
                    # were consolidated nowhere), as zarr.consolidate_metadata would
                    raw, probed = kept, probed | {group}
                    subtrees = subtrees | held_nodes(self, group)
                if raw is None:
                    return 0
                read = self._unless_leaving(self._recorded(self._v2_entries if v2 else self._v3_entries, v2, seen))
                try:
                    new = (self._rewritten_v2 if v2 else self._rewritten_v3)(group, raw, nodes, subtrees, read)
                except MetadataError:
                    return 0  # not a document this room can rewrite: the group's own readers say so
                if new is _NOT_CONSOLIDATED or (new is None and group not in probed):
                    return 0
                if self.store.set_if(key, raw if new is None else bytes(new), version):
                    self.writes += 1
                    if kept is not None:
                        with self._lock:
                            self._stripped.pop(group, None)
                    return 1
            self.retries += 1
            pause(attempt)
        raise conflict(key)

    @staticmethod
    def _recorded(read: Callable[..., Any], v2: bool, seen: dict[tuple[str, bool], Any]) -> Callable[..., Any]:
        def recording(paths: list[str]) -> dict[str, tuple[Any, bool]]:
            found = read(paths)
            seen.update(((p, v2), found.get(p)) for p in paths)
            return cast("dict[str, tuple[Any, bool]]", found)

        return recording

    def _check_unchanged(self, seen: dict[tuple[str, bool], Any]) -> None:
        """Read the changed nodes again: one another writer changed since it was read may
        be listed as it was (its writer's own rewrite came first), so it is written again
        at the next flush."""
        changed = set()
        for v2 in (False, True):
            paths = [p for p, is_v2 in seen if is_v2 == v2]
            if paths:
                now = (self._v2_entries if v2 else self._v3_entries)(paths)
                changed |= {p for p in paths if _dump(now.get(p), None) != _dump(seen[(p, v2)], None)}
        if changed:
            with self._lock:
                self._nodes |= changed
            self.listener()

    def _rewritten_v3(
        self,
        group: str,
        raw: bytes,
        nodes: set[str],
        subtrees: set[str],
        read: Callable[..., Any],
        reconcile: bool = True,
    ) -> Any:
        """The group's zarr.json with its consolidated metadata brought up to date; None
        where nothing changed, _NOT_CONSOLIDATED where it carries none."""
        document = load_json(raw, f"/{group}/zarr.json")
        held = document.get("consolidated_metadata") if isinstance(document, dict) else None
        if (
            not isinstance(held, dict)
            or held.get("kind", "inline") != "inline"
            or not isinstance(held.get("metadata"), dict)
        ):
            return _NOT_CONSOLIDATED
        entries = dict(held["metadata"])
        before = dict(entries)
        self._apply(group, entries, nodes, subtrees, read, reconcile=reconcile)
        if entries == before:
            return None
        held = dict(held, metadata={k: entries[k] for k in sorted(entries)})
        # (entries only dropped, for an erase to keep: compact, the encoder's fast path)
        return _dump(dict(document, consolidated_metadata=held), 2 if reconcile else None)

    def _rewritten_v2(
        self,
        group: str,
        raw: bytes,
        nodes: set[str],
        subtrees: set[str],
        read: Callable[..., Any],
        reconcile: bool = True,
    ) -> Any:
        """As _rewritten_v3, for a v2 group's .zmetadata."""
        document = load_json(raw, f"/{group}/.zmetadata")
        if not isinstance(document, dict) or not isinstance(document.get("metadata"), dict):
            return _NOT_CONSOLIDATED
        # v2 keys name documents ("a/.zarray"); group them by node path, the group's own ("")
        entries: dict[str, dict[str, Any]] = {}
        for key, value in document["metadata"].items():
            path, _, name = key.rpartition("/")
            entries.setdefault(path, {})[name] = value
        before = {p: dict(d) for p, d in entries.items()}
        self._apply(group, entries, nodes, subtrees, read, include_self=True, reconcile=reconcile)
        if entries == before:
            return None
        flat = {(f"{p}/{n}" if p else n): d for p in sorted(entries) for n, d in entries[p].items()}
        return _dump(dict(document, metadata=flat), None)

    def _apply(
        self,
        group: str,
        entries: dict[str, Any],
        nodes: set[str],
        subtrees: set[str],
        read: Callable[..., Any],
        include_self: bool = False,
        reconcile: bool = True,
    ) -> None:
        """Replace, in `entries` (relative path -> entry), those of the changed nodes below
        `group` with what the store holds now (and, with `reconcile`, bring the listing of
        their parents in line)."""
        for path in sorted(subtrees):
            rel = _relative(path, group)
            if rel is None or (rel == "" and not include_self):
                continue
            below = rel + "/" if rel else ""
            for key in [k for k in entries if k == rel or k.startswith(below)]:
                del entries[key]
            entries.update(self._walk(group, path, read, include_self))
        for path in sorted(nodes - subtrees):
            rel = _relative(path, group)
            if (
                rel is None
                or (rel == "" and not include_self)
                or any(path == s or path.startswith(s + "/") for s in subtrees)
            ):
                continue
            entry = read([path]).get(path)
            if entry is None:
                entries.pop(rel, None)
            else:
                entries[rel] = entry[0]
        if reconcile:
            self._reconcile(group, entries, nodes | subtrees, read, include_self)

    def _reconcile(
        self, group: str, entries: dict[str, Any], paths: set[str], read: Callable[..., Any], include_self: bool
    ) -> None:
        """Bring the entries of the nodes directly below the groups that hold `paths` in
        line with the store's listing: nodes other writers made there are added (walked),
        those they removed are dropped."""
        for parent in sorted({p.rpartition("/")[0] for p in paths if p}):
            rel = _relative(parent, group)
            if rel is None or (rel and not _is_group_entry(entries.get(rel))):
                continue  # outside the group, or below no listed group (zarr-python lists none there)
            below = rel + "/" if rel else ""
            held = {k[len(below) :] for k in entries if k.startswith(below) and k != rel}
            held = {name for name in held if name and "/" not in name}
            listed = set(self.store.list_dir(parent + "/" if parent else "")[1])
            for name in sorted(held - listed):
                for key in [k for k in entries if k == below + name or k.startswith(below + name + "/")]:
                    del entries[key]
            for name in sorted(listed - held):
                entries.update(self._walk(group, f"{parent}/{name}" if parent else name, read, include_self))

    def _walk(self, group: str, top: str, read: Callable[..., Any], include_self: bool) -> dict[str, Any]:
        """The entries of the nodes at and below `top`, as the store holds them now:
        groups with documents are descended, implicit ones (no documents) are not, as
        zarr-python's own walk does."""
        out: dict[str, Any] = {}
        level = [top]
        while level:
            found = read(level)
            level = []
            for path, (entry, is_group) in sorted(found.items()):
                rel = _relative(path, group)
                assert rel is not None  # what is walked is at or below top, inside group
                if rel or include_self:
                    out[rel] = entry
                if is_group:
                    prefix = f"{path}/" if path else ""
                    level += [prefix + name for name in self.store.list_dir(prefix)[1]]
        return out

    def _documents(self, paths: list[str], names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        keys = [(f"{p}/" if p else "") + n for p in paths for n in names]
        got = self._values(keys)
        values = [got[k] for k in keys]
        out: dict[str, dict[str, Any]] = {p: {} for p in paths}
        for (path, name), raw in zip(((p, n) for p in paths for n in names), values):
            if raw is not None:
                with contextlib.suppress(MetadataError):  # left out, as zarr-python could not list it either
                    out[path][name] = load_json(raw, f"/{path}/{name}")
        return out

    def _values(self, keys: list[str]) -> dict[str, bytes | None]:
        values = self.store.get_partial_values([(k, None) for k in keys], max_size=MAX_DOCUMENT_BYTES) if keys else []
        return dict(zip(keys, values))

    def _v3_entries(self, paths: list[str]) -> dict[str, tuple[Any, bool]]:
        """path -> (its consolidated entry, whether it is a group) for those that are nodes."""
        out = {}
        for path, docs in self._documents(paths, ("zarr.json",)).items():
            document = docs.get("zarr.json")
            if not isinstance(document, dict) or document.get("node_type") not in ("array", "group"):
                continue
            is_group = document["node_type"] == "group"
            if is_group:
                document = dict(document, consolidated_metadata=_EMPTY_CONSOLIDATED)
            out[path] = (document, is_group)
        return out

    def _v2_entries(self, paths: list[str]) -> dict[str, tuple[Any, bool]]:
        out = {}
        for path, docs in self._documents(paths, V2_NAMES).items():
            if ".zarray" in docs or ".zgroup" in docs:
                out[path] = (docs, ".zarray" not in docs)
        return out
