"""The FUSE adapter: the only code that knows pyfuse3 and trio. It serves any core:
kernel.py (what is kept of the kernel's side, made first), requests.py (the plumbing
every handler shares), files.py (open files), adapter.py (the Operations class),
listing.py, pages.py, session.py."""
