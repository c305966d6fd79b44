"""The package's shape: no import cycles, data flowing one way, comm on top, small modules.

Imports are read from the source (function-level ones included, ``TYPE_CHECKING`` blocks
excluded: they never run), so a cycle hidden in a function body fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 700


def _modules() -> dict[str, Path]:
    out = {}
    for package in ("obs", "comm"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> set[str]:
    """Modules of this project that ``path`` imports at run time (any depth)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(MODULES)
            found.update(subs)
            if len(subs) < len(node.names) and node.module in MODULES:
                found.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _reaches(start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        for nxt in GRAPH.get(node, ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


class TestImports:
    def test_no_import_cycles(self) -> None:
        """No module imports one that (directly or not) imports it back."""
        cycles = sorted(f"{a} -> {b}" for a, deps in GRAPH.items() for b in deps if _reaches(b, a))
        assert [] == cycles

    def test_obs_never_imports_comm(self) -> None:
        """comm sits on top of obs: obs works without it."""
        bad = sorted(
            f"{a} -> {b}"
            for a, deps in GRAPH.items()
            if a.split(".")[0] == "obs"
            for b in deps
            if b.split(".")[0] == "comm"
        )
        assert [] == bad

    def test_comm_uses_obs_public_api_only(self) -> None:
        """comm imports obs' public modules, never an underscore one."""
        bad = sorted(
            f"{a} -> {b}"
            for a, deps in GRAPH.items()
            if a.split(".")[0] == "comm"
            for b in deps
            if b.split(".")[0] == "obs" and any(p.startswith("_") for p in b.split("."))
        )
        assert [] == bad

    @pytest.mark.parametrize(
        "lower",
        ["obs.settings", "obs._parsers", "obs.levels", "obs.errors", "obs._output"],
    )
    def test_lower_layers_do_not_reach_up(self, lower: str) -> None:
        """Settings and sinks never import the runtime or the holder: data flows one way."""
        upper = ["obs._runtime", "obs._config", "obs"]
        assert [] == [u for u in upper if u in GRAPH[lower] or _reaches(lower, u)]


class TestSize:
    @pytest.mark.parametrize("name", sorted(MODULES))
    def test_module_is_small(self, name: str) -> None:
        """No module over 700 lines: one concern each."""
        lines = MODULES[name].read_text().count("\n")
        assert lines <= MAX_LINES, f"{name}: {lines} lines"
