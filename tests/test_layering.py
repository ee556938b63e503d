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
    # Gateway mode (the proxy in front of a Kafka-compatible cluster) runs on the server shell.
    "coordinator.gateway": (
        "coordinator.gateway",
        "coordinator.server",
        "coordinator.api",
        "coordinator.core",
        "coordinator.security",
        "protocol",
        "storage",
    ),
    # The one server module that wires gateway mode in.
    "coordinator.server.app": (
        "coordinator.server",
        "coordinator.gateway",
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


# Kinds of group: one package each under coordinator/core (docs/group-model.md). Only the
# conversion module and the registration may import two of them; the group model's generic
# modules (the registry, the coordinator, the offsets) import none.
CORE = REPO / "coordinator" / "core"
CONVERSION = "coordinator.core.conversion"
REGISTRATION = "coordinator.core.kinds"
KIND_BLIND = (
    "coordinator.core.group",
    "coordinator.core.registry",
    "coordinator.core.group_coordinator",
    "coordinator.core.offset_manager",
)


def _kinds() -> list[str]:
    return sorted(
        f"coordinator.core.{path.parent.name}" for path in CORE.glob("*/__init__.py") if path.parent != CORE
    )


def _kind_of(module: str, kinds: list[str]) -> str | None:
    return next((kind for kind in kinds if module == kind or module.startswith(kind + ".")), None)


def _kind_violations(
    graph: dict[str, set[str]],
    kinds: list[str],
    conversion: str = CONVERSION,
    registration: str = REGISTRATION,
    core: str = "coordinator.core.",
) -> list[str]:
    """Imports from one kind's folder into another's (or into the conversion), and core modules
    outside the folders that import two kinds without being the conversion or the registration
    (the shell's views may show each kind its own way)."""
    wrong: list[str] = []
    for module, targets in sorted(graph.items()):
        own = _kind_of(module, kinds)
        reached = {kind for target in targets if (kind := _kind_of(target, kinds)) is not None}
        if own is not None:
            wrong += [f"{module} -> {kind}" for kind in sorted(reached - {own})]
            if conversion in targets:
                wrong.append(f"{module} -> {conversion} (plugged in by {registration})")
        elif len(reached) > 1 and module not in (conversion, registration) and module.startswith(core):
            wrong.append(f"{module} imports {len(reached)} kinds: {sorted(reached)}")
    return wrong


def test_the_kinds_are_found() -> None:
    assert {"coordinator.core.classic", "coordinator.core.consumer"} <= set(_kinds())


def test_a_kind_imports_no_other_kind() -> None:
    assert _kind_violations(_graph(), _kinds()) == []


def test_the_group_model_imports_no_kind() -> None:
    kinds = _kinds()
    graph = _graph()
    wrong = [
        f"{module} -> {target}"
        for module in KIND_BLIND
        for target in sorted(graph[module])
        if _kind_of(target, kinds) is not None or target == CONVERSION
    ]
    assert wrong == [], "\n".join(wrong)
    # The coordinator builds the kinds through the registration, and nothing else of the model does.
    assert [m for m in KIND_BLIND if REGISTRATION in graph[m]] == ["coordinator.core.group_coordinator"]


# Core modules outside the kinds' folders that may import a kind: the registration and the
# conversion, and the settings table, which checks group.consumer.assignors against the assignors
# the consumer kind has (imported when checked, docs/group-model.md "Adding a kind").
KIND_AWARE = (REGISTRATION, CONVERSION, "coordinator.core.group_settings")


def _generic_core_violations(
    graph: dict[str, set[str]], kinds: list[str], core: str, allowed: tuple[str, ...]
) -> list[str]:
    """Imports of a kind by a core module outside every kind's folder (the generic core: events,
    effects, timers, the registry...), except the modules ``allowed`` to."""
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if module.startswith(core) and _kind_of(module, kinds) is None and module not in allowed
        for target in sorted(targets)
        if _kind_of(target, kinds) is not None
    ]


def test_generic_core_modules_import_no_kind() -> None:
    wrong = _generic_core_violations(_graph(), _kinds(), "coordinator.core.", KIND_AWARE)
    assert wrong == [], "\n".join(wrong)


def test_the_generic_core_rule_sees_a_kind_import() -> None:
    graph = {"k.events": {"k.a.group"}, "k.kinds": {"k.a.x"}, "k.a.x": {"k.events"}, "k.a.group": set()}
    assert _generic_core_violations(graph, ["k.a"], "k.", ("k.kinds",)) == ["k.events -> k.a.group"]


def test_the_kind_rule_sees_a_crossing() -> None:
    kinds = ["k.a", "k.b"]
    graph = {
        "k.a.x": {"k.b.y"},
        "k.b.y": {"k.conv"},
        "k.conv": {"k.a.x", "k.b.y"},
        "k.kinds": {"k.a.x", "k.b.y", "k.conv"},
        "k.other": {"k.a.x", "k.b.y"},
    }
    assert _kind_violations(graph, kinds, "k.conv", "k.kinds", "k.") == [
        "k.a.x -> k.b",
        "k.b.y -> k.conv (plugged in by k.kinds)",
        "k.other imports 2 kinds: ['k.a', 'k.b']",
    ]


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
