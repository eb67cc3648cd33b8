"""What the command line refuses at parse time, by name, and what `zarrfs --version` says:
a deadline of 0 or less failed every store call once mounted ("no answer within -1s"),
and a negative --metadata-ttl mounted."""

from __future__ import annotations

import importlib.metadata
import platform

import pytest

from tests.conftest import zarrfs


@pytest.mark.parametrize(
    "argv",
    [
        ["mount", "--timeout", "0"],
        ["mount", "--timeout", "-1"],
        ["mount", "--timeout=nan"],
        ["mount", "--metadata-ttl", "-5"],
        ["mount", "--metadata-ttl", "inf"],
        ["umount", "--timeout", "0"],
    ],
)
def test_a_duration_out_of_range_is_refused_by_name(argv, tmp_path):
    source, mountpoint = tmp_path / "s.zarr", tmp_path / "m"
    command = argv[0]
    args = [command, *([source, mountpoint] if command == "mount" else [mountpoint]), *argv[1:]]
    result = zarrfs(*args, check=False)
    assert result.returncode == 2, result.stderr
    option = argv[1].split("=")[0]
    assert f"argument {option}:" in result.stderr and "seconds" in result.stderr, result.stderr


def test_a_metadata_ttl_of_zero_is_accepted():
    from zarrfs.arguments import build_parser

    args = build_parser().parse_args(["mount", "s", "m", "--metadata-ttl", "0", "--timeout", "0.5"])
    assert (args.metadata_ttl, args.timeout) == (0.0, 0.5)


def test_version_names_what_zarrfs_runs_on_and_the_extras():
    lines = zarrfs("--version").stdout.splitlines()
    by_name = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in lines}
    assert lines[0].startswith("zarrfs ")
    assert by_name["Python"].startswith(platform.python_version())
    assert by_name["pyfuse3"] == importlib.metadata.version("pyfuse3")
    assert by_name["libfuse"].startswith("3.")
    assert by_name["kernel"] == f"{platform.system()} {platform.release()}"
    for extra in ("icechunk", "obstore"):
        try:
            assert by_name[extra].startswith(importlib.metadata.version(extra))
        except importlib.metadata.PackageNotFoundError:
            assert by_name[extra].startswith("not installed")
