"""What `zarrfs --version` prints: zarrfs, the Python, pyfuse3, libfuse and kernel it runs
on, and which optional extras are installed. Read from package metadata and from libfuse
itself, importing nothing heavy, so that it answers even where pyfuse3 cannot load."""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.metadata
import platform
import sys

from . import __version__

# the optional extras users ask about, by the package that brings each
EXTRAS = {"icechunk": "icechunk", "obstore": "s3", "s3fs": "s3"}


def _installed(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def libfuse_version() -> str | None:
    """The libfuse 3 that pyfuse3 is linked to (its fuse_pkgversion), if it loads: the
    one the linker finds, else by soname (3.17 and later are libfuse3.so.4)."""
    for name in (ctypes.util.find_library("fuse3"), "libfuse3.so.4", "libfuse3.so.3"):
        if name is None:
            continue
        try:
            library = ctypes.CDLL(name)
            library.fuse_pkgversion.restype = ctypes.c_char_p
            version = library.fuse_pkgversion()
        except (OSError, AttributeError):
            continue
        return version.decode() if isinstance(version, bytes) else None
    return None


def versions() -> str:
    python = f"{platform.python_version()} ({platform.python_implementation()}, {sys.executable})"
    lines = [
        f"zarrfs {__version__}",
        f"Python {python}",
        f"pyfuse3 {_installed('pyfuse3') or 'not installed'}",
        f"libfuse {libfuse_version() or 'not found (install libfuse3: see docs/install.md)'}",
        f"kernel {platform.system()} {platform.release()}",
    ]
    for package, extra in EXTRAS.items():
        version = _installed(package)
        if not version:
            lines.append(f"{package} not installed (pip install 'zarrfs[{extra}]')")
        elif package == "icechunk" and version.startswith("1."):
            lines.append(f"{package} {version} (Icechunk 2 repositories need icechunk >= 2, on Python >= 3.12)")
        else:
            lines.append(f"{package} {version}")
    return "\n".join(lines)
