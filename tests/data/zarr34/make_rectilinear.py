"""Write the rectilinear-grid corpus with zarr-python (>= 3.4, which writes such grids):
`python make_rectilinear.py OUT` makes OUT/store (a Zarr v3 hierarchy) and
OUT/expected/NAME.npy (each array as zarr-python reads it back). The committed corpus
is this script's output; the Python 3.13 test run also calls `write_corpus` afresh."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np


def _arrays():
    """(name, create_array keywords, what to write: a selection and its values)."""
    import zarr.codecs

    yield (
        "issue_example",
        dict(shape=(10, 7), chunks=[[3, 3, 4], [2, 5]], dtype="int16", fill_value=-1),
        [
            ((slice(None), slice(None)), np.arange(70, dtype="int16").reshape(10, 7) * 7 - 200),
        ],
    )
    # chunks left unwritten read as the fill value; one size alone per dimension too
    yield (
        "partly_written",
        dict(shape=(9, 12), chunks=[[1, 3, 5], [4, 4, 4]], dtype="float32", fill_value=2.5),
        [
            ((slice(0, 4), slice(2, 7)), np.linspace(-1, 1, 20, dtype="float32").reshape(4, 5)),
        ],
    )
    yield (
        "one_dimension",
        dict(shape=(23,), chunks=[[1, 1, 1, 5, 5, 2, 8]], dtype="uint32", fill_value=0, compressors=None),
        [
            ((slice(None),), np.arange(23, dtype="uint32") ** 3),
        ],
    )
    # an array-to-array codec before the bytes: each chunk's own shape is transposed
    yield (
        "transposed_big_endian",
        dict(
            shape=(5, 4, 6),
            chunks=[[2, 3], [1, 3], 4],
            dtype="int32",
            fill_value=0,
            filters=[zarr.codecs.TransposeCodec(order=(2, 0, 1))],
            serializer=zarr.codecs.BytesCodec(endian="big"),
            compressors=[zarr.codecs.GzipCodec(level=1)],
        ),
        [
            ((slice(None),) * 3, np.arange(120, dtype="int32").reshape(5, 4, 6) - 60),
        ],
    )
    # rectilinear shards of regular inner chunks
    yield (
        "sharded",
        dict(shape=(12, 10), chunks=(2, 5), shards=[[6, 4, 2], [5, 5]], dtype="uint16", fill_value=7),
        [
            ((slice(0, 11), slice(None)), np.arange(110, dtype="uint16").reshape(11, 10) * 3),
        ],
    )


def _overhanging(root, expected: Path) -> None:
    """Grids whose last chunks reach past the array: arrays shrunk after they were written
    (the chunks keep what was written past the new end: NAME.before_resize.npy is what
    zarr-python read before the resize)."""
    array = root.create_array("overhanging", shape=(10, 9), chunks=[[4, 6], [3, 6]], dtype="int8", fill_value=3)
    array[...] = (np.arange(90).reshape(10, 9) % 100 - 50).astype("int8")
    np.save(expected / "overhanging.before_resize.npy", array[...], allow_pickle=False)
    array.resize((8, 7))
    sharded = root.create_array(
        "sharded_overhanging",
        shape=(12, 10),
        chunks=(2, 5),
        shards=[[6, 4, 2], [5, 5]],
        dtype="float64",
        fill_value=-0.5,
    )
    sharded[...] = np.arange(120, dtype="float64").reshape(12, 10) / 8
    np.save(expected / "sharded_overhanging.before_resize.npy", sharded[...], allow_pickle=False)
    sharded.resize((9, 8))


def write_corpus(out: Path) -> dict[str, dict]:
    """Write the corpus under `out`; returns each array's `chunk_grid` document as
    zarr-python wrote it."""
    import zarr

    zarr.config.set({"array.rectilinear_chunks": True})
    shutil.rmtree(out, ignore_errors=True)
    store, expected = out / "store", out / "expected"
    expected.mkdir(parents=True)
    root = zarr.open_group(str(store), mode="w", zarr_format=3)
    for name, options, writes in _arrays():
        array = root.create_array(name, **options)
        for selection, values in writes:
            array[selection] = values
    _overhanging(root, expected)
    grids = {}
    for name, array in sorted(zarr.open_group(str(store), mode="r").arrays()):  # read afresh
        np.save(expected / f"{name}.npy", array[...], allow_pickle=False)
        grids[name] = json.loads((store / name / "zarr.json").read_text())["chunk_grid"]
    return grids


if __name__ == "__main__":
    import zarr

    grids = write_corpus(Path(sys.argv[1]))
    print(f"zarr {zarr.__version__}, numpy {np.__version__}")
    for name, grid in grids.items():
        print(name, json.dumps(grid))
