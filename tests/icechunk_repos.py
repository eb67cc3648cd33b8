"""Icechunk repositories written by the icechunk package and zarr-python, the oracles of
the Icechunk tests: two commits on `main` and a tag `v1` on the first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

FIRST = np.arange(48, dtype="int32").reshape(6, 8)
SECOND = FIRST * 10


@dataclass
class Written:
    storage: Any  # icechunk Storage
    first: str  # snapshot ids
    second: str

    def repository(self):
        import icechunk

        return icechunk.Repository.open(self.storage)


def write_repository(storage: Any) -> Written:
    """temp (6×8 int32, chunks 3×4) = FIRST in commit "first" (tagged v1); SECOND and a
    group grp with an array x in commit "second"."""
    import icechunk
    import zarr

    icechunk.set_logs_filter("error")
    repo = icechunk.Repository.create(storage)
    session = repo.writable_session("main")
    root = zarr.group(store=session.store)
    root.attrs["title"] = "survey"
    temp = root.create_array("temp", shape=(6, 8), chunks=(3, 4), dtype="int32", fill_value=0)
    temp[:] = FIRST
    first = session.commit("first")
    repo.create_tag("v1", first)
    session = repo.writable_session("main")
    root = zarr.open_group(session.store)
    root["temp"][:] = SECOND
    root.create_group("grp").create_array("x", shape=(5,), chunks=(2,), dtype="float64", fill_value=-1.0)[:] = 0.5
    second = session.commit("second")
    return Written(storage, first, second)


def read_array(storage: Any, path: str, **version: str) -> np.ndarray:
    """What icechunk + zarr-python read at `path` of a version (branch=, tag=, snapshot_id=)."""
    import icechunk
    import zarr

    repo = icechunk.Repository.open(storage)
    session = repo.readonly_session(**(version or {"branch": "main"}))
    return zarr.open_array(session.store, path=path, mode="r")[...]
