"""`--virtual-chunks-file FILE`: containers named with their own storage options (JSON, or
TOML), here a bucket on moto reached at an endpoint that is neither the environment's nor
the one the repository's config names; an Icechunk repository's virtual chunks and a
kerchunk references file's targets read byte-exact through it; a malformed file is
refused before anything is mounted."""

from __future__ import annotations

import errno
import json
import os

import pytest

icechunk = pytest.importorskip("icechunk")
h5py = pytest.importorskip("h5py")
netCDF4 = pytest.importorskip("netCDF4")

from tests.conftest import zarrfs  # noqa: E402
from tests.conftest_s3 import free_port, s3_bucket, s3_endpoint, s3_filesystem  # noqa: E402, F401
from tests.fs.mount.test_virtual_chunks import TAS, write_tas  # noqa: E402


def _tas_on_s3(tmp_path, s3_filesystem, bucket: str, **variable) -> str:
    """A NetCDF4 file (netCDF4's) put at s3://bucket/data/tas.nc; its local copy's path."""
    nc = tmp_path / "tas.nc"
    write_tas(nc, **variable)
    s3_filesystem.put(str(nc), f"{bucket}/data/tas.nc")
    return str(nc)


def _elsewhere() -> str:
    """An endpoint nothing answers at: where the environment or a publisher's config points."""
    return f"http://127.0.0.1:{free_port()}"


def test_an_icechunk_container_reads_with_the_endpoint_and_keys_the_file_gives(
    mount, tmp_path, s3_bucket, s3_endpoint, s3_filesystem
):
    import zarr

    nc = _tas_on_s3(tmp_path, s3_filesystem, s3_bucket, contiguous=True)
    prefix = f"s3://{s3_bucket}/data/"
    # the publisher's config names an endpoint this reader cannot reach
    store = icechunk.s3_store(region="us-east-1", endpoint_url=_elsewhere(), allow_http=True, force_path_style=True)
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    session = icechunk.Repository.create(storage, config=config).writable_session("main")
    zarr.open_group(session.store, mode="w").create_array(
        "tas", shape=(6, 8), chunks=(6, 8), dtype="<f4", compressors=None, fill_value=0
    )
    with h5py.File(nc, "r") as f:
        offset, length = f["tas"].id.get_offset(), f["tas"].id.get_storage_size()
    session.store.set_virtual_ref("tas/c/0/0", f"{prefix}tas.nc", offset=offset, length=length)
    session.commit("virtual on s3")
    containers = tmp_path / "containers.json"
    options = {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing", "region_name": "us-east-1"}
    containers.write_text(json.dumps({prefix: options}))
    m = mount(tmp_path / "repo", "--read-only", "--virtual-chunks-file", containers)
    assert (m / "tas" / "data").read_bytes() == TAS.tobytes()
    assert m.log_text().count("--virtual-chunks") == 0


def test_references_read_their_targets_with_the_options_a_toml_file_gives(
    mount, tmp_path, s3_bucket, s3_endpoint, s3_filesystem
):
    kerchunk_hdf = pytest.importorskip("kerchunk.hdf")
    nc = _tas_on_s3(tmp_path, s3_filesystem, s3_bucket, zlib=True)
    refs = kerchunk_hdf.SingleHdf5ToZarr(nc, inline_threshold=0).translate()
    target = f"s3://{s3_bucket}/data/tas.nc"
    refs["refs"] = {k: [target, *v[1:]] if isinstance(v, list) else v for k, v in refs["refs"].items()}
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    containers = tmp_path / "containers.toml"
    containers.write_text(
        f'["s3://{s3_bucket}/data/"]\nendpoint_url = "{s3_endpoint}"\nkey = "testing"\nsecret = "testing"\n'
    )
    # the environment points S3 where nothing answers: only the file's endpoint reaches the bucket
    env = {**os.environ, "AWS_ENDPOINT_URL": _elsewhere()}
    m = mount(tmp_path / "refs.json", "--virtual-chunks-file", containers, env=env)
    assert (m / "tas" / "data").read_bytes() == TAS.tobytes()
    m = mount(tmp_path / "refs.json", "--virtual-chunks", f"s3://{s3_bucket}/data/", "--timeout", "5", env=env)
    with pytest.raises(OSError) as info:
        (m / "tas" / "data").read_bytes()
    assert info.value.errno == errno.EIO


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("broken.json", '{"s3://bucket/data/": {"anon": true', "is not JSON"),
        ("list.json", '["s3://bucket/data/"]', "maps no container prefix"),
        ("flat.json", '{"s3://bucket/data/": "anon"}', "maps to str, not an object of storage options"),
        ("broken.toml", '["s3://bucket/data/"]\nanon = ', "is not TOML"),
    ],
)
def test_a_malformed_file_is_refused_by_name_before_mounting(tmp_path, name, text, why):
    (tmp_path / name).write_text(text)
    (tmp_path / "mnt").mkdir()
    result = zarrfs("mount", tmp_path, tmp_path / "mnt", "--virtual-chunks-file", tmp_path / name, check=False)
    assert result.returncode != 0
    # after the usage, one line: the option, the file and what is wrong with it
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"zarrfs mount: error: argument --virtual-chunks-file: {tmp_path / name}")
    assert why in error
    assert not os.path.ismount(tmp_path / "mnt")


def test_references_refuse_containers_whose_options_disagree(tmp_path):
    """fsspec reads all of a protocol's targets through one filesystem: two containers with
    different options cannot both be honoured, so the mount is refused, not half-honoured."""
    (tmp_path / "refs.json").write_text(json.dumps({"version": 1, "refs": {".zgroup": '{"zarr_format": 2}'}}))
    containers = tmp_path / "containers.json"
    containers.write_text(json.dumps({"s3://a/x/": {"anon": True}, "s3://b/y/": {"key": "k", "secret": "s"}}))
    (tmp_path / "mnt").mkdir()
    result = zarrfs("mount", tmp_path / "refs.json", tmp_path / "mnt", "--virtual-chunks-file", containers, check=False)
    assert result.returncode != 0
    assert "must name one protocol and the same options" in result.stderr
    assert not os.path.ismount(tmp_path / "mnt")
