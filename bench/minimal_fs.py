"""The FUSE ceiling: the smallest pyfuse3 + trio filesystems there are. Whatever they
cannot do, no pyfuse3 filesystem can do on the same machine.

    python bench/minimal_fs.py MOUNTPOINT SIZE              # one file `data` of SIZE bytes
    python bench/minimal_fs.py MOUNTPOINT --tree TREE.json  # a tree: {"path": size, "dir": null}
    python bench/minimal_fs.py MOUNTPOINT --mirror DIR      # the tree of DIR (names, kinds, sizes)

Each serves until unmounted. With SIZE, reads of `data` are slices of one constant buffer
(bench/read.py times `dd` on it). With a tree, lookups, `stat`, opening and listing a
directory are dictionary lookups and nothing else: every answer is built once, at start,
and given the attribute and entry timeouts zarrfs gives (its `--metadata-ttl`, 10 s);
bench/remote.py times `find` on it. `walk` and `build` turn a directory into such a tree
and a tree into a plain directory.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path

import pyfuse3
import trio

PATTERN = memoryview(os.urandom(4 << 20))
TTL = 10.0  # zarrfs's --metadata-ttl default, which it gives as entry and attribute timeout


class MinimalOperations(pyfuse3.Operations):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    async def getattr(self, inode, ctx=None):
        attr = pyfuse3.EntryAttributes()
        attr.st_ino = inode
        if inode == pyfuse3.ROOT_INODE:
            attr.st_mode, attr.st_size = stat.S_IFDIR | 0o755, 0
        else:
            attr.st_mode, attr.st_size = stat.S_IFREG | 0o644, self.size
        attr.attr_timeout = attr.entry_timeout = 300
        return attr

    async def lookup(self, parent_inode, name, ctx=None):
        if parent_inode != pyfuse3.ROOT_INODE or name != b"data":
            raise pyfuse3.FUSEError(errno.ENOENT)
        return await self.getattr(pyfuse3.ROOT_INODE + 1)

    async def open(self, inode, flags, ctx):
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)

    async def read(self, fh, offset, size):
        start = offset % (len(PATTERN) // 2)
        return PATTERN[start : start + min(size, self.size - offset)]


# ------------------------------------------------------------------------- trees
def walk(root: str | Path) -> dict[str, int | None]:
    """The tree under `root` as {relative path: size, or None for a directory}."""
    tree: dict[str, int | None] = {}
    for top, dirs, files in os.walk(root):
        rel = os.path.relpath(top, root)
        prefix = "" if rel == "." else rel + "/"
        for name in dirs:
            tree[prefix + name] = None
        for name in files:
            tree[prefix + name] = os.lstat(os.path.join(top, name)).st_size
    return tree


def build(tree: dict[str, int | None], root: str | Path) -> None:
    """A plain directory of the tree's shape under `root`: files of the sizes, sparse."""
    for path, size in sorted(tree.items()):
        target = Path(root, path)
        if size is None:
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as f:
                f.truncate(size)


class TreeOperations(pyfuse3.Operations):
    """A read-only tree held in dictionaries: inode -> attributes, (parent, name) -> inode,
    directory inode -> its entries (`.` and `..` first, as zarrfs lists them)."""

    supports_dot_lookup = False

    def __init__(self, tree: dict[str, int | None]) -> None:
        super().__init__()
        self.attrs: dict[int, pyfuse3.EntryAttributes] = {}
        self.names: dict[tuple[int, bytes], int] = {}
        self.entries: dict[int, list[tuple[bytes, int]]] = {}
        self.inodes = {"": pyfuse3.ROOT_INODE}
        self._add_dir("", pyfuse3.ROOT_INODE)
        for path in sorted(tree):
            self._add(path, tree[path])

    def _add(self, path: str, size: int | None) -> int:
        if path in self.inodes:
            return self.inodes[path]
        parent_path, _, name = path.rpartition("/")
        parent = self._add(parent_path, None)
        inode = len(self.inodes) + pyfuse3.ROOT_INODE
        self.inodes[path] = inode
        self.names[parent, os.fsencode(name)] = inode
        self.entries[parent].append((os.fsencode(name), inode))
        if size is None:
            self._add_dir(path, inode, parent)
        else:
            self.attrs[inode] = _attributes(inode, stat.S_IFREG | 0o444, size)
        return inode

    def _add_dir(self, path: str, inode: int, parent: int = pyfuse3.ROOT_INODE) -> None:
        self.attrs[inode] = _attributes(inode, stat.S_IFDIR | 0o555, 0)
        self.entries[inode] = [(b".", inode), (b"..", parent)]

    async def lookup(self, parent_inode, name, ctx=None):
        inode = self.names.get((parent_inode, name))
        if inode is None:  # a negative entry, as zarrfs gives
            entry = pyfuse3.EntryAttributes()
            entry.st_ino, entry.entry_timeout = 0, TTL
            return entry
        return self.attrs[inode]

    async def getattr(self, inode, ctx=None):
        return self.attrs[inode]

    async def opendir(self, inode, ctx):
        if inode not in self.entries:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        return inode

    async def readdir(self, fh, start_id, token):
        entries, attrs = self.entries[fh], self.attrs
        for offset in range(start_id, len(entries)):
            name, inode = entries[offset]
            if not pyfuse3.readdir_reply(token, name, attrs[inode], offset + 1):
                return

    async def releasedir(self, fh):
        pass

    async def statfs(self, ctx):
        """As zarrfs answers: `find` asks once per directory where this fails."""
        st = pyfuse3.StatvfsData()
        st.f_bsize = st.f_frsize = 4096
        st.f_blocks = st.f_bfree = st.f_bavail = 1 << 38
        st.f_files = st.f_ffree = st.f_favail = 1 << 32
        st.f_namemax = 255
        return st


def _attributes(inode: int, mode: int, size: int) -> pyfuse3.EntryAttributes:
    attr = pyfuse3.EntryAttributes()
    attr.st_ino, attr.st_mode, attr.st_size = inode, mode, size
    attr.st_nlink = 2 if stat.S_ISDIR(mode) else 1
    attr.st_uid, attr.st_gid = os.getuid(), os.getgid()
    attr.st_blksize, attr.st_blocks = 1 << 20, -(-size // 512)
    attr.attr_timeout = attr.entry_timeout = TTL
    return attr


def main() -> None:
    mountpoint, what = sys.argv[1], sys.argv[2]
    if what == "--tree":
        with open(sys.argv[3]) as f:
            operations, name = TreeOperations(json.load(f)), "minimal-tree"
    elif what == "--mirror":
        operations, name = TreeOperations(walk(sys.argv[3])), "minimal-tree"
    else:
        operations, name = MinimalOperations(int(what)), "minimal"
    options = set(pyfuse3.default_options) | {f"fsname={name}"}
    if name == "minimal-tree":
        options.add("ro")  # as zarrfs mounts with --read-only
    pyfuse3.init(operations, mountpoint, options)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
