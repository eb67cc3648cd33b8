"""What the write tests share: a snapshot of a local store to check it unchanged, the
values zarr-python reads, and running programs as a user would."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import numpy as np
import zarr


def store_snapshot(root: Path) -> dict[str, str]:
    """Every key of a local store with a hash of its value."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(map(str, cmd)), capture_output=True, text=True, check=check, timeout=120)


def expected(store: Path, path: str) -> np.ndarray:
    return zarr.open_array(store / path, mode="r")[...]
