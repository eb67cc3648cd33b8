"""zarrfs: mount a Zarr hierarchy as a FUSE filesystem."""

__version__ = "0.1.0"
