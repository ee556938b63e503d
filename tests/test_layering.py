"""The layers of the code base, read from every import statement (docs/architecture.md).

Every import counts, including those under ``if TYPE_CHECKING:`` and inside functions: a layer
that needs a name from above it is a design mistake, however the import is spelled.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("coordinator", "protocol", "storage", "loadtest")
GENERATED = REPO / "protocol" / "messages"

# What each layer may import from this repository (prefixes of module names).
ALLOWED: dict[str, tuple[str, ...]] = {
    "protocol": ("protocol",),
    "storage": ("storage",),
    "coordinator.security": ("coordinator.security", "storage.records"),
    "coordinator.core": ("coordinator.core", "protocol", "storage.records"),
    "coordinator.api": (
        "coordinator.api",
        "coordinator.core",
        "coordinator.security",
        "protocol",
        "storage.records",
    ),
    "coordinator.server": (
        "coordinator.server",
        "coordinator.api",
        "coordinator.core",
        "coordinator.security",
        "protocol",
        "storage",
    ),
    "coordinator.cli": ("coordinator", "protocol", "storage", "loadtest"),
    "coordinator.__main__": ("coordinator.cli",),
    "loadtest": ("loadtest", "protocol"),
}

# The pure layers: no event loop, no sockets, no clock, no threads, no database drivers.
PURE = ("coordinator.core", "coordinator.security", "coordinator.api")
IMPURE_STDLIB = (
    "asyncio",
    "socket",
    "time",
    "datetime",
    "threading",
    "selectors",
    "sqlite3",
    "asyncpg",
    "ssl",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if GENERATED not in path.parents and "codegen" not in path.parts:
                yield path


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # `from pkg import module` names a module too.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in _sources()}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        graph[module] = {name for name in _imports(path, module) if name in paths and name != module}
    return graph


def _layer(module: str) -> str | None:
    matches = [layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")]
    return max(matches, key=len) if matches else None


def _raw_imports() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p, _module_name(p)) for p in _sources()}


def test_every_module_belongs_to_a_layer() -> None:
    orphans = [m for m in _graph() if _layer(m) is None and m not in PACKAGES]
    # Only package roots may sit outside a layer.
    assert orphans == [], f"modules outside every layer: {orphans}"


def test_layers_import_only_what_they_may() -> None:
    wrong: list[str] = []
    for module, targets in _graph().items():
        layer = _layer(module)
        if layer is None:
            continue
        wrong += [
            f"{module} -> {target}"
            for target in sorted(targets)
            if not any(target == a or target.startswith(a + ".") for a in ALLOWED[layer])
        ]
    assert wrong == [], "imports against the layering:\n" + "\n".join(wrong)


def test_pure_layers_use_no_io_or_clock() -> None:
    wrong = [
        f"{module} imports {name}"
        for module, names in _raw_imports().items()
        if module.startswith(PURE)
        for name in sorted(names)
        if name.split(".")[0] in IMPURE_STDLIB
    ]
    assert wrong == [], "\n".join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one member."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    # Package __init__ modules are excluded: importing a submodule always runs its package.
    graph = {m: {t for t in ts if t not in PACKAGES} for m, ts in _graph().items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("source", ["import asyncio", "from time import monotonic"])
def test_the_purity_check_sees_io(tmp_path: Path, source: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(source + "\n")
    names = _imports(probe, "coordinator.core.probe")
    assert any(name.split(".")[0] in IMPURE_STDLIB for name in names)
