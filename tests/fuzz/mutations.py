"""The mutations a generated store undergoes (documents, chunk bytes, shard indexes,
consolidated metadata, names, references), each drawn by hypothesis as plain data and
applied to a copy of a template; each notes which arrays it may have changed."""

from __future__ import annotations

import functools
import json
import os
import struct
from typing import Any

import crc32c
import numcodecs
import numpy as np
from hypothesis import strategies as st

from tests.format.test_hostile_metadata import EXTREMES, JSON, paths
from tests.fuzz.stores import DOCUMENT_NAMES, KINDS, Case, bombs

# ---------------------------------------------------------------- mutations
DANGEROUS_NAMES = ["..", "...", " ", "a b", "tab\t", "new\nline", "\\", "%2e%2e", "c", "chunks", "data", "zarr.json",
                   ".zarrfs", ".zgroup", "__proto__", "x" * 255, "é", "\u202e", "-rf", "*", "0", "0.0"]  # fmt: skip
REFERENCE_TARGETS = [
    ["/etc/hostname"], ["/dev/zero", 0, 1 << 40], ["/dev/zero", 0, 100], ["/nonexistent/x", 0, 10],
    ["../../escape"], ["file:///etc/hostname", 0, 4], ["http://127.0.0.1:9/x", 0, 10], ["SELF", -5, 10],
    ["SELF", 0, -1], ["SELF", 1 << 62, 10], ["SELF", 3, 1 << 40], ["SELF", "0", "10"], ["SELF", 0, 0],
    "base64:!!!!", "base64:AAAA", "", "{", 12345, None, {"a": 1}, [], [None], ["SELF", 0, 10, 5],
]  # fmt: skip
REFERENCE_KEYS = ["../../zarr.json", "/abs/.zarray", "a//b/.zgroup", "be/../.zarray", ".zarray", "be/0.0.0", "be/-1.0",
                  "be/99999999999999999999.0", "nested/x/..", "\x00/.zgroup"]  # fmt: skip
WHOLE_DOCUMENTS = [
    b"", b"{", b"[]", b"null", b'"text"', b"\xff\xfe{}", b"\xef\xbb\xbf{}", b"[" * 100_000 + b"]" * 100_000,
    b'{"a": ' * 5000 + b"1" + b"}" * 5000, b'{"zarr_format": 1e999999}', b'{"zarr_format": ' + b"9" * 5000 + b"}",
    b'{"zarr_format": 3, "node_type": "array"}', b'{"zarr_format": 2}', b'{"zarr_format": NaN}',
    b'{"zarr_format": 3, "zarr_format": 2, "node_type": "group"}', b'{"attributes": {"x": "' + b"y" * (3 << 20) + b'"}}',
]  # fmt: skip
DOCUMENT_EDITS = {
    "unknown codec": ("codecs", [{"name": "no-such-codec", "configuration": {}}]),
    "unknown compressor": ("compressor", {"id": "no-such-compressor"}),
    "pickle filter": ("filters", [{"id": "pickle"}]),
    "wrong shape rank": ("shape", [3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3]),
    "huge shape": ("shape", [2**62, 2**62]),
    "negative shape": ("shape", [-1, 5]),
    "zero chunks": ("chunks", [0, 0]),
    "huge chunks": ("chunks", [2**40, 2**40]),
    "v3 zero chunks": ("chunk_grid", {"name": "regular", "configuration": {"chunk_shape": [0]}}),
    "v3 huge chunks": ("chunk_grid", {"name": "regular", "configuration": {"chunk_shape": [2**50, 2**50]}}),
    "wrong dtype": ("data_type", "no-such-type"),
    "v2 object dtype": ("dtype", "|O"),
    "fill bomb": ("fill_value", "0x" + "f" * 10000),
    "node type": ("node_type", "array"),
}  # fmt: skip


def _scaled_shape(factor: float, plus: int) -> Any:
    def edit(document: dict) -> None:
        if isinstance(document.get("shape"), list):
            document["shape"] = [int(s * factor) + plus if isinstance(s, int) else s for s in document["shape"]]

    return edit


def _flip_endian(document: dict) -> None:
    dtype = document.get("dtype")
    if isinstance(dtype, str) and dtype[:1] in "<>":
        document["dtype"] = {"<": ">", ">": "<"}[dtype[0]] + dtype[1:]
    for codec in document.get("codecs") or []:
        if isinstance(codec, dict) and codec.get("name") == "bytes" and isinstance(codec.get("configuration"), dict):
            codec["configuration"]["endian"] = {"little": "big", "big": "little"}.get(
                codec["configuration"].get("endian")
            )


def _fill(document: dict) -> None:
    if "fill_value" in document:
        document["fill_value"] = 3


def _other_key_encoding(document: dict) -> None:
    if "chunk_key_encoding" in document:
        document["chunk_key_encoding"] = {"name": "v2", "configuration": {"separator": "."}}
    elif "dimension_separator" in document or "zarr_format" in document:
        document["dimension_separator"] = "/" if document.get("dimension_separator", ".") == "." else "."


def _flip_order(document: dict) -> None:
    if document.get("order") in ("C", "F"):
        document["order"] = "CF"[document["order"] == "C"]


def _odd_attributes(document: dict) -> None:
    odd = {"inf": float("inf"), "nan": float("nan"), "big": 2**70, "deep": functools.reduce(lambda v, _: [v], range(60), 0),
           "nul": "\x00", "surrogate": "\udcff", "user.zarr.x": {"": None}}  # fmt: skip
    if "attributes" in document or "node_type" in document:
        document["attributes"] = odd
    elif "zarr_format" not in document:
        document.update(odd)  # (a .zattrs)


# edits after which the document is valid still, and zarr-python reads the array
VALID_EDITS = {
    "shape smaller": _scaled_shape(0.5, 0),
    "shape larger": _scaled_shape(2, 1),
    "shape zero": _scaled_shape(0, 0),
    "endian flipped": _flip_endian,
    "fill value": _fill,
    "other chunk keys": _other_key_encoding,
    "order flipped": _flip_order,
    "odd attributes": _odd_attributes,
}


@st.composite
def document_mutation(draw) -> tuple:
    kind = draw(st.sampled_from(["tree", "tree", "whole", "edit"]))
    if kind == "whole":
        return ("whole", draw(st.integers(0, len(WHOLE_DOCUMENTS) - 1)))
    if kind == "edit":
        return ("edit", draw(st.sampled_from(sorted(DOCUMENT_EDITS) + sorted(VALID_EDITS) * 2)))
    steps = draw(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["replace", "extreme", "delete", "insert"]),
                                    JSON | st.sampled_from(EXTREMES)), min_size=1, max_size=4))  # fmt: skip
    return ("tree", steps)


def edit_tree(document: Any, steps: list) -> Any:
    for pick, action, value in steps:
        found = paths(document)
        path = found[pick % len(found)]
        if not path:
            document = value
            continue
        parent = functools.reduce(lambda node, key: node[key], path[:-1], document)
        if action == "delete":
            del parent[path[-1]]
        elif action == "insert" and isinstance(parent, dict):
            parent[("extra", "must_understand", "codecs", "shape")[pick % 4]] = value
        else:
            parent[path[-1]] = value
    return document


def mutate_document(case: Case, pick: int, mutation: tuple) -> None:
    keys = [k for k in case.stored_keys() if k.rsplit("/", 1)[-1] in DOCUMENT_NAMES]
    key = keys[pick % len(keys)]
    path = case.store / key
    kind, detail = mutation
    if kind == "whole":
        path.write_bytes(WHOLE_DOCUMENTS[detail])
        what = f"{WHOLE_DOCUMENTS[detail][:40]!r}..."
    else:
        try:
            document = json.loads(path.read_bytes())
        except (ValueError, RecursionError):  # (spoilt whole by an earlier mutation)
            return
        if kind == "edit":
            if not isinstance(document, dict):
                return
            edit = DOCUMENT_EDITS.get(detail) or VALID_EDITS[detail]
            if callable(edit):
                edit(document)
            else:
                document[edit[0]] = edit[1]
            what = detail
        else:
            document = edit_tree(document, detail)
            what = repr(detail)[:160]
        path.write_text(json.dumps(document, allow_nan=True))
    case.spoil(key)
    if key.endswith(".zmetadata") or key == "zarr.json":
        case.unlike_zarr.update(case.arrays)  # (consolidated metadata carries every node)
        case.spoiled.update(case.arrays)
    case.done.append(f"document {key}: {kind} {what}")


def _chunk_keys(case: Case) -> list[str]:
    return [k for k in case.stored_keys() if k.rsplit("/", 1)[-1] not in DOCUMENT_NAMES]


CHUNK_MUTATIONS = ["truncate", "oversize", "garbage", "empty", "flip", "frame", "bomb", "symlink-out", "symlink-in",
                   "fifo", "directory"]  # fmt: skip


def mutate_chunk(case: Case, pick: int, how: str, size: int) -> None:
    keys = _chunk_keys(case)
    key = keys[pick % len(keys)]
    path = case.store / key
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: size % max(1, len(data))])
    elif how == "oversize":
        path.write_bytes(data + bytes(size % (4 << 20)) + b"\x01" * (size % 7))
    elif how == "garbage":
        path.write_bytes(np.random.default_rng(size).integers(0, 256, size % 5000, dtype="u1").tobytes())
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "flip" and data:
        spoilt = bytearray(data)
        spoilt[size % len(spoilt)] ^= 1 << (size % 8)
        path.write_bytes(bytes(spoilt))
    elif how == "frame":
        codec = [
            numcodecs.Zstd(),
            numcodecs.GZip(),
            numcodecs.Zlib(),
            numcodecs.LZ4(),
            numcodecs.Blosc(),
            numcodecs.BZ2(),
        ]
        path.write_bytes(bytes(codec[size % len(codec)].encode(np.zeros(size % 70000, "u1"))))
    elif how == "bomb":
        found = bombs()
        path.write_bytes(found[sorted(found)[size % len(found)]])
    elif how == "symlink-out":
        path.unlink()
        path.symlink_to(("/etc/hostname", "/dev/zero", "/proc/self/environ", "../../../../../../etc")[size % 4])
    elif how == "symlink-in":
        path.unlink()
        path.symlink_to(os.path.relpath(case.store / keys[(pick + 1) % len(keys)], path.parent))
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif how == "directory":
        path.unlink()
        path.mkdir()
        (path / "inside").write_bytes(data)
    case.spoil(key)
    case.zarr_may_read &= how not in ("bomb", "symlink-out", "symlink-in", "fifo", "directory")
    case.done.append(f"chunk {key}: {how} {size}")


SHARD_ENTRIES = ["past-end", "overlap", "huge", "half-empty", "empty", "index-itself", "max-offset"]


def mutate_shard_index(case: Case, pick: int, entries: list[tuple[int, str]], fix_crc: bool) -> None:
    keys = [k for k in _chunk_keys(case) if any(k.startswith(a + "/") for a in case.sharded)]
    if not keys:
        return
    key = keys[pick % len(keys)]
    at_start = case.sharded[next(a for a in case.sharded if key.startswith(a + "/"))]
    path = case.store / key
    shard = bytearray(path.read_bytes())
    count = 4  # inner chunks per shard, in both templates
    size = 16 * count + 4
    if len(shard) < size:
        return
    begin = 0 if at_start else len(shard) - size
    index = list(struct.unpack_from(f"<{2 * count}Q", shard, begin))
    for which, how in entries:
        i = which % count
        offset, nbytes = {
            "past-end": (len(shard) + 10, 10),
            "overlap": (index[2 * ((i + 1) % count)], index[2 * ((i + 1) % count) + 1]),
            "huge": (0, 1 << 40),
            "half-empty": (2**64 - 1, 5),
            "empty": (2**64 - 1, 2**64 - 1),
            "index-itself": (begin, size),
            "max-offset": (2**64 - 2, 1),
        }[how]
        index[2 * i : 2 * i + 2] = [offset % 2**64, nbytes % 2**64]
    raw = struct.pack(f"<{2 * count}Q", *index)
    checksum = struct.pack("<I", crc32c.crc32c(raw)) if fix_crc else bytes(shard[begin + size - 4 : begin + size])
    shard[begin : begin + size] = raw + checksum
    path.write_bytes(bytes(shard))
    case.spoil(key)
    case.done.append(f"shard index {key}: {entries} crc fixed={fix_crc}")


CONSOLIDATED = ["drop-entry", "ghost-entry", "disagree-shape", "disagree-dtype", "odd-entry", "odd-metadata"]


def mutate_consolidated(case: Case, pick: int, how: str, odd: Any) -> None:
    """Consolidated metadata that disagrees with the nodes' own documents."""
    key = ".zmetadata" if (case.store / ".zmetadata").exists() else "zarr.json"
    path = case.store / key
    try:
        document = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        return
    if not isinstance(document, dict):
        return
    holder = document if key == ".zmetadata" else document.get("consolidated_metadata")
    if not isinstance(holder, dict) or not isinstance(holder.get("metadata"), dict):
        return
    entries = holder["metadata"]
    names = sorted(entries)
    if not names:
        return
    name = names[pick % len(names)]
    node = name.rsplit("/", 1)[0] if key == ".zmetadata" and "/" in name else ("" if key == ".zmetadata" else name)
    if how == "drop-entry":
        del entries[name]  # stale: a local store is listed as well, so the node still shows, unchanged
    elif how == "ghost-entry":
        entries[name.replace(node, "ghost", 1) if node else "ghost/" + name] = entries[name]
    elif how in ("disagree-shape", "disagree-dtype") and isinstance(entries[name], dict):
        entry = entries[name]
        if how == "disagree-shape" and "shape" in entry:
            entry["shape"] = [s * 3 + 1 for s in entry["shape"]]
        elif "data_type" in entry or "dtype" in entry:
            entry["data_type" if "data_type" in entry else "dtype"] = "<f2" if "dtype" in entry else "float64"
        case.unlike_zarr.update(a for a in case.arrays if a == node or a.startswith(node + "/"))
    elif how == "odd-entry":
        entries[name] = odd
        case.unlike_zarr.update(a for a in case.arrays if a == node or a.startswith(node + "/"))
    else:
        holder["metadata"] = odd
        case.unlike_zarr.update(case.arrays)
    case.spoiled |= case.unlike_zarr
    path.write_text(json.dumps(document, allow_nan=True))
    case.done.append(f"consolidated {key}: {how} {name!r}")


def add_dangerous_name(case: Case, pick: int, name: str, as_array: bool) -> None:
    """A node (a copy of an array's documents, or a group) under a dangerous name."""
    documents = [k for k in case.stored_keys() if k.rsplit("/", 1)[-1] in (".zarray", "zarr.json")]
    where = documents[pick % len(documents)].rsplit("/", 1)[0] if pick % 3 else ""
    if "/" not in documents[pick % len(documents)]:
        where = ""
    target = case.store / where / name if where else case.store / name
    if target.exists():
        return
    try:
        target.mkdir(parents=True)
    except OSError:  # (too long for this filesystem, and such)
        return
    source = case.store / documents[pick % len(documents)]
    if as_array and source.name == "zarr.json":
        (target / "zarr.json").write_bytes(source.read_bytes())
    elif as_array:
        (target / ".zarray").write_bytes(source.read_bytes())
    else:
        (target / ("zarr.json" if source.name == "zarr.json" else ".zgroup")).write_text(
            '{"zarr_format": 3, "node_type": "group"}' if source.name == "zarr.json" else '{"zarr_format": 2}'
        )
    case.done.append(f"name {where}/{name!r} array={as_array}")


# ---------------------------------------------------------------- a whole plan
SIZES = st.integers(0, 1 << 24) | st.sampled_from([0, 1, 2, 3, 7, 16, 17, 100, 4095, 4096, 65536])


def _mutation():
    picks = st.integers(0, 10**6)
    return st.one_of(
        st.tuples(st.just("document"), picks, document_mutation()),
        st.tuples(st.just("chunk"), picks, st.sampled_from(CHUNK_MUTATIONS), SIZES),
        st.tuples(
            st.just("shard"),
            picks,
            st.lists(st.tuples(picks, st.sampled_from(SHARD_ENTRIES)), min_size=1, max_size=3),
            st.booleans(),
        ),
        st.tuples(st.just("consolidated"), picks, st.sampled_from(CONSOLIDATED), JSON),
        st.tuples(st.just("name"), picks, st.sampled_from(DANGEROUS_NAMES), st.booleans()),
    )


REFERENCE_MUTATION = st.one_of(
    st.tuples(st.integers(0, 10**6), st.sampled_from(REFERENCE_TARGETS)),
    st.tuples(st.just(-1), st.tuples(st.sampled_from(REFERENCE_KEYS), st.sampled_from(REFERENCE_TARGETS) | JSON)),
)


@st.composite
def plans(draw) -> tuple[str, list, list]:
    """(template kind, store mutations, reference mutations)."""
    kind = draw(st.sampled_from(KINDS))
    mutations = draw(st.lists(_mutation(), max_size=4))
    references = draw(st.lists(REFERENCE_MUTATION, max_size=3)) if kind == "references" else []
    return kind, mutations, references


def apply(case: Case, mutations: list) -> None:
    for what, *args in mutations:
        {
            "document": mutate_document,
            "chunk": mutate_chunk,
            "shard": mutate_shard_index,
            "consolidated": mutate_consolidated,
            "name": add_dangerous_name,
        }[what](case, *args)
