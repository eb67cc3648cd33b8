"""A daemon killed at every point of a write, kernel-free: the store stops taking writes
after its first K (a SIGKILL then: nothing after it reaches the store), and what it holds
must be what docs/reliability.md promises. A `.npy` copied into a group leaves nothing
visible or the whole array (its chunks are stored before its document); an erased node is
never listed by consolidated metadata once its document is gone. The real kills are
tests/fs/mount/test_crash_consistency.py's; these reach every point, one at a time."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

from zarrfs.format import IOContext, consolidated_erases, open_hierarchy
from zarrfs.fs.decoded import DecodedCore, consolidation
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


def _copying_in(path: str, values: np.ndarray) -> Callable[[DecodedCore], None]:
    """What `cp values.npy MNT/path` asks of the core: create, write, flush, release."""

    def copy(fs: DecodedCore) -> None:
        file, _ = fs.create(path)
        file.write(0, _npy(values))
        file.flush()
        file.release()

    return copy


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

    copy = _copying_in("g/x.npy", new)
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


def _listed_without_documents(root: Path) -> list[str]:
    """The nodes consolidated metadata lists (the root's zarr.json, or its .zmetadata)
    whose documents are gone (v2: the node of a key listed holds no `.zarray` or
    `.zgroup`; one listed by its older document, as a group that became an array since,
    is the consolidated metadata lagging a change, which it may)."""
    if (root / "zarr.json").exists():
        held = json.loads((root / "zarr.json").read_bytes()).get("consolidated_metadata") or {}
        return [p for p in held.get("metadata") or {} if not (root / p / "zarr.json").exists()]
    if not (root / ".zmetadata").exists():  # (stripped by an erase, not yet written again)
        return []
    listed = json.loads((root / ".zmetadata").read_bytes())["metadata"]
    return [k for k in listed if not any((root / k).parent.joinpath(n).exists() for n in (".zarray", ".zgroup"))]


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_an_erase_killed_anywhere_leaves_no_consolidated_entry_without_its_document(tmp_path, zarr_format):
    template = tmp_path / "template"
    root = zarr.open_group(str(template), mode="w", zarr_format=zarr_format)
    group = root.create_group("g")
    for name in ("a", "b"):
        group.create_array(name, shape=(4,), chunks=(2,), dtype="<i4")[...] = 1
    group.create_group("h").create_array("c", shape=(2,), chunks=(2,), dtype="<i4")[...] = 2
    zarr.consolidate_metadata(str(template))

    def erase(fs: DecodedCore) -> None:
        _rm_r(fs, "g/a")
        _rm_r(fs, "g/h")

    writes = _writes_of(template, tmp_path / "count", erase)
    assert writes >= 2
    for k in range(writes + 1):
        root_k = tmp_path / f"k{k}"
        shutil.copytree(template, root_k)
        fs = _mounted(root_k, Kill(k))
        _until_killed(fs, lambda: erase(fs))
        listed = _listed_without_documents(root_k)
        assert not listed, f"killed after {k} of {writes} writes: consolidated metadata lists {listed}"
    assert sorted(zarr.open_group(str(root_k), mode="r", use_consolidated=True)["g"]) == ["b"]


def _rm_r(core: DecodedCore, path: str) -> None:
    """As `rm -r` asks: the directory listed, its files unlinked, its directories removed."""
    for name, attributes in list(core.list_dir(path)):
        child = f"{path}/{name}"
        if attributes.is_dir:
            _rm_r(core, child)
        else:
            core.unlink(child)
    core.rmdir(path)


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_rm_r_of_many_arrays_rewrites_the_consolidated_metadata_a_few_times_not_once_each(
    tmp_path, zarr_format, monkeypatch
):
    """Each erase takes its node out of consolidated metadata before its documents go: the
    first drops its entries, the second strips the consolidated metadata (so no other
    rewrite of a document the size of the group is needed), and the flush writes it back
    (here only at unmount: none in the background meanwhile). The erases are one burst
    however slowly a loaded machine makes them."""
    monkeypatch.setattr(consolidated_erases, "BURST", 600.0)
    monkeypatch.setattr(consolidation, "QUIET", 600.0)
    monkeypatch.setattr(consolidation, "MOST", 600.0)
    group = zarr.open_group(str(tmp_path), mode="w", zarr_format=zarr_format).create_group("g")
    for i in range(40):
        group.create_array(f"a{i:02d}", shape=(2,), chunks=(2,), dtype="<i4")[...] = i
    zarr.consolidate_metadata(str(tmp_path))
    kill = Kill(float("inf"))
    fs = _mounted(tmp_path, kill)
    store = fs.hierarchy.store
    documents = [0]
    set_if = store._set_if

    def counted(key: str, *args: Any) -> Any:
        documents[0] += key in ("zarr.json", ".zmetadata")
        return set_if(key, *args)

    store._set_if = counted
    for i in range(30):
        _rm_r(fs, f"g/a{i:02d}")
    during = documents[0]
    fs.shutdown()
    fs.close()
    assert during <= 3, during  # (the first change's probe, the drop, the strip)
    reopened = zarr.open_group(str(tmp_path), mode="r", use_consolidated=True)
    assert sorted(reopened["g"]) == [f"a{i:02d}" for i in range(30, 40)]
    assert reopened["g/a35"][...].tolist() == [35, 35]


def _dataset_template(path: Path) -> zarr.Group:
    """A v2 group as xarray writes a dataset: each array names its dimensions in its
    `.zattrs` (`_ARRAY_DIMENSIONS`), which a `.npy` copied in must carry too."""
    group = zarr.open_group(str(path), mode="w", zarr_format=2).create_group("g")
    t = group.create_array("t", shape=(8,), chunks=(4,), dtype="<f8")
    t[...] = np.arange(8.0)
    t.attrs["_ARRAY_DIMENSIONS"] = ["time"]
    return group


@pytest.mark.parametrize("over", [False, True], ids=["new", "over-an-array"])
def test_a_npy_copied_into_a_v2_dataset_killed_anywhere_leaves_no_array_without_its_dimensions(tmp_path, over):
    """A `.npy` copied into a v2 group whose arrays carry `_ARRAY_DIMENSIONS` makes an array
    that carries them too: its chunks, its `.zattrs` and its `.zarray` are three writes
    (and more), and a kill after any of them leaves the array whole, with its names, or
    none; xarray opens the group after every one, and a mount lists no node the store
    does not hold."""
    import xarray as xr

    template = tmp_path / "template"
    group = _dataset_template(template)
    old = np.full(8, 7.0, "<f8")
    if over:
        x = group.create_array("x", shape=(8,), chunks=(4,), dtype="<f8")
        x[...] = old
        x.attrs["_ARRAY_DIMENSIONS"] = ["time"]
    new = np.arange(8.0) + 0.5

    copy = _copying_in("g/x.npy", new)
    writes = _writes_of(template, tmp_path / "count", copy)
    assert writes >= 3  # (a chunk, .zattrs, .zarray at least)
    for k in range(writes + 1):
        root = tmp_path / f"k{k}"
        shutil.copytree(template, root)
        fs = _mounted(root, Kill(k))
        _until_killed(fs, lambda: copy(fs))
        where = f"killed after {k} of {writes} writes"
        arrays = _arrays_below(root)
        for path, node in arrays.items():
            opened = zarr.open_array(str(node), mode="r")
            assert opened.attrs.get("_ARRAY_DIMENSIONS") == ["time"], f"{where}: /{path} lacks its dimension names"
        dataset = xr.open_zarr(str(root / "g"), consolidated=False, zarr_format=2)
        if "x" in dataset:
            got = dataset["x"].values
            assert np.array_equal(got, new) or (over and np.array_equal(got, old)), f"{where}: x is {got}"
        else:  # (over an array: one swap cut between the erase and the move keeps the new one hidden)
            hidden = [p for p in arrays if p.startswith("g/.x.npy-")]
            assert not over or hidden, f"{where}: the array copied over is gone"
        assert k < writes or "x" in dataset
        fs = _mounted(root, Kill(float("inf")))  # the next mount lists what the store holds
        listed = {name for name, attributes in fs.list_dir("g") if attributes.is_dir}
        fs.shutdown()
        fs.close()
        assert listed == {p.rpartition("/")[2] for p in arrays if p.startswith("g/")}, where


def test_a_zattrs_that_a_killed_copy_left_is_no_node_and_no_later_node_takes_it(tmp_path):
    """What a kill between a new v2 array's `.zattrs` and its `.zarray` leaves (its
    chunks and its `.zattrs`): no node; a `.npy` copied to that name where no sibling
    carries dimension names, or a group made there with `mkdir`, carries none of it."""
    group = zarr.open_group(str(tmp_path), mode="w", zarr_format=2).create_group("g")
    group.create_array("t", shape=(8,), chunks=(4,), dtype="<f8")[...] = 1.0
    for name in ("x", "y"):
        (tmp_path / "g" / name).mkdir()
        (tmp_path / "g" / name / ".zattrs").write_text('{"_ARRAY_DIMENSIONS": ["dim_0"]}')
        (tmp_path / "g" / name / "0").write_bytes(b"left")
    fs = _mounted(tmp_path, Kill(float("inf")))
    assert sorted(name for name, attributes in fs.list_dir("g") if attributes.is_dir) == ["t"]
    file, _ = fs.create("g/x.npy")
    file.write(0, _npy(np.arange(3, dtype="<i4")))
    file.flush()
    file.release()
    fs.mkdir("g/y")
    fs.shutdown()
    fs.close()
    opened = zarr.open_group(str(tmp_path / "g"), mode="r")
    assert opened["x"][...].tolist() == [0, 1, 2]
    assert dict(opened["x"].attrs) == {}
    assert dict(opened["y"].attrs) == {}


def _killed_everywhere(
    tmp_path: Path, template: Path, step: Callable[[DecodedCore], None], check: Callable[[Path, str, bool], None]
) -> int:
    """Run `step` through a mount of a copy of `template` killed after its K-th write, for
    every K up to all of them, and `check(store, where, whole)` what each copy holds
    (`whole`: no write was cut). The number of writes `step` makes."""
    writes = _writes_of(template, tmp_path / "count", step)
    for k in range(writes + 1):
        root = tmp_path / f"k{k}"
        shutil.copytree(template, root)
        fs = _mounted(root, Kill(k))
        _until_killed(fs, lambda: step(fs))
        check(root, f"killed after {k} of {writes} writes", k == writes)
    return writes


def _consolidated_template(path: Path, zarr_format: int) -> zarr.Group:
    root = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    group = root.create_group("g")
    a = group.create_array("a", shape=(4,), chunks=(2,), dtype="<i4")
    a[...] = 1
    a.attrs["units"] = "m"
    zarr.consolidate_metadata(str(path))
    return group


def _documents_hold(root: Path, where: str) -> None:
    """Every document JSON, and consolidated metadata listing no node without its own."""
    for p in [*root.rglob("zarr.json"), *root.rglob(".z*")]:
        try:
            json.loads(p.read_bytes())
        except ValueError:
            raise AssertionError(f"{where}: {p.relative_to(root)} is no JSON") from None
    listed = _listed_without_documents(root)
    assert not listed, f"{where}: consolidated metadata lists {listed}"


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_a_mkdir_killed_anywhere_leaves_the_group_whole_or_none(tmp_path, zarr_format):
    _consolidated_template(tmp_path / "template", zarr_format)

    def check(root: Path, where: str, whole: bool) -> None:
        _documents_hold(root, where)
        made = zarr.open_group(str(root), mode="r", use_consolidated=False)["g"]
        assert sorted(made.group_keys()) == (["new"] if whole else sorted(made.group_keys())), where
        if "new" in made.group_keys():
            assert dict(made["new"].attrs) == {}, where

    assert _killed_everywhere(tmp_path, tmp_path / "template", lambda fs: fs.mkdir("g/new"), check) >= 1


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_a_setfattr_killed_anywhere_leaves_the_old_attributes_or_the_new(tmp_path, zarr_format):
    """A v3 array's attributes are in its zarr.json, a v2 one's in its `.zattrs`: one
    document each, replaced whole; the consolidated metadata follows."""
    _consolidated_template(tmp_path / "template", zarr_format)

    def check(root: Path, where: str, whole: bool) -> None:
        _documents_hold(root, where)
        attributes = dict(zarr.open_array(str(root / "g" / "a"), mode="r").attrs)
        assert attributes in ({"units": "m"}, {"units": "km"}), f"{where}: {attributes}"
        assert not whole or attributes == {"units": "km"}, where
        np.testing.assert_array_equal(zarr.open_array(str(root / "g" / "a"), mode="r")[...], 1)
        if whole:  # (the consolidated metadata written at unmount)
            consolidated = zarr.open_group(str(root), mode="r", use_consolidated=True)
            assert consolidated["g/a"].attrs["units"] == "km", where

    _killed_everywhere(tmp_path, tmp_path / "template", lambda fs: fs.set_xattr("g/a", "user.zarr.units", b"km"), check)


def test_a_zarray_written_over_an_empty_v2_group_killed_anywhere_leaves_the_group_or_the_array(tmp_path):
    """`mkdir` then a `.zarray` written into it makes an array: its `.zarray` is stored,
    then the `.zgroup` erased. A kill between leaves both, which zarrfs and zarr-python
    both read as the array (whole: it holds no chunk yet)."""
    template = tmp_path / "template"
    zarr.open_group(str(template), mode="w", zarr_format=2).create_group("g").create_group("x")
    zarr.consolidate_metadata(str(template))
    document = {
        "zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", "compressor": None, "fill_value": 5,
        "order": "C", "filters": None,
    }  # fmt: skip

    def write(fs: DecodedCore) -> None:
        file, _ = fs.create("g/x/.zarray")
        file.write(0, json.dumps(document).encode())
        file.flush()
        file.release()

    def check(root: Path, where: str, whole: bool) -> None:
        _documents_hold(root, where)
        node = zarr.open(str(root / "g" / "x"), mode="r", zarr_format=2)
        assert isinstance(node, zarr.Array) or not whole, where
        if isinstance(node, zarr.Array):
            assert node[...].tolist() == [5, 5, 5, 5], where
        fs = _mounted(root, Kill(float("inf")))
        seen = fs.hierarchy.open_node("g/x")
        fs.close()
        assert type(seen).__name__ == ("Array" if isinstance(node, zarr.Array) else "Group"), where

    _killed_everywhere(tmp_path, template, write, check)


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_a_rename_killed_anywhere_leaves_the_array_whole_under_one_name(tmp_path, zarr_format):
    _consolidated_template(tmp_path / "template", zarr_format)

    def check(root: Path, where: str, whole: bool) -> None:
        _documents_hold(root, where)
        group = zarr.open_group(str(root), mode="r", use_consolidated=False)["g"]
        names = sorted(group.array_keys())
        assert names in (["a"], ["b"]) and (names == ["b"] or not whole), f"{where}: {names}"
        np.testing.assert_array_equal(group[names[0]][...], 1)
        assert dict(group[names[0]].attrs) == {"units": "m"}, where

    _killed_everywhere(tmp_path, tmp_path / "template", lambda fs: fs.rename("g/a", "g/b"), check)


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_a_grow_after_a_shrink_killed_anywhere_shows_fill_values_not_the_old_chunks(tmp_path, zarr_format):
    """A shrink stores its document, then erases the chunks outside the new shape: a kill
    between leaves them outside the shape, and the grow that follows must not show them
    (zarr-python's resize erases them before its document)."""
    template = tmp_path / "template"
    a = zarr.open_group(str(template), mode="w", zarr_format=zarr_format).create_array(
        "a", shape=(8,), chunks=(2,), dtype="<i4", fill_value=0
    )
    a[...] = 7
    name = "zarr.json" if zarr_format == 3 else ".zarray"

    def resize(fs: DecodedCore, size: int) -> None:
        doc = json.loads((fs.hierarchy.store.get(f"a/{name}") or b"{}").decode())
        doc["shape"] = [size]
        file = fs.open(f"a/{name}", os.O_WRONLY | os.O_TRUNC)
        file.write(0, json.dumps(doc).encode())
        file.flush()
        file.release()

    def check(root: Path, where: str, whole: bool) -> None:
        _documents_hold(root, where)
        fs = _mounted(root, Kill(float("inf")))
        resize(fs, 8)  # grown again, after the kill
        fs.shutdown()
        fs.close()
        got = zarr.open_array(str(root / "a"), mode="r")[...].tolist()
        assert got in ([7] * 8, [7] * 4 + [0] * 4), f"{where}: grown again it holds {got}"
        assert not whole or got == [7] * 4 + [0] * 4, where

    assert _killed_everywhere(tmp_path, template, lambda fs: resize(fs, 4), check) >= 2


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_a_rename_by_copy_and_delete_killed_anywhere_leaves_the_array_whole_under_a_name(zarr_format):
    """On a store that moves by copies then deletes (an object store's way; here fsspec's
    memory store, which zarr-python reads too): the chunks are copied first and the
    documents last, the documents deleted first: after a kill at any write the array is
    whole under its old name, its new one, or both, and no name holds a node without
    its chunks."""
    import fsspec

    memory = fsspec.filesystem("memory")
    template = f"memory://crash-rename-{zarr_format}"
    group = zarr.open_group(template, mode="w", zarr_format=zarr_format).create_group("g")
    group.create_array("a", shape=(6,), chunks=(2,), dtype="<i4")[...] = [1, 2, 3, 4, 5, 6]
    zarr.consolidate_metadata(template)

    def run(url: str, budget: float) -> Kill:
        memory.rm(url.removeprefix("memory:/"), recursive=True) if memory.exists(url.removeprefix("memory:/")) else None
        memory.copy(template.removeprefix("memory:/"), url.removeprefix("memory:/"), recursive=True)
        kill = Kill(budget)
        store = open_store(url)
        kill.wrap(store)
        fs = DecodedCore(open_hierarchy(store, IOContext(), metadata_ttl=0), metadata_ttl=0)
        _until_killed(fs, lambda: fs.rename("g/a", "g/b"))
        return kill

    writes = run(f"{template}-count", float("inf")).done
    assert writes >= 6  # (three chunks and a document copied, then deleted, at least)
    for k in range(writes + 1):
        url = f"{template}-k{k}"
        run(url, k)
        where = f"killed after {k} of {writes} writes"
        opened = zarr.open_group(url, mode="r", use_consolidated=False)["g"]
        names = sorted(opened.array_keys())
        assert names in (["a"], ["a", "b"], ["b"]) and (k < writes or names == ["b"]), f"{where}: {names}"
        for name in names:
            assert opened[name][...].tolist() == [1, 2, 3, 4, 5, 6], f"{where}: {name}"
        consolidated = zarr.open_group(url, mode="r", use_consolidated=True)
        held = consolidated.metadata.consolidated_metadata
        listed = sorted(held.flattened_metadata) if held is not None else []
        assert set(listed) <= {"g", *(f"g/{n}" for n in names)}, f"{where}: consolidated metadata lists {listed}"
        memory.rm(url.removeprefix("memory:/"), recursive=True)
