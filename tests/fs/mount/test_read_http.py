"""An https:// (here plain http on 127.0.0.1) source: read-only, listed from consolidated
metadata, values equal to zarr-python's."""

from __future__ import annotations

import errno
import functools
import http.server
import json
import os
import subprocess
import threading

import numpy as np
import pytest
import zarr


@pytest.fixture
def served(tmp_path):
    """A zarr-python hierarchy with consolidated metadata, served over HTTP."""
    root = tmp_path / "h.zarr"
    g = zarr.open_group(root, mode="w", attributes={"title": "served"})
    a = g.create_array("grp/a", shape=(6, 7), chunks=(4, 4), dtype="int32", fill_value=0)
    a[:] = np.arange(42, dtype="int32").reshape(6, 7)
    zarr.consolidate_metadata(root)
    handler = functools.partial(QuietHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/h.zarr", root
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning")
def test_an_http_source_mounts_read_only_with_the_oracle_values(mount, served):
    url, root = served
    m = mount(url)
    assert sorted(os.listdir(m.path)) == ["grp", "zarr.json"]
    values = np.load(m / "grp/a/data.npy")
    np.testing.assert_array_equal(values, zarr.open_array(root / "grp/a", mode="r")[...])
    with pytest.raises(OSError) as info:
        (m / "grp/new").mkdir()
    assert info.value.errno == errno.EROFS


@pytest.mark.filterwarnings("ignore:Consolidated metadata:UserWarning")
def test_hostile_names_in_consolidated_metadata_leave_the_rest_of_the_group_listed(mount, tmp_path):
    """On a remote store the consolidated metadata alone lists a group: a key that names
    no node (`..`, an absolute path, an empty or NUL-holding name, one longer than a file
    name) is left out, and every other child is listed and read."""
    root = tmp_path / "h.zarr"
    a = zarr.create_array(root / "ok", shape=(6,), chunks=(4,), dtype="<u2", zarr_format=2, fill_value=0)
    a[:] = np.arange(6, dtype="<u2")
    zarr.open_group(root, mode="a", zarr_format=2)
    zarr.consolidate_metadata(root, zarr_format=2)
    consolidated = json.loads((root / ".zmetadata").read_text())
    for name in ["../up", "/abs", "a//b", ".", "x\u0000y", "L" * 300]:
        consolidated["metadata"][f"{name}/.zarray"] = consolidated["metadata"]["ok/.zarray"]
    (root / ".zmetadata").write_text(json.dumps(consolidated))
    handler = functools.partial(QuietHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        m = mount(f"http://127.0.0.1:{server.server_address[1]}/h.zarr")
        listed = subprocess.run(["ls", "-a", str(m.path)], capture_output=True, text=True)
        assert listed.returncode == 0, listed.stderr
        assert sorted(listed.stdout.split()) == [".", "..", ".zattrs", ".zgroup", "ok"]
        values = np.frombuffer((m / "ok/data").read_bytes(), "<u2")
        np.testing.assert_array_equal(values, zarr.open_array(root / "ok", mode="r")[...])
        m.unmount()
    finally:
        server.shutdown()
        server.server_close()
