"""A hierarchy written by zarr-python, copied to S3 (a moto server) and mounted with the
endpoint and credentials given on the command line: `data` and chunk files read as the
oracle reads them through either S3 client (obstore, s3fs), and a group listing comes from the consolidated metadata (`.zmetadata`)
unless `--consolidated=never` says to list the store."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
import uuid
import warnings

import numpy as np
import pytest

from tests.conftest import zarrfs
from tests.conftest_s3 import s3_endpoint, s3_filesystem  # noqa: F401
from tests.format.format_oracle import ALL_CASES, canonical, open_oracle, write_case

warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::Warning:zarr"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
]

# a spread of zarr-python's arrays: v2 and v3, compressors, sharding, fill, 0-d, big-endian
NAMES = [
    "v3.float32.default",
    "v3.int64.big",
    "v3.float64.zstd_checksum",
    "v3.float32.shard_sparse",
    "v3.int64.shard_index_codecs",
    "v3.int32.scalar",
    "v3.float32.unwritten",
    "v3.int16.key_v2_slash",
    "v2.<f8.blosc",
    "v2.>f8.order_F_3d",
    "v2.<i2.sep_slash",
    "v2.|S7",
]
CASES = [c for c in ALL_CASES if c.name in NAMES]
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _bucket(s3_filesystem) -> str:
    name = f"zarrfs-{uuid.uuid4().hex[:16]}"
    s3_filesystem.mkdir(name)
    return name


def _mount_s3(module_mount, url: str, endpoint: str, *options: str):
    env = {**os.environ, **CREDENTIALS}
    return module_mount(url, "--storage-option", f"endpoint_url={endpoint}", *options, env=env)


@pytest.fixture(scope="module", params=["obstore", "s3fs"])
def matrix_on_s3(request, tmp_path_factory, s3_filesystem, s3_endpoint, module_mount):
    assert len(CASES) == len(NAMES)
    root = tmp_path_factory.mktemp("s3matrix") / "h.zarr"
    root.mkdir()
    for case in CASES:
        write_case(root, case)
    bucket = _bucket(s3_filesystem)
    s3_filesystem.put(str(root), f"{bucket}/h.zarr", recursive=True)
    return root, _mount_s3(module_mount, f"s3://{bucket}/h.zarr", s3_endpoint, "--s3-backend", request.param)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_s3_data_is_what_the_oracle_reads(matrix_on_s3, case):
    root, m = matrix_on_s3
    values = np.asarray(open_oracle(root, case)(...))
    node = m / case.name
    assert os.stat(node / "data").st_size == values.nbytes
    assert (node / "data").read_bytes() == canonical(values).tobytes(), case.name
    if case.shape:  # the first chunk file: for shards, one inner chunk fetched by byte range
        chunk = tuple(zarr.open_array(str(root / case.name), mode="r").chunks)
        expected = canonical(values[tuple(slice(0, min(c, n)) for c, n in zip(chunk, case.shape))])
        first = (node / "chunks" / "/".join("0" * len(chunk))).read_bytes()
        if expected.shape == chunk:
            assert first == expected.tobytes(), case.name


# ------------------------------------------------------------------ consolidated metadata


@pytest.fixture(scope="module")
def consolidated_bucket(tmp_path_factory, s3_filesystem):
    """A v2 hierarchy with .zmetadata, and one array added after consolidating (stale)."""
    root = tmp_path_factory.mktemp("consolidated") / "c.zarr"
    top = zarr.open_group(str(root), mode="w", zarr_format=2)
    for name in ("a", "b"):
        grp = top.create_group(name)
        grp.create_array("x", shape=(4,), chunks=(2,), dtype="<i4")[:] = np.arange(4)
    zarr.consolidate_metadata(str(root))
    top.create_array("late", shape=(3,), chunks=(3,), dtype="<i2")[:] = 7
    assert "late" not in (root / ".zmetadata").read_text()
    bucket = _bucket(s3_filesystem)
    s3_filesystem.put(str(root), f"{bucket}/c.zarr", recursive=True)
    return f"s3://{bucket}/c.zarr"


class Recording:
    """The moto server's request recorder: the S3 requests made while it is on."""

    def __init__(self, endpoint: str, tmp_path) -> None:
        from moto.moto_api import recorder

        self.endpoint = endpoint
        recorder._location = str(tmp_path / "moto_recording")  # not the working directory

    def _call(self, action: str) -> str:
        request = urllib.request.Request(
            f"{self.endpoint}/moto-api/recorder/{action}", method="POST" if action != "download-recording" else "GET"
        )
        with urllib.request.urlopen(request) as response:
            return response.read().decode()

    def __enter__(self) -> Recording:
        self._call("reset-recording")
        self._call("start-recording")
        return self

    def __exit__(self, *exc) -> None:
        self._call("stop-recording")
        self.requests = [json.loads(line) for line in self._call("download-recording").splitlines() if line]

    def listings(self) -> list[str]:
        return [
            r["url"]
            for r in self.requests
            if r["method"] == "GET" and "list-type" in urllib.parse.urlparse(r["url"]).query
        ]


def test_listing_comes_from_consolidated_metadata(consolidated_bucket, s3_endpoint, module_mount, tmp_path):
    m = _mount_s3(module_mount, consolidated_bucket, s3_endpoint, "--metadata-ttl", "60")
    with Recording(s3_endpoint, tmp_path) as recording:
        assert sorted(os.listdir(m.path)) == [".zattrs", ".zgroup", "a", "b"]
        assert sorted(os.listdir(m / "a")) == [".zattrs", ".zgroup", "x"]
        assert (m / "b" / "x").is_dir()
    assert recording.listings() == [], "a consolidated hierarchy lists without listing the store"
    assert (m / "a" / "x" / "data").read_bytes() == np.arange(4, dtype="<i4").tobytes()


def test_consolidated_never_lists_the_store(consolidated_bucket, s3_endpoint, module_mount, tmp_path):
    m = _mount_s3(module_mount, consolidated_bucket, s3_endpoint, "--consolidated=never", "--metadata-ttl", "60")
    with Recording(s3_endpoint, tmp_path) as recording:
        assert "late" in os.listdir(m.path)
        os.listdir(m / "a")
    assert recording.listings(), "--consolidated=never lists the store"
    assert (m / "late" / "data").read_bytes() == np.full(3, 7, dtype="<i2").tobytes()


def test_an_option_only_s3fs_understands_picks_s3fs_unless_obstore_is_asked_for(consolidated_bucket, s3_endpoint):
    env = {**os.environ, **CREDENTIALS}
    options = ["--storage-option", f"endpoint_url={s3_endpoint}", "--storage-option", "requester_pays=false"]
    tree = zarrfs("info", consolidated_bucket, *options, env=env).stdout  # auto: s3fs serves it
    assert "x array int32" in " ".join(tree.split())
    refused = zarrfs("info", consolidated_bucket, *options, "--s3-backend", "obstore", env=env, check=False)
    assert refused.returncode == 1
    assert "requester_pays" in refused.stderr and "Traceback" not in refused.stderr


# ------------------------------------------------------------------ memory made ahead


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_large_chunks_read_from_a_bucket_are_decoded_into_memory_made_while_they_were_fetched(
    tmp_path, s3_filesystem, s3_endpoint, mount, zarr_format
):
    """Chunks of 1 MiB (zstd; blosc in v2) through `cat` and `dd`: the bytes are zarr-python's,
    and the mount's counters say the chunks were decoded into memory made meanwhile."""
    import numcodecs

    root = tmp_path / "big.zarr"
    values = np.random.default_rng(5).normal(size=(2048, 512)).astype("<f4")
    compressors = zarr.codecs.ZstdCodec() if zarr_format == 3 else numcodecs.Blosc(cname="lz4")
    zarr.create_array(
        str(root), shape=values.shape, chunks=(512, 512), dtype="<f4", zarr_format=zarr_format, compressors=compressors
    )[...] = values
    bucket = _bucket(s3_filesystem)
    s3_filesystem.put(str(root), f"{bucket}/big.zarr", recursive=True)
    m = _mount_s3(mount, f"s3://{bucket}/big.zarr", s3_endpoint)
    oracle = zarr.open_array(str(root), mode="r")
    out = tmp_path / "chunk"
    subprocess.run(["sh", "-c", f"cat '{m / 'chunks/2/0'}' > '{out}'"], check=True)
    assert out.read_bytes() == np.ascontiguousarray(oracle[1024:1536]).tobytes()
    copy = tmp_path / "data"
    subprocess.run(["dd", f"if={m / 'data'}", f"of={copy}", "bs=1M", "status=none"], check=True)
    assert copy.read_bytes() == np.ascontiguousarray(oracle[...]).tobytes()
    stats = json.loads((m / ".zarrfs/stats").read_text())
    assert stats.get("decoded_into_memory_made_ahead", 0) >= 1, stats
    m.unmount()
