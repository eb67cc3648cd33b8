"""The FUSE adapter: the only code that knows pyfuse3 and trio. It serves either core."""

from .adapter import AdapterOptions, FuseAdapter
from .session import serve

__all__ = ["AdapterOptions", "FuseAdapter", "serve"]
