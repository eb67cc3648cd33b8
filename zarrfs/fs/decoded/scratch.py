"""Scratch files of the decoded tree: a file created in a group, array or chunk directory
under a name that means nothing there (rsync's `.d1.npy.ga1ZAL`, sed's `sedRp5dMc`, vim's
`.zarr.json.swp`, `zarr.json~` and `4913`, `zarr.json.tmp`). The mount holds them, never
the store: in memory within the scratch files' share, in a spool past it. A scratch file
renamed onto a name that means something is stored as that (targets.py); one left at
unmount is named in the log and dropped."""

from __future__ import annotations

import threading
import time

from ...store import FileMeta
from ..core import Attributes, NotAtHand, OpenFile
from ..spool import Spool


class ScratchContent:
    """The bytes of one scratch file, shared by its opens and kept after its name is
    gone until the last of them closes. Under its table's lock."""

    def __init__(self) -> None:
        self.memory: bytearray | None = bytearray()
        self.spool: Spool | None = None
        self.mtime = time.time()
        self.meta = FileMeta()  # what chmod, chown and utimensat set
        self.opens = 0
        self.named = True  # its name still leads to it

    def size(self) -> int:
        return len(self.memory) if self.memory is not None else self.spool.size() if self.spool else 0

    def read(self, offset: int, size: int) -> bytes:
        if self.memory is not None:
            return bytes(self.memory[offset : offset + size])
        return self.spool.read(offset, size) if self.spool else b""

    def attributes(self) -> Attributes:
        return Attributes(False, self.size(), mtime=self.mtime, meta=self.meta, nlink=None if self.named else 0)


class ScratchFiles:
    """The scratch files of a mount, by path. Thread-safe, under one lock. `budget`: the
    bytes all of them may hold in memory; a file that would take more moves to a spool
    in `spool_dir`."""

    def __init__(self, budget: int, spool_dir: str | None) -> None:
        self.budget = budget
        self.spool_dir = spool_dir
        self.lock = threading.RLock()
        self._files: dict[str, ScratchContent] = {}
        self._in_memory = 0

    def get(self, path: str) -> ScratchContent | None:
        with self.lock:
            return self._files.get(path)

    def under(self, directory: str) -> list[tuple[str, ScratchContent]]:
        """The scratch files directly in `directory`, by name."""
        prefix = directory + "/" if directory else ""
        with self.lock:
            return [
                (p[len(prefix) :], c)
                for p, c in self._files.items()
                if p.startswith(prefix) and "/" not in p[len(prefix) :]
            ]

    def any_below(self, directory: str) -> str | None:
        prefix = directory + "/"
        with self.lock:
            return next((p for p in self._files if p.startswith(prefix)), None)

    def create(self, path: str) -> ScratchContent:
        with self.lock:
            content = self._files.get(path)
            if content is None:
                content = self._files[path] = ScratchContent()
            return content

    def add(self, path: str, data: bytes) -> ScratchContent:
        """A scratch file at `path` holding `data` (replacing one there)."""
        with self.lock:
            self.remove(path)
            content = self._files[path] = ScratchContent()
            self._write(content, 0, data)
            return content

    def remove(self, path: str) -> bool:
        """The name goes; the bytes stay with the opens that hold them."""
        with self.lock:
            content = self._files.pop(path, None)
            if content is None:
                return False
            content.named = False
            if content.opens == 0:
                self._free(content)
            return True

    def rename(self, src: str, dst: str) -> None:
        with self.lock:
            content = self._files.pop(src)
            self.remove(dst)
            self._files[dst] = content

    def moved(self, src: str, dst: str) -> None:
        """A directory moved: the scratch files in it go with it."""
        with self.lock:
            for path in [p for p in self._files if p.startswith(src + "/")]:
                self._files[dst + path[len(src) :]] = self._files.pop(path)

    def left(self) -> list[str]:
        with self.lock:
            return sorted(self._files)

    def opened(self, content: ScratchContent) -> ScratchFile:
        with self.lock:
            content.opens += 1
        return ScratchFile(self, content)

    def released(self, content: ScratchContent) -> None:
        with self.lock:
            content.opens -= 1
            if content.opens == 0 and not content.named:
                self._free(content)

    def write(self, content: ScratchContent, offset: int, data: bytes) -> int:
        with self.lock:
            return self._write(content, offset, data)

    def _write(self, content: ScratchContent, offset: int, data: bytes) -> int:
        end = offset + len(data)
        memory = content.memory
        if memory is not None and end > len(memory) and self._in_memory + end - len(memory) > self.budget:
            self._spill(content)
            memory = None
        if memory is not None:
            grown = max(0, end - len(memory))
            if offset > len(memory):
                memory.extend(bytes(offset - len(memory)))
            memory[offset:end] = data
            self._in_memory += grown
        else:
            assert content.spool is not None
            content.spool.write(offset, data)
        self._changed(content)
        return len(data)

    def truncate(self, content: ScratchContent, size: int) -> None:
        with self.lock:
            memory = content.memory
            if memory is not None and size > len(memory) and self._in_memory + size - len(memory) > self.budget:
                self._spill(content)
                memory = None
            if memory is not None:
                self._in_memory += size - len(memory)
                if size < len(memory):
                    del memory[size:]
                else:
                    memory.extend(bytes(size - len(memory)))
            else:
                assert content.spool is not None
                content.spool.truncate(size)
            self._changed(content)

    def set_meta(self, content: ScratchContent, meta: FileMeta) -> Attributes:
        with self.lock:
            content.meta = content.meta.updated(meta)
            return content.attributes()

    @staticmethod
    def _changed(content: ScratchContent) -> None:
        """A write: the time is now's, whatever utimensat set before (rsync sets it after)."""
        content.mtime = time.time()
        content.meta = FileMeta(content.meta.mode, content.meta.uid, content.meta.gid)

    def _spill(self, content: ScratchContent) -> None:
        assert content.memory is not None
        spool = Spool(self.spool_dir)
        spool.write(0, bytes(content.memory))
        self._in_memory -= len(content.memory)
        content.memory, content.spool = None, spool

    def _free(self, content: ScratchContent) -> None:
        if content.memory is not None:
            self._in_memory -= len(content.memory)
            content.memory = bytearray()
        if content.spool is not None:
            content.spool.close()
            content.spool = None


class ScratchFile(OpenFile):
    """One open of a scratch file."""

    writes = True
    direct_io = True  # its bytes are the mount's alone: no page of them is worth keeping

    def __init__(self, files: ScratchFiles, content: ScratchContent) -> None:
        self.files = files
        self.content = content

    def read(self, offset: int, size: int, *, wait: bool = True, track: bool = True) -> bytes:
        if not wait:
            raise NotAtHand
        with self.files.lock:
            return self.content.read(offset, size)

    def write(self, offset: int, data: bytes, *, wait: bool = True) -> int:
        if not wait:
            raise NotAtHand
        return self.files.write(self.content, offset, data)

    def truncate(self, size: int) -> None:
        self.files.truncate(self.content, size)

    def release(self) -> None:
        self.files.released(self.content)

    def attributes(self) -> Attributes:
        with self.files.lock:
            return self.content.attributes()
