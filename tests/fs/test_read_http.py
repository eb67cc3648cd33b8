"""An https:// (here plain http on 127.0.0.1) source: read-only, listed from consolidated
metadata, values equal to zarr-python's."""

from __future__ import annotations

import errno
import functools
import http.server
import os
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
