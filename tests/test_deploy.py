"""The deployment manifests docs/cluster.md shows: each is valid YAML whose Kubernetes
objects give the zarrfs container what FUSE needs (/dev/fuse, privileged, Bidirectional
propagation), runs options the parser knows, and the lines the page quotes are theirs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zarrfs.arguments import build_parser

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = sorted((REPO / "deploy/kubernetes").glob("*.yaml"))
yaml = pytest.importorskip("yaml")


def _zarrfs_containers(path: Path) -> list[dict]:
    containers = []
    for document in yaml.safe_load_all(path.read_text()):
        spec = document["spec"]
        pod = spec["template"]["spec"] if "template" in spec else spec
        containers += [c for c in pod["containers"] if c.get("command", [""])[0] == "zarrfs"]
    return containers


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_zarrfs_container_has_what_fuse_needs(path: Path) -> None:
    (container,) = _zarrfs_containers(path)
    assert container["securityContext"]["privileged"] is True
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert "/dev/fuse" in mounts
    assert any(m.get("mountPropagation") == "Bidirectional" for m in mounts.values())
    command = container["command"]
    options = {a for a in command if a.startswith("--")}
    known = set(build_parser()._subparsers._group_actions[0].choices["mount"]._option_string_actions)
    assert options <= known and command[1] == "mount"


def test_the_lines_the_page_shows_are_the_manifests() -> None:
    page = (REPO / "docs/cluster.md").read_text()
    shown = re.search(r"    securityContext:\n(?:    .*\n)+", page)
    assert shown is not None
    manifests = "\n".join(" ".join(p.read_text().split()) for p in MANIFESTS)
    for line in shown.group(0).splitlines():
        assert " ".join(line.split()) in manifests, line
    assert all(f"deploy/kubernetes/{p.name}" in page for p in MANIFESTS)
