"""Icechunk repositories written by the icechunk package and zarr-python, the oracles of
the Icechunk tests: two commits on `main` and a tag `v1` on the first; with icechunk 2,
also a branch, a metadata-only move and more commits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

FIRST = np.arange(48, dtype="int32").reshape(6, 8)
SECOND = FIRST * 10


@dataclass
class Written:
    storage: Any  # icechunk Storage
    first: str  # snapshot ids
    second: str
    later: list[str] = field(default_factory=list)  # write_rearranged_repository's, oldest first

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


def write_rearranged_repository(storage: Any) -> Written:
    """With icechunk 2: write_repository's two commits, then a branch `dev` from the first
    with a commit of its own; on `main` a partly written array grp/y (commit "third"),
    grp moved to moved by metadata alone in a rearrange session ("moved"), and an array
    late ("fifth"). Four versions of the tree, eight arrays among them."""
    import icechunk
    import zarr

    written = write_repository(storage)
    repo = icechunk.Repository.open(storage)
    repo.create_branch("dev", written.first)
    session = repo.writable_session("dev")
    zarr.open_array(session.store, path="temp")[:] = -FIRST
    written.later.append(session.commit("dev work"))
    session = repo.writable_session("main")
    y = zarr.open_group(session.store, path="grp").create_array(
        "y", shape=(3, 5), chunks=(2, 2), dtype="uint16", fill_value=7
    )
    y[:2, :2] = [[1, 2], [3, 4]]
    written.later.append(session.commit("third"))
    session = repo.rearrange_session("main")
    session.move("/grp", "/moved")
    written.later.append(session.commit("moved"))
    session = repo.writable_session("main")
    late = zarr.open_group(session.store).create_array("late", shape=(2, 3), chunks=(1, 3), dtype=">i8", fill_value=0)
    late[:] = np.arange(6).reshape(2, 3) - 3
    written.later.append(session.commit("fifth"))
    return written


def arrays_of(storage: Any, **version: str) -> dict[str, np.ndarray]:
    """Every array of a version as icechunk + zarr-python read it, by path."""
    import icechunk
    import zarr

    session = icechunk.Repository.open(storage).readonly_session(**version)
    root = zarr.open_group(session.store, mode="r")
    return {path: node[...] for path, node in root.members(max_depth=None) if isinstance(node, zarr.Array)}


def write_virtual_repository(storage: Any, data_dir: str) -> bytes:
    """An array v (16 int32, chunks of 8, fill -1) whose chunk 0 is a virtual chunk: 8
    int32 at offset 4 of data_dir/blob.bin, in the container file://data_dir/ the
    repository's config lists; chunk 1 is stored (5s). The blob's bytes."""
    import icechunk
    import zarr

    values = np.arange(8, dtype="<i4").tobytes()
    with open(f"{data_dir}/blob.bin", "wb") as f:
        f.write(b"HEAD" + values)
    prefix = f"file://{data_dir}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(prefix)))
    session = icechunk.Repository.create(storage, config=config).writable_session("main")
    v = zarr.create_array(
        session.store, name="v", shape=(16,), chunks=(8,), dtype="int32", fill_value=-1, compressors=None
    )
    v[8:] = 5
    session.store.set_virtual_ref("v/c/0", f"{prefix}blob.bin", offset=4, length=len(values))
    session.commit("virtual")
    return values
