"""The filesystem: pyfuse3 operations over the views of a hierarchy.

Concurrency model: one trio thread runs every FUSE handler. Handlers own the inode and
handle tables (touched only on that thread). Anything that may block — store calls,
decoding, rendering `info` — runs in a worker thread via `trio.to_thread.run_sync` under
one CapacityLimiter; there the Tree's node caches are guarded by its lock, and chunk
decoding fans out to the format layer's codec thread pool (numcodecs releases the GIL).
The daemon never touches its own mountpoint."""
