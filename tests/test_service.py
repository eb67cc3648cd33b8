"""Running as a service (docs/troubleshooting.md), through the command line as an operator
meets it: readiness and stopping told to a service manager, logs that are never lost,
counters, refusals that name what is wrong, dead mounts cleaned up, the unit file."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zarr

from tests.conftest import REPO, ZARRFS, wait_for, zarrfs
from tests.conftest_s3 import proxy, s3_bucket, s3_endpoint, s3_filesystem, s3_storage_options  # noqa: F401
from zarrfs.cli import is_mounted, process_alive
from zarrfs.daemon import default_log_file, pid_file


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "s.zarr"
    group = zarr.open_group(str(root), mode="w")
    group.create_array("a", shape=(8, 8), chunks=(4, 4), dtype="<f4")[...] = np.arange(64, dtype="<f4").reshape(8, 8)
    return root


@pytest.fixture
def mountpoint(tmp_path):
    path = tmp_path / "m"
    path.mkdir()
    yield path
    if is_mounted(str(path)):
        subprocess.run(["fusermount3", "-u", "-z", str(path)], capture_output=True)


def _foreground(store, mountpoint, env, *options):
    return subprocess.Popen(
        [*ZARRFS, "mount", "-f", str(store), str(mountpoint), *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def test_the_service_manager_hears_ready_once_the_mount_answers_and_stopping_at_sigterm(store, mountpoint, tmp_path):
    address = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(30)
    daemon = _foreground(store, mountpoint, {**os.environ, "NOTIFY_SOCKET": address})
    try:
        assert sock.recv(256) == b"READY=1"
        # told only once it answers: the first look at it succeeds at once
        assert sorted(os.listdir(mountpoint / "a"))[:3] == ["chunks", "data", "data.csv"]
        daemon.send_signal(signal.SIGTERM)
        assert sock.recv(256) == b"STOPPING=1"
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
        sock.close()
    assert not is_mounted(str(mountpoint))


def test_a_daemon_without_syslog_logs_to_a_file_and_says_where(store, mountpoint):
    env = {**os.environ, "ZARRFS_SYSLOG_SOCKET": "/nonexistent/log"}
    expected = default_log_file(str(mountpoint))
    if os.path.exists(expected):
        os.unlink(expected)
    result = zarrfs("mount", store, mountpoint, "--log-level", "INFO", env=env)
    try:
        assert expected in result.stdout + result.stderr
        with pytest.raises(OSError):
            os.open(mountpoint / "a/info", os.O_WRONLY)  # EACCES: a read-only view, logged
        wait_for(lambda: os.path.exists(expected) and "EACCES" in open(expected).read())
    finally:
        zarrfs("umount", mountpoint)
    assert "unmounted" in open(expected).read()


def test_sigusr1_writes_the_counters_and_every_threads_stack_to_the_log(mount, store):
    m = mount(store)
    (m / "a/data").read_bytes()
    os.kill(m.pid, signal.SIGUSR1)
    # (the threads' lines follow the counters' line: the log may be read between them)
    wait_for(lambda: "SIGUSR1: counters" in m.log_text() and "SIGUSR1: thread MainThread" in m.log_text())
    text = m.log_text()
    counters = json.loads(text.split("SIGUSR1: counters ", 1)[1].splitlines()[0])
    assert counters["fuse_read"] >= 1
    assert "SIGUSR1: thread MainThread" in text


def test_signals_while_sigterm_stores_the_buffered_writes_neither_kill_the_daemon_nor_lose_a_write(
    mount, s3_filesystem, s3_bucket, s3_storage_options, proxy, tmp_path
):
    """SIGTERM has the daemon store what it buffers before it exits. A SIGUSR1 (counters
    to the log) or a second SIGTERM that comes meanwhile is heard, not left to its default
    action, which would kill the daemon and lose every acknowledged write still buffered."""
    local = tmp_path / "w.zarr"
    zarr.create_array(str(local / "a"), shape=(64, 64), chunks=(16, 16), dtype="u1", fill_value=0)[...] = 1
    zarr.open_group(str(local), mode="a")
    s3_filesystem.put(str(local), f"{s3_bucket}/w.zarr", recursive=True)
    m = mount(f"s3://{s3_bucket}/w.zarr", "--storage-option", f"endpoint_url={proxy.endpoint}")
    expected = np.ones((64, 64), "u1")
    fd = os.open(m / "a/data", os.O_WRONLY)
    for row, col in ((r, c) for r in range(0, 64, 16) for c in range(0, 64, 16)):  # one byte in each chunk
        assert os.pwrite(fd, b"\x05", row * 64 + col) == 1
        expected[row, col] = 5
    proxy.freeze()  # the store takes the flush's requests and answers none until thawed
    os.kill(m.pid, signal.SIGTERM)
    wait_for(lambda: os.path.exists(pid_file(str(m.path)) + ".storing"))  # the flush is under way
    os.kill(m.pid, signal.SIGUSR1)
    os.kill(m.pid, signal.SIGTERM)
    wait_for(
        lambda: (
            not process_alive(m.pid)
            or ("SIGUSR1: counters" in m.log_text() and "signal SIGTERM: already unmounting" in m.log_text())
        )
    )
    assert process_alive(m.pid), f"the daemon died of a signal while storing:\n{m.log_text()}"
    proxy.thaw()
    wait_for(lambda: not process_alive(m.pid), timeout=60)
    with contextlib.suppress(OSError):  # the mount is gone
        os.close(fd)
    text = m.log_text()
    assert "Traceback" not in text and "unmounted" in text, text
    stored = zarr.open_array(f"s3://{s3_bucket}/w.zarr/a", mode="r", storage_options=s3_storage_options)[...]
    np.testing.assert_array_equal(stored, expected)


def test_the_mount_is_ready_even_when_raising_the_readahead_fails(monkeypatch, caplog):
    """Raising the readahead is a speed-up: whatever goes wrong there, one log line, and
    the service manager and `zarrfs mount` still hear that the mount is ready."""
    import trio

    from zarrfs.fs.fuse import session

    def broken(target):
        raise ValueError("an unexpected /proc/self/mountinfo")

    monkeypatch.setattr(session, "_set_read_ahead", broken)
    told, warmed = [], threading.Event()

    async def main():
        init_came = trio.Event()
        init_came.set()
        await session._ready_after_init(init_came, "/nowhere", lambda: told.append("READY"), warmed.set)

    trio.run(main)
    assert told == ["READY"]
    assert warmed.wait(10)
    assert "read_ahead_kb unchanged: an unexpected /proc/self/mountinfo" in caplog.text


def test_after_reading_an_array_the_daemon_runs_only_threads_of_its_own(mount, store):
    """numpy's OpenBLAS would start a thread per core that spins at the first read; the
    daemon does no linear algebra. Every thread the process has is one Python knows."""
    m = mount(store)
    assert (m / "a/data").read_bytes() == np.arange(64, dtype="<f4").tobytes()
    before = set(os.listdir(f"/proc/{m.pid}/task"))
    asked = [0.0]

    def unknown() -> set[str]:
        """Threads the process had before the first signal and still has, that no dump has
        named by their native id (a thread Python does not know never gets a line)."""
        dumped = set(re.findall(r"SIGUSR1: thread .* \(\d+, native (\d+)\):", m.log_text()))
        return (before & set(os.listdir(f"/proc/{m.pid}/task"))) - dumped

    def all_named() -> bool:
        if not unknown():
            return True
        # a pool thread still starting as a dump ran (its OS thread made, its Python one not
        # yet registered) has no name in that dump: ask for another, once a second
        if time.monotonic() - asked[0] > 1:
            os.kill(m.pid, signal.SIGUSR1)
            asked[0] = time.monotonic()
        return False

    try:
        wait_for(all_named, timeout=30)
    except AssertionError:
        names = {tid: _thread_name(m.pid, tid) for tid in unknown()}
        raise AssertionError(f"threads the dump does not name (tid: name): {names}") from None


def _thread_name(pid: int, tid: str) -> str:
    try:
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def test_umount_of_a_busy_mount_names_the_processes_holding_it(mount, store):
    """As `fuser -m` does: a shell whose working directory is inside, a reader holding a
    file open. It said "Device or resource busy" and no more."""
    m = mount(store)
    in_it = subprocess.Popen(["sleep", "120"], cwd=m / "a")
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; f = open(sys.argv[1], 'rb'); print(flush=True); time.sleep(120)",
            m / "a/data.npy",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline() == b"\n"  # the file is open
        result = zarrfs("umount", m.path, check=False)
        assert result.returncode == 1
        assert "busy" in result.stderr and "held by" in result.stderr, result.stderr
        assert f"{in_it.pid} (sleep)" in result.stderr and f"{reader.pid} (python" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    finally:
        for process in (in_it, reader):
            process.kill()
            process.wait()
    m.unmount()


def test_umount_names_the_mount_namespace_that_keeps_the_daemon_alive(mount, store):
    """A mount namespace made while the mount stood holds a copy of it: unmounted here, the
    FUSE connection lives on there, and the daemon cannot end. `zarrfs umount` says who."""
    m = mount(store)
    # (its copy made private, so that the unmount here does not reach it; `--propagation
    # private` would remount / too, which a chroot's / cannot be)
    holder = subprocess.Popen(
        [
            "unshare",
            "--mount",
            "--propagation",
            "unchanged",
            "sh",
            "-c",
            f"mount --make-private '{m.path}' && exec sleep 120",
        ]
    )
    try:
        wait_for(lambda: _thread_name(holder.pid, str(holder.pid)) == "sleep")  # unshared, then run
        result = zarrfs("umount", m.path, "--timeout", "2", check=False)
        assert result.returncode == 1
        assert f"{holder.pid} (sleep)" in result.stderr and "other mount namespaces" in result.stderr
        assert process_alive(m.pid)
    finally:
        holder.kill()
        holder.wait()
    wait_for(lambda: not process_alive(m.pid))  # the last copy gone, the daemon ends


def test_stats_count_what_a_known_sequence_of_reads_did(mount, store):
    m = mount(store)
    before = json.loads(zarrfs("stats", m.path).stdout)
    assert before["errors"] == 0  # every counter docs/troubleshooting.md names, from the start
    (m / "a/chunks/0/1").read_bytes()
    (m / "a/chunks/1/1").read_bytes()
    (m / "a/chunks/0/0").write_bytes(np.full((4, 4), 2.5, "<f4").tobytes())
    after = json.loads(zarrfs("stats", m.path).stdout)
    assert after["bytes_stored"] > before["bytes_stored"]
    assert after["store_set"] >= before.get("store_set", 0) + 1
    assert after["fuse_read"] >= before.get("fuse_read", 0) + 2
    assert after["store_get"] >= before.get("store_get", 0) + 1
    assert after["cache_misses"] >= before.get("cache_misses", 0) + 2
    assert after["peak_rss_bytes"] > 10 << 20
    assert {"bytes_fetched", "bytes_stored", "dirty_bytes", "cache_hits", "cache_evictions"} <= set(after)


def _bdi_read_ahead_kb(path) -> int:
    with open("/proc/self/mountinfo") as f:
        device = next(line.split()[2] for line in f if line.split()[4] == str(path))
    with open(f"/sys/class/bdi/{device}/read_ahead_kb") as f:
        return int(f.read())


def test_a_reader_that_opens_as_soon_as_the_mount_is_ready_gets_the_raised_readahead(mount, tmp_path):
    """A file keeps the readahead it was opened with: had the mount said it was ready
    before raising it, a `dd` started at once would be served in 128 KiB reads for good."""
    root = tmp_path / "big.zarr"
    values = np.arange(4 << 20, dtype="<f4")
    zarr.create_array(str(root), shape=values.shape, chunks=(1 << 18,), dtype="<f4", compressors=None)[...] = values
    m = mount(root, "--read-only")
    assert _bdi_read_ahead_kb(m.path) == 1024  # already when `zarrfs mount` returns
    copied = subprocess.run(
        ["dd", f"if={m / 'data'}", "of=/dev/stdout", "bs=1M", "status=none"], capture_output=True, check=True
    ).stdout
    assert copied == values.tobytes()
    stats = json.loads(zarrfs("stats", m.path).stdout)
    assert stats["fuse_read"] <= 24, stats  # 16 MiB: 16 reads of 1 MiB (128 KiB reads: 128)


def test_umount_cleans_up_after_a_killed_daemon(mount, store):
    m = mount(store)
    os.kill(m.pid, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{m.pid}") or open(f"/proc/{m.pid}/stat").read().split()[2] == "Z")
    with pytest.raises(OSError):
        os.listdir(m.path)  # Transport endpoint is not connected
    result = zarrfs("umount", m.path)
    assert "dead mount" in result.stdout + result.stderr
    assert not is_mounted(str(m.path))


def test_stats_count_the_bytes_of_metadata_written(mount, store):
    """Documents stored through the mount count in bytes_stored, as chunks do: it stayed 0
    after attribute writes, `mkdir` and a rewritten zarr.json."""
    m = mount(store)
    stored = lambda: json.loads(zarrfs("stats", m.path).stdout)["bytes_stored"]  # noqa: E731
    assert stored() == 0
    os.setxattr(m / "a", "user.zarr.units", b'"K"')
    after_xattr = stored()
    assert after_xattr >= len((m / "a/zarr.json").read_bytes())
    (m / "g").mkdir()
    after_mkdir = stored()
    assert after_mkdir > after_xattr
    document = (m / "g/zarr.json").read_bytes()
    (m / "g/zarr.json").write_bytes(document)
    assert stored() == after_mkdir + len(document)
    m.unmount()


def test_stats_of_a_dead_mount_says_the_daemon_died(mount, store):
    m = mount(store)
    os.kill(m.pid, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{m.pid}") or open(f"/proc/{m.pid}/stat").read().split()[2] == "Z")
    result = zarrfs("stats", m.path, check=False)
    assert result.returncode != 0 and "died" in result.stderr and "passthrough" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    zarrfs("umount", m.path)


def test_info_of_a_missing_source_or_one_without_zarr_data_fails(tmp_path):
    missing = zarrfs("info", tmp_path / "nothing-here", check=False)
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain/notes.txt").write_text("hello")
    empty = zarrfs("info", tmp_path / "plain", check=False)
    assert empty.returncode != 0 and "not a Zarr hierarchy" in empty.stderr
    assert len(empty.stderr.strip().splitlines()) == 1


def test_an_unknown_mount_option_is_refused_by_name(store, mountpoint):
    result = zarrfs("mount", store, mountpoint, "-o", "allow_other,bogus_opt", check=False)
    assert result.returncode != 0 and "bogus_opt" in result.stderr
    assert not is_mounted(str(mountpoint))


@pytest.mark.parametrize("option", ["blksize=4096", "blkdev"])
def test_block_device_options_are_refused_by_name_before_mounting(store, mountpoint, option):
    result = zarrfs("mount", store, mountpoint, "-o", option, check=False)
    assert result.returncode != 0 and option.partition("=")[0] in result.stderr and "block device" in result.stderr
    assert not is_mounted(str(mountpoint))


def test_a_size_that_is_not_one_is_refused_with_an_example(store, mountpoint):
    result = zarrfs("mount", store, mountpoint, "--cache-size", "lots", check=False)
    assert result.returncode != 0 and "'lots' is not a size" in result.stderr


def test_a_mountpoint_that_holds_files_is_refused_unless_allowed(store, mountpoint):
    (mountpoint / "keep.txt").write_text("mine")
    refused = zarrfs("mount", store, mountpoint, check=False)
    assert refused.returncode != 0 and "not empty" in refused.stderr and "--allow-non-empty" in refused.stderr
    assert not is_mounted(str(mountpoint))
    zarrfs("mount", store, mountpoint, "--allow-non-empty")
    try:
        assert "a" in os.listdir(mountpoint)
    finally:
        zarrfs("umount", mountpoint)
    assert (mountpoint / "keep.txt").read_text() == "mine"


def test_df_shows_ample_space_and_ls_shows_dot_entries(mount, store):
    m = mount(store)
    st = os.statvfs(m.path)
    assert st.f_bavail * st.f_frsize >= 1 << 40
    listing = subprocess.run(["ls", "-a", str(m / "a")], capture_output=True, text=True, check=True).stdout.split()
    assert listing[:2] == [".", ".."] and "data" in listing


def test_the_help_names_every_argument_with_examples_and_defaults():
    text = zarrfs("mount", "--help").stdout
    for word in (
        "SOURCE",
        "MOUNTPOINT",
        "--consolidated",
        "--cache-size",
        "--memory-target",
        "--allow-non-empty",
        "examples:",
        "default: 512MiB",
    ):
        assert word in text, word
    assert "--timeout" in zarrfs("umount", "--help").stdout
    assert zarrfs("--version").stdout.startswith("zarrfs ")


def test_the_systemd_unit_verifies(tmp_path):
    unit = (REPO / "systemd/zarrfs@.service").read_text()
    assert "Type=notify" in unit
    local = tmp_path / "zarrfs@demo.service"
    local.write_text(unit.replace("/usr/local/bin/zarrfs", str(ZARRFS[0]) if len(ZARRFS) == 1 else sys.executable))
    result = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    broken = tmp_path / "zarrfs@broken.service"
    broken.write_text(unit.replace("/usr/local/bin/zarrfs", "/nonexistent/zarrfs"))
    assert subprocess.run(["systemd-analyze", "verify", str(broken)], capture_output=True).returncode != 0


def test_the_pid_file_names_the_daemon(mount, store):
    m = mount(store)
    assert int(open(pid_file(str(m.path))).read()) == m.pid
