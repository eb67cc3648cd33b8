"""A large hierarchy described by consolidated metadata, as a bucket serves it: how long
zarrfs's format layer takes to list every group and open every node from it, against
zarr-python's `members()` on the same hierarchy, and against another checkout of zarrfs
(say, main), each in a fresh interpreter, the sides alternating; medians, and ratios.

    python bench/consolidated.py [--groups 1000] [--arrays 20] [--runs 3] [--other ../main]

The hierarchy is written once: GROUPS groups of ARRAYS arrays each (the arrays' documents
are zarr-python's, the root's consolidated metadata lists every node), on a local disk.
zarrfs's side opens it as a remote hierarchy (as for s3://: listings and node documents
come from the consolidated metadata alone) and times:
  first   opening the root and listing its children (the root document read, its
          consolidated metadata parsed and indexed)
  walk    listing every group's children and opening every node
  again   the root's children once the metadata has expired and is read again, unchanged
zarr-python's side times `open_group(use_consolidated=True).members(max_depth=None)` (its
first read of the root document included, a local read)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(root: Path, groups: int, arrays: int) -> None:
    warnings.filterwarnings("ignore", module="zarr")
    import zarr

    template = zarr.open_group(str(root / "template"), mode="w")
    template.create_array("a", shape=(100, 100), chunks=(50, 50), dtype="float32", attributes={"units": "m"})
    template.create_group("g", attributes={"kind": "plate well"})
    array = json.loads((root / "template" / "a" / "zarr.json").read_text())
    group = json.loads((root / "template" / "g" / "zarr.json").read_text())
    metadata = {}
    for g in range(groups):
        metadata[f"g{g}"] = group
        for a in range(arrays):
            metadata[f"g{g}/a{a}"] = array
    source = root / "many.zarr"
    source.mkdir()
    (source / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {},
                "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": metadata},
            }
        )
    )


def zarrfs_side(source: str) -> dict:
    from zarrfs.format.dialects import open_hierarchy
    from zarrfs.store import open_store

    hierarchy = open_hierarchy(open_store(source, read_only=True))
    hierarchy.remote = True  # what an s3:// store sets
    start = time.perf_counter()
    hierarchy.open_node("")
    groups = hierarchy.children("")
    figures = {"first": time.perf_counter() - start}
    start = time.perf_counter()
    stack = list(groups)
    while stack:
        path = stack.pop()
        if not hasattr(hierarchy.open_node(path), "chunk_grid"):
            stack.extend(f"{path}/{name}" for name in hierarchy.children(path))
    figures["walk"] = time.perf_counter() - start
    hierarchy.metadata_ttl = 0
    start = time.perf_counter()
    hierarchy.children("")
    figures["again"] = time.perf_counter() - start
    return figures


def zarr_side(source: str) -> dict:
    warnings.filterwarnings("ignore", module="zarr")
    import zarr

    start = time.perf_counter()
    members = zarr.open_group(source, mode="r", use_consolidated=True).members(max_depth=None)
    return {"members": time.perf_counter() - start, "nodes": len(members)}


def side(name: str, source: Path, checkout: Path) -> dict:
    # run from / : `python -m` and `-c` put the working directory first on sys.path
    code = (
        f"import json, sys; sys.path.insert(0, {str(REPO / 'bench')!r}); import consolidated;"
        f" print(json.dumps(consolidated.{name}_side({str(source)!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--arrays", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--other", type=Path, help="another zarrfs checkout to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-consolidated-") as work:
        build(Path(work), args.groups, args.arrays)
        source = Path(work) / "many.zarr"
        sides = {"this": lambda: side("zarrfs", source, REPO), "zarr-python": lambda: side("zarr", source, REPO)}
        if args.other:
            sides["other"] = lambda: side("zarrfs", source, args.other.resolve())
        figures: dict[str, list[dict]] = {name: [] for name in sides}
        for run in range(args.runs):
            for name in list(sides) if run % 2 == 0 else list(reversed(sides)):
                figures[name].append(sides[name]())
        size = (source / "zarr.json").stat().st_size
    print(
        f"{figures['zarr-python'][0]['nodes']} nodes, consolidated metadata of {size / 1e6:.1f} MB,"
        f" {args.runs} runs, load average {os.getloadavg()[0]:.1f}"
    )
    members = statistics.median(f["members"] for f in figures["zarr-python"])
    for name in [n for n in ("this", "other") if n in figures]:
        median = {key: statistics.median(f[key] for f in figures[name]) for key in ("first", "walk", "again")}
        total = median["first"] + median["walk"]
        print(
            f"  {name:5s}  first {median['first']:.3f} s  walk {median['walk']:.3f} s  again {median['again']:.3f} s"
            f"  (zarr-python members() {members:.3f} s: {members / total:.2f}x first + walk)"
        )


if __name__ == "__main__":
    main()
