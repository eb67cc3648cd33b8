"""Scratch files of the decoded tree (zarrfs/fs/decoded/scratch.py) without a kernel: held in
memory within their share, spilled to a spool past it, kept for their opens after their
name goes."""

from __future__ import annotations

from zarrfs.fs.decoded.scratch import ScratchFiles


def test_a_scratch_file_past_the_memory_share_spills_to_a_spool_and_reads_back(tmp_path):
    files = ScratchFiles(budget=100, spool_dir=str(tmp_path))
    small = files.opened(files.create("g/small"))
    small.write(0, b"s" * 60)
    big = files.opened(files.create("g/big"))
    big.write(0, b"a" * 30)
    big.write(30, b"b" * 30)  # 120 bytes in memory would pass the share
    assert big.content.memory is None and big.content.spool is not None
    assert small.content.memory is not None
    assert big.read(0, 100) == b"a" * 30 + b"b" * 30
    big.truncate(10)
    assert big.read(0, 100) == b"a" * 10 and big.attributes().size == 10
    for file in (small, big):
        file.release()


def test_a_scratch_file_unlinked_while_open_keeps_its_bytes_until_the_last_release(tmp_path):
    files = ScratchFiles(budget=1 << 20, spool_dir=str(tmp_path))
    file = files.opened(files.create("g/x"))
    file.write(0, b"kept")
    assert files.remove("g/x") and files.get("g/x") is None
    assert file.read(0, 10) == b"kept" and file.attributes().nlink == 0
    file.release()
    assert file.content.memory == bytearray() and files.left() == []


def test_a_scratch_file_renamed_among_scratch_names_replaces_what_was_there(tmp_path):
    files = ScratchFiles(budget=1 << 20, spool_dir=str(tmp_path))
    files.add("g/a", b"first")
    files.add("g/b", b"second")
    files.rename("g/a", "g/b")
    assert files.left() == ["g/b"]
    content = files.get("g/b")
    assert content is not None and content.read(0, 10) == b"first"
