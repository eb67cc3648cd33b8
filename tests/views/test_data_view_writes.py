"""A `data` reader prefetching on the codec pool while buffered writes are flushed: the
flush needs the same pool, so prefetch tasks must never wait on the pending writes."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from zarrfs.format import ChunkCache, Hierarchy, IOContext
from zarrfs.format.documents import array_document_v3
from zarrfs.format.pending import PendingWrites
from zarrfs.fs.decoded.view_files import ViewFile
from zarrfs.store import open_store
from zarrfs.views.ahead.policy import DecodeAhead
from zarrfs.views.data import DataView

LE = {"name": "bytes", "configuration": {"endian": "little"}}


def test_a_flush_completes_while_a_sequential_reader_prefetches_on_a_slow_store(tmp_path):
    context = IOContext(executor=ThreadPoolExecutor(2), cache=ChunkCache(64 << 20), io_executor=ThreadPoolExecutor(4))
    hierarchy = Hierarchy(open_store(str(tmp_path)), context)
    array = hierarchy.create_array("a", array_document_v3((256, 4), (4, 4), "int32", 0, [LE]))
    array.write((slice(None), slice(None)), 7)
    pending = PendingWrites(array)
    pending.write((slice(0, 2), slice(None)), 1)  # partial chunks: completed from the store
    pending.write((slice(8, 10), slice(None)), 1)
    get = array.store.get_partial_values

    def slow_get(requests, **options):
        time.sleep(0.03)
        return get(requests, **options)

    array.store.get_partial_values = slow_get
    view = DataView(array, pending)
    file = ViewFile(view, None, direct_io=False, keep_cache=True, ahead=DecodeAhead(view))
    done, prefetching = threading.Event(), threading.Event()

    def read_sequentially():
        offset = 0
        while offset < view.size() and not done.is_set():
            file.read(offset, 64)
            offset += 64
            if not view.inflight.needs_decoding((offset // 64 + 2, 0)):  # rows ahead are being decoded
                prefetching.set()

    reader = threading.Thread(target=read_sequentially, daemon=True)
    reader.start()
    assert prefetching.wait(20)
    flusher = threading.Thread(target=pending.flush, daemon=True)
    flusher.start()
    flusher.join(20)
    done.set()
    assert not flusher.is_alive(), "flush blocked behind prefetch tasks"
    assert (array.read((slice(0, 2),)) == 1).all() and (array.read((slice(2, 8),)) == 7).all()
    context.executor.shutdown(wait=False)
    context.io_executor.shutdown(wait=False)
