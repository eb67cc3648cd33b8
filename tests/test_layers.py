"""The import-layer contract: each layer of zarrfs imports only its own and the ones below
it (store → format → views → filesystem cores → FUSE adapter → command line), only
the FUSE adapter imports pyfuse3 and trio, and no modules of one layer import each other
in a circle. Read from the source (every import statement,
those inside functions and under TYPE_CHECKING included), so a lazy import counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "zarrfs"

# lowest first; a module belongs to the layer of its longest matching prefix
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("package root (its version, the shared defaults)", ("zarrfs", "zarrfs.defaults")),
    ("store", ("zarrfs.store",)),
    ("format elements", ("zarrfs.format.errors", "zarrfs.format.dtypes", "zarrfs.format.fill_values")),
    ("codecs", ("zarrfs.format.codecs",)),
    ("format", ("zarrfs.format",)),
    ("views", ("zarrfs.views",)),
    ("filesystem cores", ("zarrfs.fs",)),
    ("FUSE adapter and service", ("zarrfs.fs.fuse", "zarrfs.daemon")),
    ("command line", ("zarrfs.cli", "zarrfs.arguments", "zarrfs.about", "zarrfs.demo")),
]
KERNEL_LIBRARIES = {"pyfuse3", "trio"}
KERNEL_LAYER = "zarrfs.fs.fuse"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (module.startswith(prefix + ".") and prefix != "zarrfs")
            if matches and len(prefix) > best:
                best, rank = len(prefix), i
    if rank is None:
        raise AssertionError(f"{module} belongs to no layer: place it in LAYERS")
    return rank


def _imports(module: str) -> list[tuple[int, str]]:
    """(line, module imported) for every import in `module`, relative ones resolved, and
    `from package import name` read as the submodule where `name` is one."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.append((node.lineno, submodule if submodule in MODULES else source))
    return found


def layer_violations(modules=MODULES) -> list[str]:
    out = []
    for module in modules:
        for line, imported in _imports(module):
            if imported.split(".")[0] in KERNEL_LIBRARIES and not (
                module == KERNEL_LAYER or module.startswith(KERNEL_LAYER + ".")
            ):
                out.append(f"{MODULES[module]}:{line}: {module} imports {imported}: only {KERNEL_LAYER} may")
            if imported in MODULES and _layer(imported) > _layer(module):
                out.append(
                    f"{MODULES[module]}:{line}: {module} ({LAYERS[_layer(module)][0]}) imports "
                    f"{imported} ({LAYERS[_layer(imported)][0]}), a layer above it"
                )
    return out


def test_every_module_belongs_to_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_layer_imports_one_above_it_and_only_the_fuse_adapter_imports_pyfuse3_or_trio():
    assert layer_violations() == []


@pytest.mark.parametrize(
    ("module", "statement", "expected"),
    [
        ("zarrfs.store.keys", "from ..format import errors", "a layer above it"),
        ("zarrfs.format.codecs.base", "from ..hierarchy import Hierarchy", "a layer above it"),
        ("zarrfs.views.data", "import pyfuse3", "only zarrfs.fs.fuse may"),
        ("zarrfs.fs.core", "from .fuse import adapter", "a layer above it"),
        ("zarrfs.views.catalogue", "from ..fs.decoded import tree", "a layer above it"),
        ("zarrfs.views.data", "from ..fs import errors", "a layer above it"),
    ],
)
def test_the_contract_catches_a_wrong_import(tmp_path, monkeypatch, module, statement, expected):
    """The checker itself: an import added where it does not belong is reported."""
    copy = tmp_path / MODULES[module].name
    copy.write_text(MODULES[module].read_text() + f"\n\ndef _wrong():\n    {statement}\n")
    monkeypatch.setitem(MODULES, module, copy)
    (violation,) = layer_violations({module: copy})
    assert expected in violation


def layer_circles(modules=MODULES) -> list[list[str]]:
    """The import circles inside one layer: modules that import each other, straight or
    through others of their layer (every import statement counts, as for the layers).
    A package's __init__ that hands names on is left out: importing a name through it is
    importing the module that defines it."""
    graph = {
        module: {
            imported
            for _, imported in _imports(module)
            if imported in modules
            and imported != module
            and _layer(imported) == _layer(module)
            and MODULES[imported].name != "__init__.py"
        }
        for module in modules
        if MODULES[module].name != "__init__.py"
    }
    # Tarjan's strongly connected components, iteratively (no recursion limit)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in graph:  # noqa: PLC0206 (graph[root] is read once the root is indexed)
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return sorted(circles)


# circles that stand today, each to be opened (then it leaves this list): no other may come
OPEN_CIRCLES: list[list[str]] = []


def test_no_modules_of_one_layer_import_each_other_in_a_circle():
    assert [circle for circle in layer_circles() if circle not in OPEN_CIRCLES] == []


def test_each_circle_left_open_still_stands():
    """So the list above is emptied as they are opened, not kept for one that is gone."""
    circles = layer_circles()
    assert [circle for circle in OPEN_CIRCLES if circle not in circles] == []


@pytest.mark.parametrize(
    ("module", "statement", "expected"),
    [
        (
            "zarrfs.fs.decoded.entries",
            "from .tree import Tree",
            ["zarrfs.fs.decoded.entries", "zarrfs.fs.decoded.tree"],
        ),
        ("zarrfs.views.chunk", "from . import catalogue", ["zarrfs.views.catalogue", "zarrfs.views.chunk"]),
    ],
)
def test_the_contract_catches_a_circle(tmp_path, monkeypatch, module, statement, expected):
    """The checker itself: an import that closes a circle, even one made lazily inside a
    function, is reported."""
    copy = tmp_path / MODULES[module].name
    copy.write_text(MODULES[module].read_text() + f"\n\ndef _circle():\n    {statement}\n")
    monkeypatch.setitem(MODULES, module, copy)
    assert any(set(expected) <= set(circle) for circle in layer_circles())


MOST_LINES = 450  # a module longer is split along its concerns (docs/development.md)


def test_no_module_is_longer_than_a_newcomer_reads_at_once():
    lengths = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in lengths.items() if n > MOST_LINES} == {}
