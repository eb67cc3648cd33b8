"""A daemon killed at every point of a write, kernel-free: the store stops taking writes
after its first K (a SIGKILL then: nothing after it reaches the store), and what it holds
must be what docs/reliability.md promises. A `.npy` copied into a group leaves nothing
visible or the whole array (its chunks are stored before its document); an erased node is
never listed by consolidated metadata once its document is gone. The real kills are
tests/fs/mount/test_crash_consistency.py's; these reach every point, one at a time."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from zarrfs.format import IOContext, open_hierarchy
from zarrfs.fs.decoded import DecodedCore
from zarrfs.store import open_store

# the store's own writing steps (zarrfs/store/base.py), each counted as one write per key
_WRITES = (
    "_set_many",
    "_set_if",
    "_set_file",
    "_set_file_meta",
    "_erase_many",
    "_erase_prefix",
    "_move",
    "_copy_value",
)


class Killed(Exception):
    """The store refuses every write once the budget is spent (the process is dead)."""


class Kill:
    def __init__(self, budget: float) -> None:
        self.budget = budget
        self.done = 0

    def wrap(self, store: Any) -> None:
        for name in _WRITES:
            method = getattr(store, name, None)
            if method is not None:
                setattr(store, name, self._counted(name, method))

    def _counted(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if name in ("_set_many", "_erase_many") and len(args[0]) > 1:  # one key at a time
                items = args[0]
                for key in list(items):
                    call({key: items[key]} if isinstance(items, dict) else [key], **kwargs)
                return None
            if self.done >= self.budget:
                raise Killed(name)
            self.done += 1
            return method(*args, **kwargs)

        return call


def _npy(values: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, values)
    return out.getvalue()


def _mounted(root: Path, kill: Kill) -> DecodedCore:
    store = open_store(str(root))
    kill.wrap(store)
    return DecodedCore(open_hierarchy(store, IOContext(), metadata_ttl=0), metadata_ttl=0)


def _until_killed(fs: DecodedCore, step: Callable[[], None]) -> None:
    try:
        step()
    except Exception:  # (Killed, or what a layer made of it)
        pass
    finally:
        try:
            fs.shutdown()
            fs.close()
        except Exception:
            pass


def _writes_of(template: Path, work: Path, step: Callable[[DecodedCore], None]) -> int:
    """How many writes `step` makes through a mount of a copy of `template`, unkilled."""
    shutil.copytree(template, work)
    kill = Kill(float("inf"))
    fs = _mounted(work, kill)
    step(fs)
    fs.shutdown()
    fs.close()
    shutil.rmtree(work)
    return kill.done


def _arrays_below(root: Path) -> dict[str, Path]:
    """Every node that holds an array document, by its path (hidden names too)."""
    return {
        str(p.parent.relative_to(root)): p.parent
        for p in list(root.rglob("zarr.json")) + list(root.rglob(".zarray"))
        if json.loads(p.read_bytes()).get("node_type", "array" if p.name == ".zarray" else "") == "array"
    }


@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("over", [False, True], ids=["new", "over-an-array"])
def test_a_npy_copy_killed_anywhere_leaves_nothing_visible_or_the_whole_array(tmp_path, zarr_format, over):
    template = tmp_path / "template"
    group = zarr.open_group(str(template), mode="w", zarr_format=zarr_format).create_group("g")
    old = np.full(10, 7, "<i4")
    if over:
        group.create_array("x", shape=old.shape, dtype=old.dtype, chunks=(5,))[...] = old
    # four chunks of 1 MiB (npy.py's default chunking), none all fill values
    new = np.arange(4 * (1 << 18) - 3, dtype="<i4") + 1

    def copy(fs: DecodedCore) -> None:
        file, _ = fs.create("g/x.npy")
        file.write(0, _npy(new))
        file.flush()
        file.release()

    writes = _writes_of(template, tmp_path / "count", copy)
    assert writes >= 5  # (the chunks and the document at least)
    for k in range(writes):
        root = tmp_path / f"k{k}"
        shutil.copytree(template, root)
        kill = Kill(k)
        fs = _mounted(root, kill)
        _until_killed(fs, lambda: copy(fs))
        for path, node in _arrays_below(root).items():
            got = zarr.open_array(str(node), mode="r")[...]
            whole = (over and path == "g/x" and np.array_equal(got, old)) or np.array_equal(got, new)
            assert whole, f"killed after {k} of {writes} writes: /{path} is an array of other values {got[:4]}…"
