"""A read of `data.npy` served while chunk files are being replaced holds each chunk whole:
one value, the one before a write or the one after, never a mix (issue 49: the soak's
torn reads come from the kernel's pages, each page read at its own moment, not from one
request of the daemon's; docs/reliability.md). Kernel-free."""

from __future__ import annotations

import io
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import zarr

from zarrfs.format import ChunkCache, IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.store import open_store


def test_a_read_of_data_npy_never_holds_half_a_chunk_replaced(tmp_path):
    root = str(tmp_path / "s")
    zarr.open_group(root, mode="w").create_array("a", shape=(32, 32), chunks=(8, 8), dtype="<f8")[...] = 0
    with ThreadPoolExecutor(4) as pool:
        context = IOContext(executor=pool, cache=ChunkCache(1 << 22))
        fs = DecodedCore(open_hierarchy(open_store(root), context, metadata_ttl=1), metadata_ttl=1)
        end, torn, reads, written = time.monotonic() + 3, [], [0], {0.0}

        def writer(w: int) -> None:
            n = 0
            while time.monotonic() < end:
                n += 1
                value = w * 1e6 + n
                written.add(value)
                file = fs.open(f"a/chunks/{n % 4}/{(n // 4) % 4}", os.O_WRONLY | os.O_TRUNC)
                file.write(0, np.full((8, 8), value, "<f8").tobytes())
                file.flush()
                file.release()

        def reader() -> None:
            while time.monotonic() < end:
                file = fs.open("a/data.npy", os.O_RDONLY)
                values = np.load(io.BytesIO(file.read(0, 1 << 20)))
                file.release()
                reads[0] += 1
                for r in range(0, 32, 8):
                    for c in range(0, 32, 8):
                        chunk = values[r : r + 8, c : c + 8]
                        if not (chunk == chunk.flat[0]).all() or chunk.flat[0] not in written:
                            torn.append(sorted(set(chunk.flat)))

        try:
            threads = [threading.Thread(target=writer, args=(w,)) for w in (1, 2)]
            threads += [threading.Thread(target=reader) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            fs.shutdown()
            fs.close()
    assert reads[0] > 10
    assert not torn, torn[:3]
