"""`--virtual-chunks PREFIX`: an Icechunk repository whose chunks are virtual, as
VirtualiZarr makes them (byte ranges of NetCDF4/HDF5 files, here written by netCDF4 and
h5py, in containers its config names: local directories, a bucket on moto), reads
byte-exact where the mount authorizes the container, fails EIO with a log line naming
the option to give where it does not, and a container no PREFIX covers is never read;
references are confined the same way once the option is given."""

from __future__ import annotations

import errno

import numpy as np
import pytest

icechunk = pytest.importorskip("icechunk")
h5py = pytest.importorskip("h5py")
netCDF4 = pytest.importorskip("netCDF4")

from tests.conftest_s3 import s3_bucket, s3_endpoint, s3_filesystem  # noqa: E402, F401

TAS = (250 + np.arange(6 * 8, dtype="<f4").reshape(6, 8) / 4).astype("<f4")


def write_tas(path, **variable) -> None:
    """A NetCDF4 file (netCDF4's) holding TAS as variable `tas` (y, x)."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("y", 6)
        ds.createDimension("x", 8)
        ds.createVariable("tas", "f4", ("y", "x"), **variable)[:] = TAS


COUNTS = np.arange(12, dtype="<i4") * 7


def _contiguous(path, name) -> tuple[int, int]:
    """(offset, length) of a contiguous dataset in an HDF5 file (what VirtualiZarr reads)."""
    with h5py.File(path, "r") as f:
        return f[name].id.get_offset(), f[name].id.get_storage_size()


@pytest.fixture(scope="module")
def virtual_repo(tmp_path_factory):
    """A repository with `tas` (one virtual chunk: a NetCDF4 file's variable, netCDF4's
    writing) in container file://data/, `counts` (one: an HDF5 file's dataset, h5py's) in
    container file://elsewhere/; the repository's config names both."""
    import zarr

    root = tmp_path_factory.mktemp("virtual")
    data, elsewhere = root / "data", root / "elsewhere"
    data.mkdir()
    elsewhere.mkdir()
    write_tas(data / "tas.nc", contiguous=True)
    with h5py.File(elsewhere / "counts.h5", "w") as f:
        f.create_dataset("counts", data=COUNTS)
    config = icechunk.RepositoryConfig.default()
    for directory in (data, elsewhere):
        prefix = f"file://{directory}/"
        config.set_virtual_chunk_container(
            icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(prefix))
        )
    storage = icechunk.local_filesystem_storage(str(root / "repo"))
    session = icechunk.Repository.create(storage, config=config).writable_session("main")
    group = zarr.open_group(session.store, mode="w")
    group.create_array("tas", shape=(6, 8), chunks=(6, 8), dtype="<f4", compressors=None, fill_value=0)
    group.create_array("counts", shape=(12,), chunks=(12,), dtype="<i4", compressors=None, fill_value=0)
    offset, length = _contiguous(data / "tas.nc", "tas")
    session.store.set_virtual_ref("tas/c/0/0", f"file://{data}/tas.nc", offset=offset, length=length)
    offset, length = _contiguous(elsewhere / "counts.h5", "counts")
    session.store.set_virtual_ref("counts/c/0", f"file://{elsewhere}/counts.h5", offset=offset, length=length)
    session.commit("virtual")
    return root


def test_virtual_chunks_read_where_authorized_and_fail_eio_naming_the_option_elsewhere(mount, virtual_repo):
    data, elsewhere = virtual_repo / "data", virtual_repo / "elsewhere"
    m = mount(virtual_repo / "repo", "--read-only", "--virtual-chunks", f"file://{data}/")
    assert (m / "tas" / "data").read_bytes() == TAS.tobytes()
    assert (m / ".zarrfs" / "v2" / "tas" / "0.0").read_bytes() == TAS.tobytes()
    # the other container is not authorized: never read
    with pytest.raises(OSError) as info:
        (m / "counts" / "data").read_bytes()
    assert info.value.errno == errno.EIO
    assert f"mount with --virtual-chunks file://{elsewhere}/ to read it" in m.log_text()
    assert f"--virtual-chunks file://{data}/" not in m.log_text()


def test_without_virtual_chunks_no_container_is_read(mount, virtual_repo):
    m = mount(virtual_repo / "repo", "--read-only")
    with pytest.raises(OSError) as info:
        (m / "tas" / "data").read_bytes()
    assert info.value.errno == errno.EIO
    assert f"mount with --virtual-chunks file://{virtual_repo / 'data'}/ to read it" in m.log_text()


def test_a_local_path_names_its_container_and_a_prefix_above_covers_both(mount, virtual_repo):
    m = mount(virtual_repo / "repo", "--read-only", "--virtual-chunks", str(virtual_repo))
    assert (m / "tas" / "data").read_bytes() == TAS.tobytes()
    assert (m / "counts" / "data").read_bytes() == COUNTS.tobytes()


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """kerchunk references to a NetCDF4 file in data/ (netCDF4's), and a copy of them
    whose `tas` chunk points at the file through a symlink in data/ that leads out."""
    import json

    kerchunk_hdf = pytest.importorskip("kerchunk.hdf")
    root = tmp_path_factory.mktemp("refs")
    data, outside = root / "data", root / "outside"
    data.mkdir()
    outside.mkdir()
    write_tas(outside / "tas.nc", zlib=True)
    (data / "tas.nc").write_bytes((outside / "tas.nc").read_bytes())
    (data / "link.nc").symlink_to(outside / "tas.nc")
    refs = kerchunk_hdf.SingleHdf5ToZarr(str(data / "tas.nc"), inline_threshold=0).translate()
    inside = root / "inside.json"
    inside.write_text(json.dumps(refs))
    escaping = json.loads(json.dumps(refs))
    escaping["refs"] = {
        k: [str(data / "link.nc"), *v[1:]] if isinstance(v, list) else v for k, v in escaping["refs"].items()
    }
    escapes = root / "escapes.json"
    escapes.write_text(json.dumps(escaping))
    return data, outside, inside, escapes


def test_references_with_virtual_chunks_read_only_under_its_prefixes(mount, references):
    data, outside, inside, escapes = references
    m = mount(inside, "--virtual-chunks", str(data))
    assert (m / "tas" / "data").read_bytes() == TAS.tobytes()
    assert (m / ".zarrfs" / "v2" / "tas" / "0.0").read_bytes()[: TAS.nbytes] == TAS.tobytes()
    # a symlink in the authorized directory that leads out of it is not followed
    m = mount(escapes, "--virtual-chunks", str(data))
    with pytest.raises(OSError) as info:
        (m / "tas" / "data").read_bytes()
    assert info.value.errno == errno.EIO
    assert f"mount with --virtual-chunks file://{outside}/ to read it" in m.log_text()
    # without the option, references read their targets as before
    assert (mount(escapes) / "tas" / "data").read_bytes() == TAS.tobytes()


def test_virtual_chunks_in_a_bucket_read_where_authorized(mount, tmp_path, s3_bucket, s3_endpoint, s3_filesystem):
    """The NetCDF4 file on S3 (moto), the repository local: read with the environment's
    credentials once --virtual-chunks names the bucket's prefix; EIO without."""
    import zarr

    nc = tmp_path / "tas.nc"
    write_tas(nc, contiguous=True)
    s3_filesystem.put(str(nc), f"{s3_bucket}/data/tas.nc")
    prefix = f"s3://{s3_bucket}/data/"
    store = icechunk.s3_store(region="us-east-1", endpoint_url=s3_endpoint, allow_http=True, force_path_style=True)
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    session = icechunk.Repository.create(storage, config=config).writable_session("main")
    zarr.open_group(session.store, mode="w").create_array(
        "tas", shape=(6, 8), chunks=(6, 8), dtype="<f4", compressors=None, fill_value=0
    )
    offset, length = _contiguous(nc, "tas")
    session.store.set_virtual_ref("tas/c/0/0", f"{prefix}tas.nc", offset=offset, length=length)
    session.commit("virtual on s3")
    m = mount(tmp_path / "repo", "--read-only", "--virtual-chunks", prefix)
    assert (m / "tas" / "data").read_bytes() == TAS.tobytes()
    m = mount(tmp_path / "repo", "--read-only")
    with pytest.raises(OSError) as info:
        (m / "tas" / "data").read_bytes()
    assert info.value.errno == errno.EIO
    assert f"mount with --virtual-chunks {prefix} to read it" in m.log_text()


def test_a_local_container_is_confined_to_its_real_path(mount, tmp_path):
    """A virtual chunk named inside the authorized directory but a symlink out of it: the
    version's virtual chunks are not read, and the log says why."""
    import zarr

    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.mkdir()
    write_tas(outside / "tas.nc", contiguous=True)
    (data / "link.nc").symlink_to(outside / "tas.nc")
    prefix = f"file://{data}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(prefix)))
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    session = icechunk.Repository.create(storage, config=config).writable_session("main")
    zarr.open_group(session.store, mode="w").create_array(
        "tas", shape=(6, 8), chunks=(6, 8), dtype="<f4", compressors=None, fill_value=0
    )
    offset, length = _contiguous(outside / "tas.nc", "tas")
    session.store.set_virtual_ref("tas/c/0/0", f"{prefix}link.nc", offset=offset, length=length)
    session.commit("a symlink out")
    m = mount(tmp_path / "repo", "--read-only", "--virtual-chunks", str(data))
    with pytest.raises(OSError) as info:
        (m / "tas" / "data").read_bytes()
    assert info.value.errno == errno.EIO
    assert f"the virtual chunks in {prefix}link.nc lead out of the authorized container" in m.log_text()


def test_references_to_an_http_prefix_are_not_read_outside_it_through_dot_segments(mount, tmp_path):
    """An HTTP client resolves `..` (and `%2e%2e`) before it asks, a server decodes `%2f`
    and resolves what that makes: a target under the authorized prefix by its text but
    outside it once resolved either way fails EIO, unread."""
    import functools
    import http.server
    import json
    import threading

    from tests.fs.mount.test_read_http import QuietHandler

    served = tmp_path / "www"
    (served / "pub").mkdir(parents=True)
    (served / "private").mkdir()
    COUNTS.tofile(served / "pub" / "counts.bin")
    (COUNTS * 100).tofile(served / "private" / "counts.bin")
    requested: list[str] = []

    class Recording(QuietHandler):
        def do_GET(self) -> None:
            requested.append(self.path)
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Recording, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    zarray = {"zarr_format": 2, "shape": [12], "chunks": [12], "dtype": "<i4", "compressor": None,
              "fill_value": 0, "order": "C", "filters": None}  # fmt: skip
    refs: dict = {".zgroup": json.dumps({"zarr_format": 2})}
    targets = {
        "inside": "pub/counts.bin",
        "dots": "pub/../private/counts.bin",
        "encoded": "pub/%2e%2e/private/counts.bin",
        "slash": "pub/..%2fprivate/counts.bin",  # a server decodes the slash, then resolves
    }
    for name, target in targets.items():
        refs[f"{name}/.zarray"] = json.dumps(zarray)
        refs[f"{name}/0"] = [f"{base}/{target}", 0, COUNTS.nbytes]
    (tmp_path / "refs.json").write_text(json.dumps({"version": 1, "refs": refs}))
    try:
        m = mount(tmp_path / "refs.json", "--virtual-chunks", f"{base}/pub/")
        assert (m / "inside" / "data").read_bytes() == COUNTS.tobytes()
        for name in ("dots", "encoded", "slash"):
            with pytest.raises(OSError) as info:
                (m / name / "data").read_bytes()
            assert info.value.errno == errno.EIO
        assert f"mount with --virtual-chunks {base}/private/ to read it" in m.log_text()
        assert not any("private" in path.lower() for path in requested), requested
    finally:
        server.shutdown()
        server.server_close()
