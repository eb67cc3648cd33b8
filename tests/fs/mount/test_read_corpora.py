"""The zarrita.js corpora (v2 and v3, written by other implementations) mounted: every
array's `data` (or `data.jsonl`) is what zarr-python reads."""

from __future__ import annotations

import base64
import json
import warnings

import numpy as np
import pytest

from tests.conftest import CORPORA
from tests.format.format_oracle import assert_same_values, canonical

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::Warning:zarr")

ROOTS = {version: CORPORA / "zarrita-js" / version / "data.zarr" for version in ("v2", "v3")}
# zarr-python cannot read it either: the json2 object codec is not a Zarr data type
UNSUPPORTED = {"1d.contiguous.json2.O"}


def _arrays(version: str) -> list[str]:
    root = ROOTS[version]
    name = "zarr.json" if version == "v3" else ".zarray"
    return sorted(
        doc.parent.relative_to(root).as_posix()
        for doc in root.rglob(name)
        if version == "v2" or json.loads(doc.read_text())["node_type"] == "array"
    )


CASES = [pytest.param(v, p, id=f"{v}:{p}") for v in ("v2", "v3") for p in _arrays(v) if p not in UNSUPPORTED]


@pytest.fixture(scope="module")
def mounted(module_mount):
    return {version: module_mount(root) for version, root in ROOTS.items()}


def test_corpora_hold_arrays():
    assert len([c for c in CASES if c.values[0] == "v2"]) > 30
    assert len([c for c in CASES if c.values[0] == "v3"]) > 40


@pytest.mark.parametrize(("version", "path"), CASES)
def test_corpus_array_data_is_what_zarr_python_reads(mounted, version, path):
    expected = np.asarray(zarr.open_array(str(ROOTS[version] / path), mode="r")[...])
    node = mounted[version] / path
    if expected.dtype.kind in "OTU" and (node / "data.jsonl").exists():
        decoded = [json.loads(line) for line in (node / "data.jsonl").read_text(encoding="utf-8").splitlines()]
        if decoded and isinstance(expected.reshape(-1)[0], bytes):
            decoded = [base64.standard_b64decode(v) for v in decoded]
        ours = np.empty(len(decoded), dtype=object)
        ours[:] = decoded
        assert_same_values(ours.reshape(expected.shape), expected.astype(object), path)
        return
    assert (node / "data").read_bytes() == canonical(expected).tobytes(), path
    assert_same_values(np.load(node / "data.npy", mmap_mode="r"), expected, path)
