"""A FUSE filesystem that never answers: every request waits forever, as on an NFS mount
whose server went away. Serves until killed.

    python tests/fs/mount/hung_fs.py MOUNTPOINT
"""

from __future__ import annotations

import sys

import pyfuse3
import trio


class NeverAnswers(pyfuse3.Operations):
    async def _forever(self, *args, **kwargs):
        await trio.sleep_forever()

    getattr = lookup = opendir = readdir = open = read = statfs = access = listxattr = getxattr = _forever


if __name__ == "__main__":
    pyfuse3.init(NeverAnswers(), sys.argv[1], {"fsname=hung_fs"})
    trio.run(pyfuse3.main)
