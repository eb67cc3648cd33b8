"""The filesystem: three cores (the decoded tree, `decoded/`; the passthrough tree,
`passthrough/`; the versions of an Icechunk repository, `versions/`, which routes to
decoded trees) behind one FUSE adapter (`fuse/`), and `mount.py`, which builds the core a
mount's configuration asks for, sharing the memory budget out (budget.py). A core is a
plain object that answers by path and blocks (core.py); the adapter alone knows pyfuse3,
trio, inodes and handles.

The concurrency model (its rules, every thread and pool, every lock with what it guards,
its order and whether it is held across a store call) is stated once, in
docs/development.md, "Concurrency"; a new thread, pool or lock goes there too.

Shared by the cores: the spool (spool.py), errors to errno (errors.py); what a sequential
reader is lies below them, with decode-ahead (views/ahead/sequential.py)."""
