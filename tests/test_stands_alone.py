"""The repository stands alone: what users read (README.md, docs/, CHANGELOG.md) and the
package's own text (zarrfs/) cite no document outside the repository, no issue tracker's
numbers and nothing of when or by whom the work was done; the tests, benchmarks and
scripts cite the docs, not a contract kept elsewhere; and no file anywhere in it reaches
for a path beside the clone, so a plain clone runs every test."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.conftest import REPO

USER_TEXT = ["README.md", "CHANGELOG.md", *sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("docs/*.md"))]
USER_TEXT += sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("zarrfs/**/*.py"))

FORBIDDEN = {
    "a contract kept elsewhere": re.compile(r"\bSPEC\b|SPEC\.md|STYLE\.md|shared folder"),
    "a path beside the clone": re.compile(r"\.\./shared\b"),
    "an issue's number": re.compile(r"\bissues? #?\d+|\bthe issue's\b", re.I),
    "when or by whom": re.compile(
        r"\b(?:first|second|third|fourth|fifth|sixth|this|that day's|other) sessions?\b(?!\s+of\s+(?:an?\s+)?Icechunk)"
        r"|\bother sessions'|\bsession \d+\b|\bworking (?:session|period)\b|\blead engineer\b|\bhelpers? \d+\b",
        re.I,
    ),
}


@pytest.mark.parametrize("name", USER_TEXT)
def test_no_reference_outside_the_repository(name):
    found = []
    for number, line in enumerate((REPO / name).read_text().splitlines(), 1):
        for what, pattern in FORBIDDEN.items():
            if pattern.search(line):
                found.append(f"{name}:{number}: {what}: {line.strip()}")
    assert not found, "\n".join(found)


# the tests, benchmarks and scripts cite the docs too (a variable named SPEC is no citation)
CODE = sorted(
    p.relative_to(REPO).as_posix()
    for pattern in ("tests/**/*.py", "bench/*.py", "bench/*.sh", "scripts/*", "systemd/*")
    for p in REPO.glob(pattern)
    if p.is_file() and "suites" not in p.parts and p.name != "test_stands_alone.py"
)
CITATION = re.compile(r"\bSPEC (?:§|says|section)|SPEC\.md|STYLE\.md")


@pytest.mark.parametrize("name", CODE)
def test_the_code_cites_no_contract_kept_elsewhere(name):
    found = [
        f"{name}:{number}: {line.strip()}"
        for number, line in enumerate((REPO / name).read_text().splitlines(), 1)
        if CITATION.search(line)
    ]
    assert not found, "\n".join(found)


def test_no_file_reaches_beside_the_clone():
    offenders = []
    for name in _files():
        path = REPO / name
        if name == "tests/test_stands_alone.py" or not path.is_file() or path.suffix not in {".py", ".sh", ".md", ""}:
            continue
        try:
            content = path.read_text()
        except UnicodeDecodeError:
            continue
        if FORBIDDEN["a path beside the clone"].search(content) or "REPO.parent" in content:
            offenders.append(name)
    assert not offenders, offenders


def _files() -> list[str]:
    """The repository's files: what git tracks and does not ignore, or, where git is not
    installed (the Debian 13 test tree), every file but the virtualenvs, caches and .git."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True
        )
    except FileNotFoundError:
        listed = None
    if listed is not None and listed.returncode == 0:
        return listed.stdout.splitlines()
    skipped = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
    names = []
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in skipped and not d.startswith(".venv")]
        names += [os.path.relpath(os.path.join(folder, f), REPO) for f in files]
    return names
