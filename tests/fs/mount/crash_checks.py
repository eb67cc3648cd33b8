"""What a store must hold after a kill (tests/fs/mount/crash.py), by what the writer logged:
each write is logged `start KIND NAME VALUE` before it begins and `done KIND NAME VALUE`
once its close (or fsync) returned. Checked with a light reader of the store's keys and,
when asked, with zarr-python as well."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DOCUMENTS = ("zarr.json", ".zarray", ".zgroup", ".zattrs")
BIG_BYTES = 17 << 20  # a --raw lane's big keys
PART = 8 << 20  # the least part of a multipart upload (zarrfs/store/base.py)
KNOWN = "known: "  # the start of a problem that is documented, not yet fixed (none now)


@dataclass
class Log:
    started: dict[str, int] = field(default_factory=dict)  # name: the value of its last write begun
    done: dict[str, int] = field(default_factory=dict)  # name: the value of its last write acknowledged
    kinds: dict[str, str] = field(default_factory=dict)
    moves: list[tuple[str, str, bool]] = field(default_factory=list)  # (old, new, acknowledged)


def parse(lines: list[str]) -> Log:
    log = Log()
    for line in lines:
        word, *rest = line.split()
        if word not in ("start", "done"):
            continue
        kind, name, value = rest
        if kind == "mv":
            old, new = name.split(">")
            if word == "start":
                log.moves.append((old, new, False))
            else:
                log.moves[-1] = (old, new, True)
            continue
        log.kinds[name] = kind
        (log.started if word == "start" else log.done)[name] = int(value)
    return log


def check_decoded(keys: Any, lines: list[str], full: tuple[str, dict | None] | None) -> list[str]:
    """A Zarr lane's store: no torn chunk or document, the writes acknowledged there,
    nodes whole under their old or new name, consolidated metadata that is JSON and lists
    no node whose document is missing. `full`: (location, storage options) for
    zarr-python to read the store as well."""
    log, problems = parse(lines), []
    stored = set(keys.all())
    for name, kind in log.kinds.items():
        if kind == "chunk":
            _, _, i, j = name.split("/")
            got = _values(keys.get(f"a/c/{i}/{j}"), "<i4", 16, 0)
            problems += _one_write(name, got, log)
        elif kind == "doc":
            document = _json(keys.get("a/zarr.json"))
            if document is None:
                problems.append("a/zarr.json is no JSON")
            else:
                problems += _one_write(name, {document.get("attributes", {}).get("n")}, log)
    moved = {old for old, _, _ in log.moves}
    for name, kind in log.kinds.items():
        if kind == "npy" and name not in moved:  # (one begun, not acknowledged: whole if there)
            # (a copy the kill cut short leaves no document: its chunks are stored first)
            problems += _whole(keys, stored, name, log.started[name], must=name in log.done)
    for old, new, acknowledged in log.moves:
        value = int(old.rpartition("n")[2])
        if acknowledged:
            problems += _whole(keys, stored, new, value, must=True)
            problems += [f"{old}, moved to {new}, still has {k}" for k in stored if k.startswith(old + "/")]
        else:
            found = _whole(keys, stored, old, value, must=False) + _whole(keys, stored, new, value, must=False)
            problems += [p for p in found if "missing" not in p]
            if not any(_document_of(stored, n) for n in (old, new)):
                problems.append(f"{old}, being moved to {new}, is under neither name")
    root = _json(keys.get("zarr.json"))
    if root is None:
        problems.append("the root's zarr.json is no JSON")
    else:
        for node in (root.get("consolidated_metadata") or {}).get("metadata") or {}:
            if _document_of(stored, node) is None:
                problems.append(f"consolidated metadata lists {node}, whose document is missing")
    if full is not None:
        problems += _by_zarr_python(full, log)
    return problems


def check_raw(keys: Any, lines: list[str], full: object = None) -> list[str]:
    """A --raw lane's store: every key one write's bytes whole, the acknowledged ones there,
    a key moved under its old or new name whole."""
    log, problems = parse(lines), []
    moved = {old for old, _, _ in log.moves}
    for name, kind in log.kinds.items():
        if kind == "big":
            sampled = keys.sample(name, PART)
            if sampled is not None and sampled[0] != BIG_BYTES:
                problems.append(f"{name} is torn: {sampled[0]} bytes, not {BIG_BYTES}")
            elif sampled is not None:
                problems += _one_write(name, set(np.frombuffer(sampled[1], "<i8").tolist()), log)
            else:
                problems += _one_write(name, None, log)
        elif name not in moved:
            problems += _one_write(name, _values(keys.get(name), "<i8", 64, None), log)
    for old, new, acknowledged in log.moves:
        value = log.done[old]
        got_old, got_new = (_values(keys.get(n), "<i8", 64, None) for n in (old, new))
        for name, got in ((old, got_old), (new, got_new)):
            if got not in (None, {value}):
                problems.append(f"{name} (moved) holds {_show(got)}, not {value}")
        if acknowledged and got_old is not None:
            problems.append(f"{old}, moved to {new}, is still there")
        if got_old is None and got_new is None:
            problems.append(f"{old}, moved to {new}, is under neither name")
    return problems


def _one_write(name: str, got: set | None, log: Log) -> list[str]:
    """`got`, the values of one key (None: missing; a set of more than one: torn), must be
    one write's, the last acknowledged or the one begun after it."""
    if got is not None and len(got) > 1:
        return [f"{name} is torn: {_show(got)}"]
    if name not in log.done:
        return []
    allowed = {log.done[name], log.started.get(name)}
    if got is None or not got & allowed:
        return [f"{name} holds {_show(got)}, its last acknowledged write {log.done[name]}"]
    return []


def _document_of(stored: set[str], node: str) -> str | None:
    """The key of the document that makes `node` a node (v3 `zarr.json`, v2 `.zarray` or
    `.zgroup`); None where none is stored."""
    return next((key for name in DOCUMENTS[:3] if (key := f"{node}/{name}") in stored), None)


def _whole(keys: Any, stored: set[str], node: str, value: int, must: bool) -> list[str]:
    """Problems of the array `node` made from a .npy of eight `value`s: its document, if
    there, JSON; its data all there and `value`; in the v2 dataset `d`, its dimension
    names (`.zattrs`) there too."""
    key = _document_of(stored, node)
    if key is None:
        return [f"{node} is missing"] if must else []
    document = _json(keys.get(key))
    if document is None:
        return [f"{key} is no JSON"]
    if key.endswith(".zarray"):
        names = (_json(keys.get(f"{node}/.zattrs")) or {}).get("_ARRAY_DIMENSIONS")
        if node.startswith("d/") and names != ["x"]:
            return [f"{node} is an array without its dimension names: {names}"]
        document = {"data_type": document["dtype"], "codecs": [{"name": document["compressor"]["id"]}]}
    data = [
        _decode(keys.get(key), document)
        for key in sorted(k for k in stored if k.startswith(node + "/") and k.rpartition("/")[2] not in DOCUMENTS)
    ]
    got = set(np.concatenate(data).tolist()) if data else None
    if got != {value}:
        return [f"{node} is torn: its chunks hold {_show(got)}, not {value}"]
    return []


def _decode(raw: bytes | None, document: dict) -> np.ndarray:
    if raw is None:
        return np.zeros(0, "<i4")
    for codec in reversed(document.get("codecs", [])):
        if codec["name"] == "zstd":
            import numcodecs

            raw = bytes(numcodecs.Zstd().decode(raw))
        elif codec["name"] == "gzip":
            raw = gzip.decompress(raw)
        elif codec["name"] == "blosc":
            import numcodecs

            raw = bytes(numcodecs.Blosc().decode(raw))
    endian = next(
        (c.get("configuration", {}).get("endian") for c in document.get("codecs", []) if c["name"] == "bytes"), "little"
    )
    return np.frombuffer(raw, np.dtype(document["data_type"]).newbyteorder("<" if endian == "little" else ">"))


def _values(raw: bytes | None, dtype: str, count: int, fill: int | None) -> set | None:
    """The distinct values of a key of `count` values; a wrong length reads as torn."""
    if raw is None:
        return None if fill is None else {fill}
    if len(raw) != count * np.dtype(dtype).itemsize:
        return {f"{len(raw)} bytes", f"not {count * np.dtype(dtype).itemsize}"}
    return set(np.frombuffer(raw, dtype).tolist())


def _json(raw: bytes | None) -> dict | None:
    try:
        return json.loads(raw) if raw is not None else None
    except ValueError:
        return None


def _show(got: set | None) -> str:
    return "nothing" if got is None else str(sorted(got, key=str)[:6])


def _by_zarr_python(full: tuple[str, dict | None], log: Log) -> list[str]:
    """zarr-python's reading: every chunk of `a` one value, every node named whole."""
    import zarr

    location, options = full
    problems = []
    a = zarr.open_array(f"{location}/a", mode="r", storage_options=options)[...]
    problems.extend(
        f"zarr-python reads chunk {i // 4} {j // 4} torn"
        for i in range(0, a.shape[0], 4)
        for j in range(0, a.shape[1], 4)
        if len(set(a[i : i + 4, j : j + 4].ravel().tolist())) != 1
    )
    group = zarr.open_group(location, mode="r", storage_options=options, use_consolidated=False)
    groups = [("g", group["g"])]
    if options is None:  # (a local store's: tests/fs/mount/crash.py's make_lane)
        groups.append(("d", zarr.open_group(f"{location}/d", mode="r", zarr_format=2)))
    for parent, held in groups:
        for name in held.array_keys():
            values = set(held[name][...].tolist())
            if len(values) != 1:
                problems.append(f"zarr-python reads {parent}/{name} torn: {_show(values)}")
            if parent == "d" and held[name].attrs.get("_ARRAY_DIMENSIONS") != ["x"]:
                problems.append(f"zarr-python reads d/{name} without its dimension names")
    return problems
