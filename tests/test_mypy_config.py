"""The mypy exceptions in pyproject.toml name modules that exist: a module moved, split
or removed leaves no entry behind that exempts nothing (the lists are to shrink to
nothing, and a stale name would hide that a module was never made to hold to the rule);
and the libraries let in untyped are ones zarrfs imports."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _overrides() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["mypy"].get("overrides", []))


def _names(override: dict[str, Any]) -> list[str]:
    module = override["module"]
    return [module] if isinstance(module, str) else list(module)


def _exists(name: str) -> bool:
    """Whether `name` (a module, or a package with `.*`) is one under zarrfs/."""
    package = name.endswith(".*")
    path = ROOT.joinpath(*name.removesuffix(".*").split("."))
    return (path / "__init__.py").is_file() or (not package and path.with_suffix(".py").is_file())


def _imported() -> set[str]:
    """The top-level names of what zarrfs imports (lazily and under TYPE_CHECKING too)."""
    found = set()
    for path in (ROOT / "zarrfs").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found


RULE_OVERRIDES = [o for o in _overrides() if any(n.startswith("zarrfs") for n in _names(o))]


def test_there_are_overrides_to_check() -> None:
    assert RULE_OVERRIDES, "no [[tool.mypy.overrides]] naming zarrfs modules: is the test reading the right file?"


@pytest.mark.parametrize("override", RULE_OVERRIDES, ids=lambda o: ",".join(k for k in o if k != "module"))
def test_every_module_excepted_exists(override: dict[str, Any]) -> None:
    names = _names(override)
    missing = [name for name in names if name.startswith("zarrfs") and not _exists(name)]
    assert not missing, f"mypy exceptions name modules not under zarrfs/: {missing}"
    assert len(set(names)) == len(names), f"named twice: {sorted({n for n in names if names.count(n) > 1})}"


def test_the_check_sees_a_missing_module() -> None:
    assert _exists("zarrfs.store.base") and _exists("zarrfs.store") and _exists("zarrfs.store.*")
    assert not _exists("zarrfs.store.no_such_module") and not _exists("zarrfs.store.base.*")


def test_every_library_let_in_untyped_is_imported() -> None:
    imported = _imported()
    for override in _overrides():
        if override.get("ignore_missing_imports"):
            unused = [name for name in _names(override) if name.removesuffix(".*").split(".")[0] not in imported]
            assert not unused, f"ignore_missing_imports for libraries zarrfs does not import: {unused}"
