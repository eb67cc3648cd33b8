"""The FUSE ceiling: the smallest pyfuse3 + trio filesystem there is, one file `data` of
SIZE bytes whose reads are slices of one constant buffer. Whatever it cannot do, no
pyfuse3 filesystem can do on the same machine; bench/read.py compares zarrfs with it.

    python bench/minimal_fs.py MOUNTPOINT SIZE      # serves until unmounted
"""

from __future__ import annotations

import errno
import os
import stat
import sys

import pyfuse3
import trio

PATTERN = memoryview(os.urandom(4 << 20))


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
        return PATTERN[start:start + min(size, self.size - offset)]


def main() -> None:
    mountpoint, size = sys.argv[1], int(sys.argv[2])
    pyfuse3.init(MinimalOperations(size), mountpoint, set(pyfuse3.default_options) | {"fsname=minimal"})
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
