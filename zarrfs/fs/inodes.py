"""Inode numbers for virtual paths, allocated on first sight and kept while the kernel
knows them: each entry handed to the kernel (lookup, readdirplus, create, mkdir, link)
counts one lookup, `forget` takes them back, and a number the kernel has forgotten is
dropped, so that the table holds what the kernel holds (not every path ever listed).

The kernel may hold some 13 names for each array of a group walked by `find` (260,000
for 20,000 arrays): what is kept of each is small. A name is a slot of a few arrays (its
parent's slot, its name, shared between nodes, its lookups, its neighbours in its
parent's list of names), not its whole path; a directory of more than INDEXED names has
a dictionary of them besides: some 50 bytes a name, against 216 for a path kept twice
with its number (`BYTES_PER_NAME`, measured). A number is its slot and the
times that slot was used before (high bits): a slot freed is used again, a number never
while the kernel may still hold it."""

from __future__ import annotations

import sys
import threading
from array import array

ROOT_INODE = 1  # FUSE's
_ROOT = 1  # the root's slot (0 is never used)
_SLOT_BITS = 32
_SLOT_MASK = (1 << _SLOT_BITS) - 1
# what the table holds for a name the kernel holds, measured (tracemalloc) over the names
# of a walk of a group of small arrays (tests/fs/core/test_group_memory.py checks it)
BYTES_PER_NAME = 52
INDEXED = 16  # names of a directory found by a look along its list, past it by a dictionary


class InodeTable:
    def __init__(self) -> None:
        # by slot: its name, its parent's slot, the times it was used before, the kernel's
        # lookups of its number, its first name below and its neighbours among its
        # parent's (0: none), how many names are below it, whether its number was handed
        # out (a slot not numbered is kept while numbered ones lie below it)
        self._names: list[str] = ["", ""]
        self._parents, self._uses, self._lookups = array("I", [0, 0]), array("I", [0, 0]), array("I", [0, 0])
        self._first, self._next, self._prev = array("I", [0, 0]), array("I", [0, 0]), array("I", [0, 0])
        self._sizes = array("I", [0, 0])
        self._numbered = bytearray(b"\0\1")
        self._index: dict[int, dict[str, int]] = {}  # slot -> its names' slots, past INDEXED of them
        self._free = array("I")  # slots to use again
        self._count = 1  # numbered slots (the root)
        self._lock = threading.Lock()  # the notifier thread reads the table meanwhile

    @property
    def bytes(self) -> int:
        """What the table is counted for (the names held, BYTES_PER_NAME each)."""
        return (len(self._names) - len(self._free)) * BYTES_PER_NAME

    # ------------------------------------------------------------ slots and numbers
    def _number_of(self, slot: int) -> int:
        return (self._uses[slot] << _SLOT_BITS) | slot

    def _slot_of_number(self, ino: int) -> int | None:
        """The slot of number `ino` where it is numbered; None once it was forgotten."""
        slot = ino & _SLOT_MASK
        if 0 < slot < len(self._names) and self._numbered[slot] and self._uses[slot] == ino >> _SLOT_BITS:
            return slot
        return None

    def _child(self, parent: int, name: str) -> int:
        """The slot of `name` below `parent`; 0 where there is none."""
        index = self._index.get(parent)
        if index is not None:
            return index.get(name, 0)
        names, following = self._names, self._next
        slot = self._first[parent]
        while slot and names[slot] != name:
            slot = following[slot]
        return slot

    def _below(self, parent: int) -> list[int]:
        out, slot = [], self._first[parent]
        while slot:
            out.append(slot)
            slot = self._next[slot]
        return out

    def _slot(self, vpath: str) -> int:
        """The slot of `vpath`, numbered or not; 0 where there is none."""
        slot = _ROOT
        if vpath:
            for name in vpath.split("/"):
                slot = self._child(slot, name)
                if not slot:
                    return 0
        return slot

    def _made(self, vpath: str) -> int:
        """The slot of `vpath`, made where there is none (with those above it)."""
        slot = _ROOT
        if vpath:
            for name in vpath.split("/"):
                found = self._child(slot, name)
                slot = found if found else self._new(sys.intern(name), slot)
        return slot

    def _new(self, name: str, parent: int) -> int:
        if self._free:
            slot = self._free.pop()
            self._names[slot] = name
            self._lookups[slot] = self._first[slot] = self._sizes[slot] = 0
        else:
            slot = len(self._names)
            self._names.append(name)
            for column in (self._parents, self._uses, self._lookups, self._first, self._next, self._prev, self._sizes):
                column.append(0)
            self._numbered.append(0)
        self._attach(slot, parent)
        return slot

    def _attach(self, slot: int, parent: int) -> None:
        """Put `slot` (its name set) in `parent`'s list."""
        self._parents[slot] = parent
        first = self._first[parent]
        self._prev[slot], self._next[slot] = 0, first
        if first:
            self._prev[first] = slot
        self._first[parent] = slot
        self._sizes[parent] += 1
        index = self._index.get(parent)
        if index is not None:
            index[self._names[slot]] = slot
        elif self._sizes[parent] > INDEXED:
            self._index[parent] = {self._names[s]: s for s in self._below(parent)}

    def _detach(self, slot: int) -> None:
        """Take `slot` out of its parent's list."""
        parent, following, before = self._parents[slot], self._next[slot], self._prev[slot]
        if before:
            self._next[before] = following
        else:
            self._first[parent] = following
        if following:
            self._prev[following] = before
        self._sizes[parent] -= 1
        index = self._index.get(parent)
        if index is not None:
            del index[self._names[slot]]
            if self._sizes[parent] <= INDEXED // 2:
                del self._index[parent]

    def _path(self, slot: int) -> str:
        names = []
        while slot != _ROOT:
            names.append(self._names[slot])
            slot = self._parents[slot]
        return "/".join(reversed(names))

    def _unnumber(self, slot: int) -> None:
        if self._numbered[slot]:
            self._numbered[slot] = 0
            self._count -= 1

    def _release(self, slot: int) -> None:
        """Free `slot` and the slots above it that no longer lead to a numbered one."""
        while slot != _ROOT and not self._numbered[slot] and not self._first[slot]:
            parent = self._parents[slot]
            self._detach(slot)
            self._free_slot(slot)
            slot = parent

    def _free_slot(self, slot: int) -> None:
        """(Out of its parent's list, or in a list that goes with it.)"""
        self._index.pop(slot, None)
        self._unnumber(slot)
        self._names[slot] = ""
        self._first[slot] = self._sizes[slot] = 0
        self._uses[slot] = (self._uses[slot] + 1) & _SLOT_MASK  # its next number is not this one
        self._free.append(slot)

    def _subtree(self, slot: int) -> list[int]:
        found, at = [], [slot]
        while at:
            s = at.pop()
            found.append(s)
            at.extend(self._below(s))
        return found

    # ------------------------------------------------------------------ the table
    def inode(self, vpath: str) -> int:
        """The number of `vpath`, without a lookup counted (getattr, `.` and `..`)."""
        with self._lock:
            return self._number_of(self._numbered_slot(vpath))

    def lookup(self, vpath: str) -> int:
        """The number of `vpath`, handed to the kernel: one lookup more."""
        with self._lock:
            slot = self._numbered_slot(vpath)
            self._lookups[slot] += 1
            return self._number_of(slot)

    def _numbered_slot(self, vpath: str) -> int:
        """The slot of `vpath`, numbered on first sight (the lock held)."""
        slot = self._made(vpath)
        if not self._numbered[slot]:
            self._numbered[slot] = 1
            self._lookups[slot] = 0  # (none yet: `lookup` counts one)
            self._count += 1
        return slot

    def under(self, path: str) -> list[int]:
        """The numbers of `path` and of the paths below it."""
        with self._lock:
            slot = self._slot(path)
            if not slot:
                return []
            return [self._number_of(s) for s in self._subtree(slot) if self._numbered[s]]

    def forget(self, ino: int, nlookup: int) -> None:
        """The kernel forgot `nlookup` lookups of `ino`; at none left, the number goes."""
        if ino == ROOT_INODE:
            return
        with self._lock:
            slot = self._slot_of_number(ino)
            if slot is None:
                return
            left = self._lookups[slot] - nlookup
            if left > 0:
                self._lookups[slot] = left
                return
            self._unnumber(slot)
            self._release(slot)

    def known(self, vpath: str) -> int | None:
        with self._lock:
            slot = self._slot(vpath)
            return self._number_of(slot) if slot and self._numbered[slot] else None

    def path(self, inode: int) -> str:
        found = self.find(inode)
        if found is None:
            raise KeyError(inode)
        return found

    def find(self, inode: int) -> str | None:
        """The path of `inode`; None once what it named was removed."""
        with self._lock:
            slot = self._slot_of_number(inode)
            return None if slot is None else self._path(slot)

    def items(self) -> list[tuple[str, int]]:
        with self._lock:
            return [(self._path(s), self._number_of(s)) for s in range(1, len(self._names)) if self._numbered[s]]

    def __len__(self) -> int:
        return self._count

    def remove_tree(self, path: str) -> None:
        """After a file or directory was removed: a new one at `path` gets a new number."""
        with self._lock:
            slot = self._slot(path) if path else 0
            if not slot:
                return
            parent = self._parents[slot]
            self._detach(slot)
            for s in self._subtree(slot):
                self._free_slot(s)
            self._release(parent)

    def rename_tree(self, old: str, new: str) -> None:
        """After a node moved: paths below `old` now live below `new` (same inodes); a
        number at a path it moves to goes (what was there was replaced)."""
        with self._lock:
            slot = self._slot(old) if old and new else 0
            if not slot:
                return
            parent = self._parents[slot]
            self._detach(slot)
            self._release(parent)
            new_parent, _, name = new.rpartition("/")
            into = self._made(new_parent)
            there = self._child(into, name)
            if there:
                self._detach(there)
            self._names[slot] = sys.intern(name)
            self._attach(slot, into)
            if there:
                self._merge(slot, there)

    def _merge(self, kept: int, replaced: int) -> None:
        """`replaced`'s names go below `kept`, those of the same name merged as these
        (`kept`'s win: their numbers stay, `replaced`'s go)."""
        for child in self._below(replaced):
            mine = self._child(kept, self._names[child])
            if mine:
                self._merge(mine, child)
            else:
                self._attach(child, kept)
        self._free_slot(replaced)
