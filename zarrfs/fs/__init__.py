"""The filesystem: pyfuse3 operations over the views of a hierarchy.

Concurrency model: one trio thread runs every FUSE handler. Handlers own the inode and
handle tables (touched only on that thread). Anything that may block — store calls,
decoding, rendering `info` — runs in a worker thread via `trio.to_thread.run_sync` under
one CapacityLimiter (a read whose chunks are all in the decoded-chunk cache is served on
the trio thread: it is a copy and cannot block). There the Tree's node caches are guarded
by its lock, each array's pending writes by theirs, and chunk decoding fans out to the format layer's codec thread pool (numcodecs releases the GIL).
One more thread, pagecache.PagePusher's, hands hot windows of files to the kernel
(notify_store can wait on a page that a read in flight holds, so never on the trio thread).
The daemon never touches its own mountpoint."""
