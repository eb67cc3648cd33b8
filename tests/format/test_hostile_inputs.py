"""Hostile stores against the format layer (docs/errors.md, Bounded memory): a stored object larger
than its chunk can need is refused before it is read, a decompression bomb is refused
without decoding past the chunk's size, and one node's hostile metadata is that node's
MetadataError, never its parent's. Arrays are written by zarr-python, then spoiled."""

from __future__ import annotations

import bz2
import json
import lzma
import os
import pickle
import subprocess
import sys
import textwrap
import tracemalloc
import zlib
from pathlib import Path

import crc32c
import numcodecs
import numpy as np
import pytest
import zarr
import zarr.codecs as zc

from zarrfs.format import ChunkDecodeError, MetadataError, UnsupportedError
from zarrfs.format.errors import ChunkTooLargeError

CHUNK = 16384  # int32 elements: 64 KiB chunks
CHUNK_BYTES = CHUNK * 4
VALUES = np.arange(2 * CHUNK, dtype="<i4")


def _refused(exception: type[Exception], fn, *args) -> None:
    with pytest.raises(exception):
        fn(*args)


def zeros_compressed(codec_id: str, size: int) -> bytes:
    """`size` zero bytes compressed as codec `codec_id` stores them: a bomb."""
    if codec_id == "gzip":
        stream, block = zlib.compressobj(9, zlib.DEFLATED, 31), bytes(1 << 20)
        return b"".join(stream.compress(block) for _ in range(size >> 20)) + stream.flush()
    if codec_id == "zstd-streaming":
        return zstd_without_content_size(zeros_compressed("zstd", size))
    if codec_id in ("zstd-empty-first", "zstd-small-first"):  # numcodecs decodes every frame
        first = numcodecs.Zstd().encode(bytes(0 if codec_id == "zstd-empty-first" else 16))
        return bytes(first) + zeros_compressed("zstd-streaming", size)
    codec = {
        "zstd": numcodecs.Zstd(level=1),
        "blosc": numcodecs.Blosc(cname="zstd"),
        "lz4": numcodecs.LZ4(),
        "zlib": numcodecs.Zlib(level=9),
    }.get(codec_id)
    if codec is not None:
        return bytes(codec.encode(np.zeros(size, "u1")))  # calloc'ed: no memory touched
    return {"bz2": bz2.compress, "lzma": lzma.compress}[codec_id](bytes(size))


def zstd_without_content_size(frame: bytes) -> bytes:
    """The same zstd frame with its header declaring no size, as streaming writers leave it."""
    descriptor = frame[4]
    single_segment = (descriptor >> 5) & 1
    width = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    window = bytes([(27 - 10) << 3]) if single_segment else frame[5:6]
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3] + width
    return frame[:4] + bytes([descriptor & 0b100]) + window + frame[start:]


# (how zarr-python writes the array, bomb codec, bytes the bomb expands to); each bomb is
# small enough to pass the stored-size bound, so that its decoder must stop it
BOMBS = {
    "zstd": ({"compressors": [zc.ZstdCodec()]}, "zstd", 1 << 30),
    "zstd-streaming": ({"compressors": [zc.ZstdCodec()]}, "zstd-streaming", 256 << 20),
    "zstd-empty-first": ({"compressors": [zc.ZstdCodec()]}, "zstd-empty-first", 256 << 20),
    "zstd-small-first": ({"compressors": [zc.ZstdCodec()]}, "zstd-small-first", 256 << 20),
    "gzip": ({"compressors": [zc.GzipCodec()]}, "gzip", 32 << 20),
    "blosc": ({"compressors": [zc.BloscCodec(cname="zstd")]}, "blosc", 64 << 20),
    "v2-zlib": ({"zarr_format": 2, "compressors": numcodecs.Zlib()}, "zlib", 32 << 20),
    "v2-lz4": ({"zarr_format": 2, "compressors": numcodecs.LZ4()}, "lz4", 8 << 20),
    "v2-bz2": ({"zarr_format": 2, "compressors": numcodecs.BZ2()}, "bz2", 16 << 20),
    "v2-lzma": ({"zarr_format": 2, "compressors": numcodecs.LZMA()}, "lzma", 4 << 20),
}

# what a stream decoder holds besides its output: zlib's window and input, bzip2's block,
# xz's dictionary (8 MiB at the default preset)
DECODER_STATE = {"gzip": 256 << 10, "zlib": 256 << 10, "bz2": 4 << 20, "lzma": 9 << 20}


def write_array(root: Path, name: str = "a", **options) -> Path:
    array = zarr.create_array(str(root / name), shape=VALUES.shape, chunks=(CHUNK,), dtype="<i4", **options)
    array[...] = VALUES
    return root / name


def chunk_file(path: Path, index: int = 0) -> Path:
    return path / str(index) if (path / ".zarray").exists() else path / "c" / str(index)


def peak_allocated(read) -> int:
    """Peak bytes allocated (Python objects, numpy and numcodecs buffers) while `read` runs."""
    tracemalloc.start()
    try:
        read()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


# ------------------------------------------------------------------ decompression bombs


@pytest.mark.parametrize("case", list(BOMBS))
def test_a_decompression_bomb_is_refused_within_twice_the_chunk_size(open_hierarchy, tmp_path, case):
    options, codec_id, expands_to = BOMBS[case]
    path = write_array(tmp_path, **options)
    bomb = zeros_compressed(codec_id, expands_to)
    chunk_file(path).write_bytes(bomb)
    array = open_hierarchy(tmp_path).open_node("a")
    assert len(bomb) <= array.pipeline.max_encoded_size  # the decoder has to stop it

    def read() -> None:
        with pytest.raises(ChunkTooLargeError, match="decodes to more than"):
            array.read_chunks([(0,)])

    # zstd, blosc and lz4 refuse from the header; stream decoders stop one past the
    # limit and hold their own state on top, whatever the bomb expands to
    assert peak_allocated(read) < 2 * CHUNK_BYTES + DECODER_STATE.get(codec_id, 0)
    assert np.array_equal(array.read_chunks([(1,)])[0], VALUES[CHUNK:])  # the next chunk reads


def test_a_zstd_chunk_of_several_frames_reads_as_their_concatenation(open_hierarchy, tmp_path):
    path = write_array(tmp_path, compressors=[zc.ZstdCodec()])
    half = VALUES[:CHUNK].tobytes()[: CHUNK_BYTES // 2], VALUES[:CHUNK].tobytes()[CHUNK_BYTES // 2 :]
    chunk_file(path).write_bytes(b"".join(bytes(numcodecs.Zstd().encode(part)) for part in half))
    array = open_hierarchy(tmp_path).open_node("a")
    assert np.array_equal(array.read_chunks([(0,)])[0], zarr.open_array(str(path), mode="r")[:CHUNK])


def rewrite_shard(shard: Path, parts: list[bytes]) -> None:
    """Store `parts` as a shard of inner chunks (index at the end, crc32c)."""
    offsets = np.cumsum([0] + [len(p) for p in parts])
    index = np.array([[offsets[i], len(p)] for i, p in enumerate(parts)], "<u8").tobytes()
    shard.write_bytes(b"".join(parts) + index + crc32c.crc32c(index).to_bytes(4, "little"))


def inner_chunks(shard: Path, count: int) -> list[bytes]:
    raw = shard.read_bytes()
    index = np.frombuffer(raw[-(count * 16 + 4) : -4], "<u8").reshape(count, 2)
    return [raw[int(o) : int(o + n)] for o, n in index]


def test_a_bomb_in_a_shard_is_refused(open_hierarchy, tmp_path):
    path = write_array(tmp_path, shards=(2 * CHUNK,), compressors=[zc.ZstdCodec()])
    shard = chunk_file(path)
    rewrite_shard(shard, [zeros_compressed("zstd", 1 << 30), inner_chunks(shard, 2)[1]])
    array = open_hierarchy(tmp_path).open_node("a")
    with pytest.raises(ChunkTooLargeError, match="decodes to more than"):
        array.read_chunks([(0,)])
    assert np.array_equal(array.read_chunks([(1,)])[0], VALUES[CHUNK:])


def test_bombs_cost_no_resident_memory(tmp_path):
    """The issue's case in a process of its own: a 32 KiB zstd frame that expands to 1 GiB,
    stored for a 4 KiB chunk and for a 1 MiB chunk, with and without a declared size."""
    write_array(tmp_path, "small", compressors=[zc.ZstdCodec()])
    zarr.create_array(
        str(tmp_path / "big"), shape=(1 << 18,), chunks=(1 << 18,), dtype="<i4", compressors=[zc.ZstdCodec()]
    )[...] = 1
    bomb = zeros_compressed("zstd", 1 << 30)
    assert len(bomb) < 64 << 10
    (tmp_path / "big" / "c" / "0").write_bytes(bomb)
    (tmp_path / "big2").mkdir()
    (tmp_path / "big2" / "zarr.json").write_bytes((tmp_path / "big" / "zarr.json").read_bytes())
    (tmp_path / "big2" / "c").mkdir()
    (tmp_path / "big2" / "c" / "0").write_bytes(zstd_without_content_size(bomb))
    # a 4 KiB chunk stored as the whole bomb
    zarr.create_array(str(tmp_path / "tiny"), shape=(1024,), chunks=(1024,), dtype="<i4", compressors=[zc.ZstdCodec()])[
        ...
    ] = 1
    (tmp_path / "tiny" / "c" / "0").write_bytes(bomb)
    script = textwrap.dedent(f"""
        import resource
        from zarrfs.format import Hierarchy
        from zarrfs.format.errors import ChunkTooLargeError
        from zarrfs.store import open_store
        h = Hierarchy(open_store({str(tmp_path)!r}, read_only=True))
        arrays = [h.open_node(n) for n in ("tiny", "big", "big2")]
        h.open_node("small").read_chunks([(1,)])  # warm up the allocator and the codecs
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for array in arrays:
            try:
                array.read_chunks([(0,)])
            except ChunkTooLargeError:
                pass
            else:
                raise SystemExit("a bomb was decoded")
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert result.returncode == 0, result.stderr
    growth_kib = int(result.stdout.split()[-1])
    assert growth_kib < 2 * 1024, f"resident memory grew {growth_kib} KiB"  # 2x the 1 MiB chunk


# ------------------------------------------------------------------ oversized objects


@pytest.mark.parametrize("store", ["local", "memory"])
def test_an_object_larger_than_its_chunk_can_need_is_refused_unread(open_hierarchy, tmp_path, store):
    path = write_array(tmp_path, compressors=[zc.ZstdCodec()])
    huge = chunk_file(path)
    if store == "local":
        with open(huge, "wb") as file:
            file.truncate(2 << 30)  # sparse: 2 GiB that cost no disk
        hierarchy = open_hierarchy(tmp_path)
    else:
        url = f"memory://hostile-{os.getpid()}-{id(tmp_path)}"
        hierarchy = open_hierarchy(url)
        for key in ("a/zarr.json", "a/c/1"):
            hierarchy.store.set(key, (tmp_path / key).read_bytes())
        hierarchy.store.set("a/c/0", bytes(8 << 20))
    array = hierarchy.open_node("a")

    def read() -> None:
        with pytest.raises(ChunkTooLargeError, match="larger than its chunk can need"):
            array.read_chunks([(0,)])

    assert peak_allocated(read) < 2 * CHUNK_BYTES
    assert np.array_equal(array.read_chunks([(1,)])[0], VALUES[CHUNK:])


def test_a_shard_index_claiming_a_huge_inner_chunk_is_refused_unread(open_hierarchy, tmp_path):
    path = write_array(tmp_path, shards=(2 * CHUNK,), compressors=None)
    shard = chunk_file(path)
    parts = inner_chunks(shard, 2)
    index = np.array([[0, 2 << 30], [len(parts[0]), len(parts[1])]], "<u8").tobytes()
    with open(shard, "wb") as file:
        file.write(b"".join(parts))
        file.seek(3 << 30)  # sparse: the range the index names exists
        file.write(index + crc32c.crc32c(index).to_bytes(4, "little"))
    array = open_hierarchy(tmp_path).open_node("a")

    def read() -> None:
        with pytest.raises(ChunkTooLargeError, match="more than the"):
            array.read_chunks([(0,)])

    assert peak_allocated(read) < 2 * CHUNK_BYTES
    assert np.array_equal(array.read_chunks([(1,)])[0], VALUES[CHUNK:])


def test_a_vlen_chunk_counting_billions_of_elements_is_refused(open_hierarchy, tmp_path):
    array = zarr.create_array(str(tmp_path / "s"), shape=(4,), chunks=(4,), dtype=str, compressors=None)
    array[...] = ["a", "bb", "ccc", "dddd"]
    chunk = tmp_path / "s" / "c" / "0"
    chunk.write_bytes((4_000_000_000).to_bytes(4, "little") + chunk.read_bytes()[4:])
    node = open_hierarchy(tmp_path).open_node("s")
    assert peak_allocated(lambda: _refused(ChunkDecodeError, node.read)) < 1 << 20


def test_a_pickle_codec_is_refused_and_never_runs(open_hierarchy, tmp_path):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    write_array(tmp_path, zarr_format=2, compressors=None)
    doc = json.loads((tmp_path / "a" / ".zarray").read_text())
    doc["filters"] = [{"id": "pickle"}]
    (tmp_path / "a" / ".zarray").write_text(json.dumps(doc))
    (tmp_path / "a" / "0").write_bytes(pickle.dumps(Exploit()))
    write_array(tmp_path, "b", compressors=None)
    doc = json.loads((tmp_path / "b" / "zarr.json").read_text())
    doc["codecs"].append({"name": "numcodecs.pickle", "configuration": {}})
    (tmp_path / "b" / "zarr.json").write_text(json.dumps(doc))
    (tmp_path / "b" / "c" / "0").write_bytes(pickle.dumps(Exploit()))
    hierarchy = open_hierarchy(tmp_path)
    for name in ("a", "b"):
        with pytest.raises(UnsupportedError, match="pickle"):
            hierarchy.open_node(name)
    assert not marker.exists()


# ------------------------------------------------------------------ hostile metadata


def test_a_child_nesting_200000_deep_leaves_its_parent_listable(open_hierarchy, tmp_path):
    root = zarr.open_group(str(tmp_path), mode="w")
    root.create_group("good")
    (tmp_path / "deep").mkdir()
    depth = 200_000
    (tmp_path / "deep" / "zarr.json").write_text(
        '{"zarr_format": 3, "node_type": "group", "attributes": {"a": ' + "[" * depth + "]" * depth + "}}"
    )
    hierarchy = open_hierarchy(tmp_path)
    assert hierarchy.children("") == ["deep", "good"]
    with pytest.raises(MetadataError, match="nests deeper"):
        hierarchy.open_node("deep")
    assert hierarchy.open_node("good").attributes == {}


def test_a_child_with_an_oversized_document_leaves_its_parent_listable(open_hierarchy, tmp_path):
    zarr.open_group(str(tmp_path), mode="w").create_group("good")
    (tmp_path / "huge").mkdir()
    with open(tmp_path / "huge" / "zarr.json", "wb") as file:
        file.truncate(1 << 30)  # sparse
    hierarchy = open_hierarchy(tmp_path)
    assert hierarchy.children("") == ["good", "huge"]
    assert peak_allocated(lambda: _refused(MetadataError, hierarchy.open_node, "huge")) < 1 << 20


@pytest.mark.parametrize(
    "edit",
    [
        {"shape": [2**62, 2**62]},
        {"shape": [10**30]},
        {"shape": [0, 10**30]},
        {"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2**62]}}},
    ],
    ids=["product", "dimension", "zero-and-huge", "chunk"],
)
def test_shapes_whose_bytes_overflow_are_metadata_errors(open_hierarchy, tmp_path, edit):
    path = write_array(tmp_path)
    doc = json.loads((path / "zarr.json").read_text())
    doc.update(edit)
    if len(doc["shape"]) != len(doc["chunk_grid"]["configuration"]["chunk_shape"]):
        doc["chunk_grid"]["configuration"]["chunk_shape"] = [1] * len(doc["shape"])
    (path / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match="more than 2\\*\\*62 bytes"):
        open_hierarchy(tmp_path).open_node("a")


def test_v2_shapes_whose_bytes_overflow_are_metadata_errors(open_hierarchy, tmp_path):
    path = write_array(tmp_path, zarr_format=2)
    doc = json.loads((path / ".zarray").read_text())
    doc.update(shape=[2**40, 2**40], chunks=[2**40, 2**40])
    (path / ".zarray").write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match="more than 2\\*\\*62 bytes"):
        open_hierarchy(tmp_path).open_node("a")


def test_more_dimensions_than_numpy_has_is_unsupported(open_hierarchy, tmp_path):
    path = write_array(tmp_path)
    doc = json.loads((path / "zarr.json").read_text())
    doc["shape"] = [1] * 100
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [1] * 100
    (path / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(UnsupportedError, match="dimensions"):
        open_hierarchy(tmp_path).open_node("a")


def test_a_shard_of_a_trillion_inner_chunks_is_refused_without_allocating(open_hierarchy, tmp_path):
    path = write_array(tmp_path, shards=(2 * CHUNK,))
    doc = json.loads((path / "zarr.json").read_text())
    doc["shape"] = [2**40]
    doc["chunk_grid"]["configuration"]["chunk_shape"] = [2**40]
    doc["codecs"][0]["configuration"]["chunk_shape"] = [1]
    (path / "zarr.json").write_text(json.dumps(doc))
    hierarchy = open_hierarchy(tmp_path)
    assert peak_allocated(lambda: _refused(MetadataError, hierarchy.open_node, "a")) < 1 << 20


@pytest.mark.parametrize(
    "document",
    [
        b"\xff\xfe not utf-8",
        b'{"zarr_format": 3, "node_type": "group", "attributes": {"n": ' + b"9" * 5000 + b"}}",
        b'{"zarr_format": 3, "node_type": "group", "attributes": ' + b'{"a": ' * 200 + b"1" + b"}" * 200 + b"}",
    ],
    ids=["utf8", "long-integer", "depth-200"],
)
def test_unparseable_documents_are_metadata_errors(open_hierarchy, tmp_path, document):
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "zarr.json").write_bytes(document)
    with pytest.raises(MetadataError):
        open_hierarchy(tmp_path).open_node("n")


def test_nodes_opened_keep_huge_attributes_as_their_json_not_parsed(open_hierarchy, tmp_path):
    """Parsed, a document's JSON takes 8 to 20 times its bytes, and opened nodes are kept:
    the attributes of a large document are kept as compact JSON, parsed when asked for."""
    attributes = {f"key{i}": {"a": i, "b": [i, i + 1, "x"], "c": "v" * 8} for i in range(30_000)}
    for name in ("a", "b", "c"):
        zarr.create_array(str(tmp_path / name), shape=(4,), dtype="<i4", attributes=attributes)
    size = (tmp_path / "a" / "zarr.json").stat().st_size
    assert size > 2 << 20
    del attributes
    hierarchy = open_hierarchy(tmp_path, read_only=True)
    tracemalloc.start()
    try:
        nodes = [hierarchy.open_node(name) for name in ("a", "b", "c")]
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 3 * 3 * size, f"{held >> 20} MiB held for three documents of {size >> 20} MiB"
    assert nodes[1].metadata.attributes == zarr.open_array(str(tmp_path / "b"), mode="r").attrs.asdict()
