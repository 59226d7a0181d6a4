"""The package's layering, checked from the source: no import cycle among trace_selector modules (imports
inside functions count too), and the heavy stacks stay on their side of the pool file
(docs/design.md §Data flow).

Every module is parsed with `ast`; every ``import`` and ``from ... import`` anywhere in the file is an
edge, relative imports resolved, and ``from pkg import name`` where ``name`` is a submodule is an edge to
that submodule. Imports under ``if TYPE_CHECKING:`` never run, so they are not edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "trace_selector"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file of every module under `root`."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    return skip


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """trace_selector modules that module `name` (file `path`) imports anywhere in its file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import sub` imports the submodule; `from mod import name` imports mod
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import trace_selector.graph.encoder as e` -> that module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    found = modules(root)
    known = set(found)
    return {name: imported(name, path, known) for name, path in found.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a closed path [a, b, ..., a], or None (iterative DFS, three colours)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def third_party(path: Path) -> set[str]:
    """Top-level names of every non-trace_selector import in a file (inside functions too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


LAYERS: list[set[str]] = [
    {"", "errors", "types", "paths", "atomic", "extras", "config", "shutdown", "paired", "progress"},  # "": __init__ (__version__)
    {"records"},
    {"search", "engines"},
    {"rollout", "graph"},
    {"model"},
    {"baselines", "selector", "train", "calibration", "scoring"},
    {"adaptive"},
    {"budget", "report"},
    {"evaluate"},
    {"adaptive_rollout", "checkpoint_calibration"},
    {"quickstart"},
    {"cli"},
    {"__main__"},
]
"""The package's layers, lowest first (docs/design.md §Layers): a module may import its own folder, the
foundation row, and any lower layer, never a layer above or a sibling folder of its own layer."""


def _unit(module: str) -> str:
    """The folder (or top-level module) a module belongs to: trace_selector.graph.plan -> graph."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(unit: str) -> int:
    found = [i for i, units in enumerate(LAYERS) if unit in units]
    assert found, f"trace_selector.{unit} is in no layer: add it to LAYERS in tests/test_imports.py"
    return found[0]


def test_lower_layers_never_import_higher_ones():
    bad = []
    for a, targets in import_graph().items():
        for b in targets:
            ua, ub = _unit(a), _unit(b)
            if ua == ub or (_layer(ua) == 0 and _layer(ub) == 0):
                continue
            if _layer(ua) <= _layer(ub):
                bad.append(f"{a} -> {b}")
    assert not bad, f"imports against the layering: {sorted(bad)}"


def test_cycle_finder_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "trace_selector"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from trace_selector.sub import high\n")
    (pkg / "sub" / "high.py").write_text("from .. import low\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from trace_selector import low\n")
    graph = import_graph(pkg)
    assert graph["trace_selector.low"] == {"trace_selector.sub.high"}
    assert graph["trace_selector.sub.high"] == {"trace_selector.low"}
    assert graph["trace_selector.typed"] == set()
    assert find_cycle(graph) in (
        ["trace_selector.low", "trace_selector.sub.high", "trace_selector.low"],
        ["trace_selector.sub.high", "trace_selector.low", "trace_selector.sub.high"],
    )


@pytest.mark.parametrize("folder,banned", [
    ("graph", {"vllm"}),
    ("model", {"vllm"}),
    ("train", {"vllm"}),
    ("rollout", {"torch_geometric", "lightning"}),
])
def test_heavy_stacks_stay_apart(folder, banned):
    where = ROOT / folder
    files = [where] if where.is_file() else sorted(where.rglob("*.py"))
    assert files, f"{where} is missing"
    bad = {f"{p.relative_to(ROOT)}: {name}" for p in files for name in third_party(p) & banned}
    assert not bad, f"imports across the pool-file boundary: {sorted(bad)}"
