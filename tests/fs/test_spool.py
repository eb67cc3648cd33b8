"""Spools, without a kernel: what was written is what is stored, however large."""

from __future__ import annotations

import os

from zarrfs.fs.spool import Spool


def test_read_all_reads_on_where_one_read_returns_less(tmp_path, monkeypatch):
    """Linux returns at most 2 GiB less 4 KiB per read: a raw file larger than that was
    stored cut short. Modelled here with reads of at most 1000 bytes."""
    spool = Spool(str(tmp_path))
    value = os.urandom(12345)
    spool.write(0, value)
    real = os.preadv
    monkeypatch.setattr(os, "preadv", lambda fd, buffers, offset: real(fd, [buffers[0][:1000]], offset))
    assert spool.read_all() == value
    spool.close()
