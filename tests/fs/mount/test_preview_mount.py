"""`preview.png` through a real mount: Pillow opens it, it is at most 512 px on its long
side, read from a bounded number of chunks (`zarrfs stats`) or from the multiscale level
closest above that size; colours, NaN and the fill value come out as the data says,
against references computed here from what zarr-python reads."""

from __future__ import annotations

import errno
import json
import os
import stat
import warnings

import numpy as np
import pytest

from tests.conftest import wait_for, zarrfs

Image = pytest.importorskip("PIL.Image")
warnings.filterwarnings("ignore", module="zarr")
import zarr  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def stats(m) -> dict:
    return json.loads(zarrfs("stats", m.path).stdout)


def picture(path) -> np.ndarray:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return np.asarray(image.convert("RGBA"))


def test_a_256_mib_array_previews_at_512_px_from_at_most_64_chunks(mount, tmp_path):
    root = tmp_path / "big.zarr"
    zarr.open_group(str(root), mode="w")  # a group root: /.zarrfs/stats is there
    big = zarr.create_array(str(root / "big"), shape=(8192, 8192), chunks=(512, 512), dtype="float32")
    x = np.arange(8192, dtype=np.float32) // 512
    for row in range(0, 8192, 512):
        block = np.add.outer(np.arange(row, row + 512, dtype=np.float32) // 512, x)
        if row < 1024:
            block[:, :1024] = np.nan  # the top-left 2x2 chunks: no value
        big[row : row + 512] = block
    m = mount(root)
    path = m / "big" / "preview.png"
    before = stats(m)
    size = path.stat().st_size  # from the metadata: no chunk read
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert stats(m).get("cache_misses", 0) == before.get("cache_misses", 0)
    data = path.read_bytes()
    after = stats(m)
    assert len(data) == size
    assert after["cache_misses"] - before.get("cache_misses", 0) <= 64
    assert after["store_requests"] - before.get("store_requests", 0) <= 64
    pixels = picture(path)
    assert pixels.shape == (512, 512, 4)
    assert (pixels[:64, :64, 3] == 0).all() and (pixels[64:, :, 3] == 255).all() and (pixels[:, 64:, 3] == 255).all()
    # values rise to the bottom right: viridis from dark purple to yellow
    assert pixels[100, 100, :3].sum() < pixels[500, 500, :3].sum()
    info = (m / "big" / "info").read_text()
    assert "preview.png" in info and "64 chunks" in info and "viridis across" in info


def test_an_ome_zarr_image_previews_from_the_level_closest_above_512_px(mount, tmp_path):
    root = zarr.open_group(str(tmp_path / "image.zarr"), mode="w", zarr_format=2)
    rng = np.random.default_rng(5)
    levels = {"0": 2048, "1": 1024, "2": 256}
    for name, side in levels.items():
        # each level its own values, so a picture from another level would not match
        root.create_array(name, shape=(2, side, side), chunks=(1, 256, 256), dtype="uint16")[:] = rng.integers(
            0, 1000, (2, side, side), dtype=np.uint16
        )
    root.attrs["multiscales"] = [
        {
            "version": "0.4",
            "axes": [
                {"name": "c", "type": "channel"},
                {"name": "y", "type": "space", "unit": "micrometer"},
                {"name": "x", "type": "space", "unit": "micrometer"},
            ],
            "datasets": [
                {"path": name, "coordinateTransformations": [{"type": "scale", "scale": [1, 2048 / s, 2048 / s]}]}
                for name, s in levels.items()
            ],
        }
    ]
    root.attrs["omero"] = {
        "channels": [
            {"color": "FF0000", "window": {"start": 100, "end": 900}, "active": True},
            {"color": "00FF00", "window": {"start": 0, "end": 500}, "active": True},
        ]
    }
    m = mount(tmp_path / "image.zarr")
    assert "preview.png" in {p.name for p in m.path.iterdir()}
    pixels = picture(m / "preview.png")
    assert pixels.shape == (512, 512, 4)
    level = zarr.open_array(str(tmp_path / "image.zarr" / "1"))[:, 1::2, 1::2].astype(np.float64)
    red = np.round(np.clip((level[0] - 100) / 800, 0, 1) * 255)
    green = np.round(np.clip(level[1] / 500, 0, 1) * 255)
    assert np.array_equal(pixels[..., 0], red) and np.array_equal(pixels[..., 1], green)
    assert (pixels[..., 2] == 0).all()
    info = zarrfs("info", tmp_path / "image.zarr", "/").stdout
    assert "preview.png:        512x512 px from /1 (1024x1024)" in info
    assert "channels 0, 1 across 100 to 900, 0 to 500" in info


def test_an_rgb_image_keeps_its_colours(mount, tmp_path):
    rng = np.random.default_rng(7)
    blocks = rng.integers(0, 256, (20, 14, 3), dtype=np.uint8)
    rgb = np.repeat(np.repeat(blocks, 50, axis=0), 50, axis=1)  # 1000 x 700, blocks of 50 px
    zarr.create_array(str(tmp_path / "rgb.zarr"), shape=rgb.shape, chunks=(256, 256, 3), dtype="uint8")[:] = rgb
    m = mount(tmp_path / "rgb.zarr")
    pixels = picture(m / "preview.png")
    assert pixels.shape == (512, 358, 4) and (pixels[..., 3] == 255).all()
    stored = zarr.open_array(str(tmp_path / "rgb.zarr"))[:]
    reference = np.asarray(Image.fromarray(stored).resize((358, 512), Image.NEAREST))
    differ = np.any(pixels[..., :3] != reference, axis=-1)
    assert differ.mean() < 0.05  # only where a block edge falls between two samples


def test_fill_value_pixels_are_transparent(mount, tmp_path):
    array = zarr.create_array(
        str(tmp_path / "f.zarr"), shape=(300, 400), chunks=(100, 100), dtype="int16", fill_value=-9
    )
    array[100:, :] = np.tile(
        np.arange(400, dtype=np.int16), (200, 1)
    )  # the first chunk row never written: the fill value
    m = mount(tmp_path / "f.zarr")
    pixels = picture(m / "preview.png")
    assert pixels.shape == (300, 400, 4)
    assert (pixels[:100, :, 3] == 0).all() and (pixels[100:, :, 3] == 255).all()
    assert "preview.png" not in {p.name for p in (m.path / "chunks").iterdir()}


def test_a_write_to_data_shows_in_the_next_preview(mount, tmp_path):
    array = zarr.create_array(str(tmp_path / "w.zarr"), shape=(64, 64), chunks=(32, 32), dtype="uint8")
    array[:] = np.add.outer(np.arange(64), np.arange(64)).astype(np.uint8) + 1  # (0: the fill value)
    m = mount(tmp_path / "w.zarr")
    before = picture(m / "preview.png")
    with open(m / "data", "r+b") as f:
        f.write(bytes([255]) * 64 * 32)  # the top half: the largest value
    after = picture(m / "preview.png")
    assert (before[..., 3] == 255).all() and not np.array_equal(before, after)
    assert (after[:32, :, :3] == [253, 231, 37]).all()  # viridis' top, the top half


def test_a_write_not_yet_stored_shows_in_the_next_preview(mount, tmp_path):
    array = zarr.create_array(str(tmp_path / "w.zarr"), shape=(64, 64), chunks=(32, 32), dtype="uint8")
    array[:] = np.add.outer(np.arange(64), np.arange(64)).astype(np.uint8) + 1
    m = mount(tmp_path / "w.zarr")
    before = picture(m / "preview.png")
    with open(m / "data", "r+b", buffering=0) as f:
        f.write(bytes([255]) * 64 * 16)  # the top 16 rows: part of two chunks, stored at close
        during = picture(m / "preview.png")
    assert not np.array_equal(before, during)
    assert (during[:16, :, :3] == [253, 231, 37]).all()


def test_chunks_another_writer_changed_show_once_they_left_the_cache(mount, tmp_path):
    array = zarr.create_array(str(tmp_path / "o.zarr"), shape=(64, 64), chunks=(32, 32), dtype="uint8")
    array[:] = np.add.outer(np.arange(64), np.arange(64)).astype(np.uint8) + 1
    m = mount(tmp_path / "o.zarr", "--cache-size", "1K")  # no chunk is kept: each read is of the store
    before = picture(m / "preview.png")
    zarr.open_array(str(tmp_path / "o.zarr"))[:32, :] = 255  # another writer
    assert (m / "data").read_bytes()[:64] == bytes([255]) * 64  # data shows it
    with open(m / "preview.png", "rb") as f:  # (what the kernel kept of the file: dropped)
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    after = picture(m / "preview.png")
    assert not np.array_equal(before, after) and (after[:32, :, :3] == [253, 231, 37]).all()


def test_a_cache_too_small_for_its_chunks_still_reads_at_most_64_per_read_of_the_file(mount, tmp_path):
    root = tmp_path / "s.zarr"
    zarr.open_group(str(root), mode="w")
    zarr.create_array(str(root / "a"), shape=(2048, 2048, 4), chunks=(64, 64, 4), dtype="uint8")[:] = 3
    m = mount(root, "--cache-size", "1K")  # no chunk is kept
    before = stats(m)
    data = (m / "a" / "preview.png").read_bytes()  # a 1 MiB file (RGBA): several reads
    read = stats(m)["store_requests"] - before.get("store_requests", 0)
    assert len(data) > 1 << 20 and read <= 64, read


def test_a_chunk_that_cannot_be_read_fails_the_preview_eio_and_costs_info_its_range(mount, tmp_path):
    zarr.create_array(str(tmp_path / "c.zarr"), shape=(8, 8), chunks=(4, 4), dtype="float32")[:] = 1.0
    (tmp_path / "c.zarr" / "c" / "0" / "0").write_bytes(b"not zstd")
    m = mount(tmp_path / "c.zarr")
    with pytest.raises(OSError) as failed:
        (m / "preview.png").read_bytes()
    assert failed.value.errno == errno.EIO
    info = (m / "info").read_text()
    assert "preview.png:" in info and "unknown: a chunk could not be read" in info
    assert "c/0/0" in m.log_text()  # which chunk, in the log


def test_an_image_groups_preview_is_stat_at_the_size_read_once_another_writer_resized_its_level(mount, tmp_path):
    root = zarr.open_group(str(tmp_path / "i.zarr"), mode="w", zarr_format=2)
    root.create_array("0", shape=(300, 300), chunks=(100, 100), dtype="uint16")[:] = 7
    root.attrs["multiscales"] = [
        {
            "version": "0.4",
            "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
            "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1]}]}],
        }
    ]
    m = mount(tmp_path / "i.zarr", "--metadata-ttl", "1")
    path = m / "preview.png"
    first = len(path.read_bytes())
    assert path.stat().st_size == first
    zarr.open_array(str(tmp_path / "i.zarr" / "0"), mode="a").resize((400, 200))  # another writer

    def read() -> bytes:
        with open(path, "rb") as f:  # (what the kernel kept of the file: dropped)
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            return f.read()

    data = wait_for(lambda: (d := read()) and len(d) != first and d)
    assert path.stat().st_size == len(data) and picture(path).shape == (400, 200, 4)
