"""The package's modules import each other without a circle (issue #35 item 5: `migrate/launcher.py` and
`migrate/smprof.py` imported each other). Every import counts, a function's lazy one too: a circle is a design
problem whether Python happens to resolve it at run time or not."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "profstack"


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                    )
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            for named in targets:
                # the deepest module of ours that the import names (a package's attribute is the package)
                target = named
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(f"{target}."):
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_two_modules_import_each_other_even_lazily() -> None:
    graph = _graph()
    assert "profstack.migrate.sagemaker_paths" in graph["profstack.migrate.launcher"]
    assert _cycles(graph) == []


def test_the_check_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
