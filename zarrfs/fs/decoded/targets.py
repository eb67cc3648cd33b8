"""What a scratch file renamed onto a name that means something is stored as (`mv tmp
zarr.json`, rsync's `.x.npy.XXXXXX` onto `x.npy`, sed -i, editors): the same as a program
writing the name itself would store, through the file an open of that name gives (an
array made from a `.npy`, a validated document, a chunk, a store key of an array as it
is written). One entry of TARGETS per kind of name; what is refused there (EINVAL, EEXIST...) fails the rename, and the scratch
file stays."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ...format.metadata import METADATA_NAMES
from .entries import ARRAY, CHUNK, GROUP, KEY, Entry
from .files import BufferFile

if TYPE_CHECKING:
    from ..core import Attributes, OpenFile
    from .store_keys import StoreKeys

SLAB = 32 << 20  # bytes handed to the target's file at once


class TargetCore(Protocol):
    """What storing a scratch file under a target's name asks of the decoded core (core.py):
    its opens, as a program's, and the store's keys of arrays."""

    keys: StoreKeys

    def lookup(self, path: str) -> Attributes | None: ...

    def create(self, path: str) -> tuple[OpenFile, Attributes]: ...

    def open(self, path: str, flags: int) -> OpenFile: ...


@dataclass(frozen=True)
class Target:
    """A kind of name a scratch file can be renamed onto: `means(core, directory, name,
    found)` says whether `name` in `directory` is one (`found`: what the name resolves to
    now, or None)."""

    kind: str
    means: Callable[[TargetCore, Entry, str, Entry | None], bool]


TARGETS = (
    Target(
        "an array made from a .npy",
        lambda core, d, name, found: d.kind == GROUP and name.endswith(".npy") and len(name) > 4,
    ),
    Target("a metadata document", lambda core, d, name, found: d.kind in (GROUP, ARRAY) and name in METADATA_NAMES),
    Target("a chunk", lambda core, d, name, found: found is not None and found.kind == CHUNK),
    # zarr-python's LocalStore writes KEY.<uuid>.partial beside a key, then renames it onto KEY
    Target(
        "a store key",
        lambda core, d, name, found: (found is not None and found.kind == KEY) or core.keys.creates(d, name),
    ),
)


def target_of(core: TargetCore, directory: Entry, name: str, found: Entry | None) -> Target | None:
    return next((t for t in TARGETS if t.means(core, directory, name, found)), None)


def store_as(core: TargetCore, path: str, size: int, read: Callable[[int, int], bytes]) -> None:
    """Write the `size` bytes `read` gives to `path` as a program writing it would:
    open (or create) it truncated, write, close. Raises what the close refuses; then
    nothing is stored."""
    file = core.create(path)[0] if core.lookup(path) is None else core.open(path, os.O_WRONLY | os.O_TRUNC)
    stored = False
    try:
        file.truncate(0)
        offset = 0
        while offset < size:
            offset += file.write(offset, read(offset, min(SLAB, size - offset)))
        if isinstance(file, BufferFile):
            file.commit()
        else:
            file.flush()
        stored = True
    finally:
        if not stored and isinstance(file, BufferFile):
            file.dirty = False  # refused: dropped, never stored at unmount
        try:
            file.release()
        except Exception:
            if stored:
                raise
