"""The filesystem: two cores (the decoded tree, `decoded/`; the passthrough tree,
`passthrough/`) behind one FUSE adapter (`fuse/`), and `mount.py`, which builds the core a
mount's configuration asks for. A core is a plain object that answers by path and
blocks (core.py); the adapter alone knows pyfuse3, trio, inodes and handles.

Concurrency model (the one statement of it):
- One trio thread runs every FUSE handler. Handlers alone touch the adapter's handle
  tables. Each handler makes one core call in a worker thread (`trio.to_thread`, under
  one CapacityLimiter of 16); the only core calls made on the trio thread itself are
  the `_cached` ones (`lookup_cached`, `open_cached`, `list_dir_cached`,
  `OpenFile.read_cached`), which never block: they answer from what is at hand (known
  metadata, fresh listings, decoded chunks) or say they cannot. (`read_cached` may
  start decoding ahead of a sequential reader, decoded/ahead.py: that submits work to
  the pools below and never waits for it.)
- Cores are thread-safe: every table a core keeps is guarded by that core's lock; the
  decoded tree's node caches by the Tree's lock; each array's pending writes by their
  own lock, and stores of its chunks by a second lock taken after it; every
  read-modify-write or store of a metadata document by its node's document lock
  (decoded/documents.py: one per node path; an erasure or move holds its node's whole
  subtree, a mkdir the new node's and its parent's, each thread all it needs at once),
  taken before an array's; what an open `data` or `data.npy` reads through (its view of
  the node now, decode-ahead, hot windows: decoded/files.py) by that file's lock, held
  only to replace it whole, never across a call (the trio thread takes it too); the
  inode table by its lock (worker threads and the notifier read it).
- Codecs run in the format layer's codec pool (numcodecs releases the GIL); a task of
  that pool never waits on pending writes, whose flush needs the same pool, nor on
  other tasks. Chunk fetches run in the format layer's I/O pool (32 threads on object
  stores, 4 on local disks; format/reads.py): an I/O task fetches, then hands the bytes
  to the codec pool and returns, so neither pool's tasks wait on the other's; only the
  callers (worker threads) wait.
- Every store call ends by its deadline for its caller (`--timeout`). A remote store
  cuts its own requests. A local store's call, which can hang in the kernel for good (a
  hung NFS or FUSE mount below the root), runs on a thread of a DeadlinePool
  (store/deadlines.py): the I/O pool is one, and its tasks make their calls themselves;
  any other thread (a worker, readahead, write-behind) hands its call to the store's own
  pool and waits. A call still running at its deadline fails its task (the waiter is
  released, and unwinds, releasing its locks) and its thread is left behind, replaced
  in its pool. So an I/O task holds no lock across a store call: a thread left behind
  keeps what it holds.
- Metadata known for longer than `--metadata-ttl` is read again on a thread of the
  Tree's refresh pool (decoded/refresh.py: a DeadlinePool, whose threads make a local
  store's calls themselves, as the I/O pool's do; one refresh per node or listing at a
  time), which the request waits for 0.25 s at most; past that the request is
  served what was known, and the refresh, when it comes, replaces it under the Tree's
  lock unless a change through the mount dropped it meanwhile (`Tree.forget`). While
  one refresh is overdue no other starts and no request waits: the `_cached` calls
  serve what is known too.
- Background threads, each started on first use: the decoded core's write-behind (one)
  and its writer of consolidated metadata (one, decoded/consolidation.py: it takes the
  document locks of the groups it rewrites, after its own flush lock; a change through
  the mount asks it to write before the change takes any document lock, never while
  holding one), passthrough readahead (16), an s3fs multipart upload's part senders (a
  pool per upload, for its length: as many as its parts in flight; obstore sends parts
  in Rust), an Icechunk repository's event loop (one, running its
  store's coroutines while the worker thread that asked waits), and the adapter's kernel
  notifier (one), which pushes pages into the kernel's page cache and invalidates what
  changed: both calls can wait on a page that a read in flight holds, so they are never
  made on the trio thread. Once the mount is ready, one more thread warms the core up
  (`FilesystemCore.warm_up`: the decoded core imports numpy and numcodecs) and ends;
  nothing waits for it.
- A passthrough file's spool is written under the file's write lock, which a close
  holds while it gives the spool to the store (RawFile.flush): the spool may become the
  stored value, and a later write copies it first.
- The daemon never touches its own mountpoint; spools live outside it (spool.py).

Shared by both cores: what a sequential reader is (sequential.py), the spool (spool.py),
errors to errno (errors.py)."""
