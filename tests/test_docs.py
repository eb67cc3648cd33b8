"""The README and docs/ stay true: the README's two commands come first and are what CI
and the scripts run; every option, repository path, constant and bench option the docs
name exists; links between the docs resolve; and the README's tour, run against a real
mount of the demo hierarchy, prints what the README shows."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zarrfs.arguments import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "CHANGELOG.md"]
PAGES = [README, *DOCS]
# pages other work writes, linked before they land: a missing one is tolerated
PAGES_WRITTEN_ELSEWHERE = {"posix.md", "times-and-modes.md", "conformance.md", "microscopy.md"}
# options of other programs that the docs name
OTHER_PROGRAMS_OPTIONS = {
    "--basetemp",
    "--vfs-cache-max-size",
    "--only-values",
    "--help",
    "--version",
    "--strict-markers",
    "--now",
    "--modify-window",  # rsync's (times-and-modes.md)
    "--rm",  # podman's and docker's (install.md)
    "--device",
    "--cap-add",
    "--mount",
    "--set-enabled",  # dnf config-manager's (install.md)
    "--needed",  # pacman's (install.md)
    "--apparent-size",  # du's (posix.md)
}
# names in the docs' code that are environment variables of other programs
OTHER_ENVIRONMENT = re.compile(
    r"^(AWS_|XDG_|PYTHON|PIP_)\w+$|^(NOTIFY_SOCKET|OPENBLAS_NUM_THREADS|NUMPY_MADVISE_HUGEPAGE)$"
)
# names of the system and of formats, not of zarrfs
SYSTEM_NAMES = {
    "O_NOFOLLOW",
    "O_TRUNC",
    "O_CREAT",
    "O_TMPFILE",
    "MAP_SHARED",
    "RENAME_EXCHANGE",
    "RENAME_NOREPLACE",
    "M_MMAP_MAX",  # glibc's mallopt option (the daemon's keep_freed_buffers)
    "AREA_OR_POINT",
    "_ARRAY_DIMENSIONS",
}


def text(page: Path) -> str:
    return page.read_text()


def fenced_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", markdown, flags=re.M | re.S)


def code_spans(markdown: str) -> list[str]:
    """Every piece of code: fenced and indented blocks, and inline spans."""
    blocks = fenced_blocks(markdown)
    indented = re.findall(r"^(?: {4}.*\n?)+", markdown, flags=re.M)
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)
    return blocks + indented + re.findall(r"`([^`\n]+)`", prose)


def test_the_readme_starts_with_its_two_commands():
    first = fenced_blocks(text(README))[0]
    commands = [line.split("#")[0].strip() for line in first.splitlines() if line.strip()]
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    assert text(README).index("```") < text(README).index("\n## "), "the commands come before any section"


def test_ci_runs_the_readmes_test_command_and_both_commands_set_up():
    ci = [line.split("#")[0].strip() for line in (REPO / ".ci/run").read_text().splitlines()]
    assert "bash scripts/test.sh" in ci
    demo = (REPO / "scripts/demo.sh").read_text()
    assert demo.index("bash scripts/setup.sh") < demo.index(".venv/bin/zarrfs")
    assert "bash scripts/setup.sh" in (REPO / "scripts/test.sh").read_text()


def test_the_readme_says_where_the_command_lives():
    assert ".venv/bin/zarrfs" in text(README)
    assert len(text(README).splitlines()) <= 200


def zarrfs_options() -> set[str]:
    parser = build_parser()
    options = set(parser._option_string_actions)
    for action in parser._actions:
        for sub in getattr(action, "choices", None) or {}:
            subparser = action.choices[sub]
            if hasattr(subparser, "_option_string_actions"):
                options |= set(subparser._option_string_actions)
    return options


def options_in(source: str) -> set[str]:
    return set(re.findall(r"[\"'](--[a-z][a-z0-9-]*)[\"']", source))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_option_named_exists(page):
    """An option on a line that runs a bench script must be that script's; on a line
    that runs `zarrfs`, in its parser; elsewhere, one of zarrfs's, a bench script's or
    another program's that the docs name."""
    ours = zarrfs_options()
    benches = set().union(*(options_in(p.read_text()) for p in REPO.glob("bench/*.py")))
    unknown = []
    for code in code_spans(text(page)):
        for line in code.splitlines():
            bench = re.search(r"bench/([a-z_]+)\.py", line)
            if bench:
                known = options_in((REPO / "bench" / f"{bench.group(1)}.py").read_text())
            elif re.search(r"(^|\s)zarrfs\s", line):
                known = ours | OTHER_PROGRAMS_OPTIONS
            else:
                known = ours | benches | OTHER_PROGRAMS_OPTIONS
            options = re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line)
            unknown.extend(f"{option} in {line.strip()!r}" for option in options if option not in known)
    assert not unknown, "\n".join(unknown)


REPO_PATH = re.compile(r"(?<![\w./-])((?:zarrfs|tests|bench|scripts|systemd|docs|\.ci)/[\w./@*-]*[\w*])")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_repository_path_named_exists(page):
    missing = []
    for code in code_spans(text(page)):
        for path in REPO_PATH.findall(code):
            if "*" in path or re.search(r"(^|/)[A-Z]+(\.|/|$)", path):
                continue  # a pattern or a placeholder (bench/NAME.py)
            if not (REPO / path).exists() and Path(path).name not in PAGES_WRITTEN_ELSEWHERE:
                missing.append(path)
    assert not missing, missing


def defined_names() -> str:
    return "\n".join(p.read_text() for p in REPO.glob("zarrfs/**/*.py"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_constant_named_is_defined(page):
    """Docs name constants rather than copy their values: each name must still be one
    (assigned in zarrfs/), and each ZARRFS_ variable must still be read somewhere."""
    code = defined_names()
    scripts = "\n".join(
        p.read_text()
        for p in [*REPO.glob("scripts/*"), *REPO.glob("systemd/*"), *REPO.glob("tests/**/*.py")]
        if p.is_file()
    )
    missing = []
    for span in re.findall(r"`([^`\n]+)`", text(page)):
        for name in re.findall(r"(?<![\w.])(_?[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?![\w(])", span):
            if OTHER_ENVIRONMENT.match(name) or name in SYSTEM_NAMES:
                continue
            if name.startswith("ZARRFS_"):
                if name not in code and name not in scripts:
                    missing.append(name)
            elif not re.search(rf"^\s*{name}\s*(:[^=\n]*)?=", code, flags=re.M):
                missing.append(name)
    assert not missing, missing


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    heading = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return heading.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    markdown = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {slug(h) for h in re.findall(r"^#+ (.*)$", markdown, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_the_docs_resolve(page):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text(page)):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            if path.name not in PAGES_WRITTEN_ELSEWHERE:
                broken.append(target)
            continue
        if anchor and anchor not in anchors(path):
            broken.append(target)
    assert not broken, broken


def test_the_docs_pages_the_readme_promises_exist():
    for name in ("semantics", "configuration", "troubleshooting", "benchmarks", "development"):
        assert (REPO / "docs" / f"{name}.md").exists()
        assert f"docs/{name}.md" in text(README)
    assert (REPO / "CHANGELOG.md").exists()


# ---------------------------------------------------------------------- the tour
def tour() -> list[tuple[str, str]]:
    """The README's console block: (command, output shown) pairs."""
    block = next(b for b in fenced_blocks(text(README)) if b.startswith("$ "))
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return [(command, "\n".join(output)) for command, output in steps]


def test_the_tour_is_found():
    commands = [command for command, _ in tour()]
    assert any(c.startswith("mkdir -p /tmp/z && zarrfs mount") for c in commands)
    assert commands[-2] == "zarrfs umount /tmp/z"
    assert any("tifffile" in c and "images/cells/image.ome.tif" in c for c in commands), "it opens the OME-TIFF"


@pytest.mark.mount
@pytest.mark.skipif(
    not (shutil.which("gdalinfo") and shutil.which("ncdump") and shutil.which("getfattr")),
    reason="needs gdal-bin, netcdf-bin and attr (scripts/setup.sh installs them)",
)
@pytest.mark.skipif(
    not (importlib.util.find_spec("tifffile") and importlib.util.find_spec("ome_types")),
    reason="needs tifffile and ome-types (test extras)",
)
def test_the_readme_tour_prints_what_it_shows(tmp_path):
    store, mountpoint = tmp_path / "survey.zarr", tmp_path / "z"
    env = dict(os.environ, ZARRFS_LOG_DIR=str(tmp_path))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    try:
        for command, shown in tour():
            command = command.replace("/tmp/survey.zarr", str(store)).replace("/tmp/z", str(mountpoint))
            if command.startswith("export PATH="):
                continue  # the environment above does that
            result = subprocess.run(
                ["bash", "-c", command], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
            )
            assert result.returncode == 0, f"{command}: {result.stderr}"
            if shown:
                printed = result.stdout.replace(str(store), "/tmp/survey.zarr").replace(str(mountpoint), "/tmp/z")
                assert printed.split() == shown.split(), f"{command}:\n{printed}"
    finally:
        if subprocess.run(["mountpoint", "-q", str(mountpoint)]).returncode == 0:
            subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_zarrfs_command_named_exists(page):
    parser = build_parser()
    commands = next(a.choices for a in parser._actions if isinstance(getattr(a, "choices", None), dict))
    unknown = []
    for code in code_spans(text(page)):
        for line in code.splitlines():
            named = re.findall(r"(?:^|[\s;(&|$])(?:\.venv/bin/)?zarrfs ([a-z]+)\b", line)
            unknown.extend(f"zarrfs {command} in {line.strip()!r}" for command in named if command not in commands)
    assert not unknown, "\n".join(unknown)
