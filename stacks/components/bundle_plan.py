"""What one Lambda handler imports: the code files and the pinned requirements its bundle needs.

Each ProfStack function gets a bundle of only what its handler module reaches through imports
(absolute `lambdas.*` / `profstack.*` imports, followed transitively, lazy imports inside functions
included; imports under `if TYPE_CHECKING:` are for mypy only and are skipped), plus the data files
that sit beside those modules, plus the lines of requirements/runtime.txt whose distributions
provide the third-party modules it imports. A third-party import that runtime.txt does not pin is
an error at synth time, never a function that fails at cold start.

Pure Python (no CDK), so tests and `bench/lambda_bundles.py` use it directly.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CODE_ROOTS = ("lambdas", "profstack")
#: Files beside an imported module that the code reads at run time (schemas, report assets).
DATA_SUFFIXES = (".json", ".html", ".css", ".js")


class BundleError(RuntimeError):
    """A handler imports something its bundle cannot provide."""


@dataclass(frozen=True)
class BundlePlan:
    handler_module: str
    files: tuple[Path, ...]  # repo-relative, sorted
    requirements: tuple[str, ...]  # lines of requirements/runtime.txt, in file order
    third_party: tuple[str, ...]  # top-level import names, sorted


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, package: str) -> list[tuple[str, list[str]]]:
    """(module, names imported from it) for every runtime import in the tree."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _under_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, []) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - child.level + 1])
                    module = f"{base}.{child.module}" if child.module else base
                else:
                    module = child.module or ""
                found.append((module, [alias.name for alias in child.names]))
            visit(child)

    visit(tree)
    return found


@cache
def _distribution_of() -> dict[str, list[str]]:
    return {name: list(dists) for name, dists in packages_distributions().items()}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _closure(dist: str) -> frozenset[str]:
    """`dist` and every distribution it requires (without extras), as installed here."""
    from importlib.metadata import PackageNotFoundError, requires

    out = {dist}
    try:
        needs = requires(dist) or []
    except PackageNotFoundError:
        return frozenset(out)
    for spec in needs:
        if "extra ==" in spec:
            continue
        out |= _closure(_canonical(re.split(r"[<>=!~\[; (]", spec, maxsplit=1)[0]))
    return frozenset(out)


def plan_bundle(handler_module: str, *, root: Path = REPO_ROOT, requirements: Path | None = None) -> BundlePlan:
    """The files and requirement lines the function whose handler is `handler_module` needs."""
    req_path = requirements or root / "requirements" / "runtime.txt"
    req_lines = [
        ln.strip() for ln in req_path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]
    by_dist = {_canonical(re.split(r"[<>=!~\[; ]", ln, maxsplit=1)[0]): ln for ln in req_lines}
    files: set[Path] = set()
    third_party: dict[str, str] = {}  # import name -> first importer
    pending = [handler_module]
    seen: set[str] = set()
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        # importing a.b.c runs a/__init__.py and a/b/__init__.py first
        for i in range(1, len(parts)):
            pending.append(".".join(parts[:i]))
        path = _module_file(root, module)
        if path is None:
            raise BundleError(f"{module}: no such module under {root}")
        files.add(path.relative_to(root))
        package = module if path.name == "__init__.py" else ".".join(parts[:-1])
        for imported, names in _imports(ast.parse(path.read_text(), str(path)), package):
            top = imported.split(".")[0]
            if top in CODE_ROOTS:
                pending.append(imported)
                # `from pkg import sub` may name a submodule rather than an attribute
                pending.extend(f"{imported}.{n}" for n in names if _module_file(root, f"{imported}.{n}"))
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                third_party.setdefault(top, module)
    for rel in list(files):
        folder = root / rel.parent
        files.update(p.relative_to(root) for p in folder.iterdir() if p.is_file() and p.suffix in DATA_SUFFIXES)
    wanted: list[str] = []
    for name, importer in sorted(third_party.items()):
        dists = {_canonical(d) for d in _distribution_of().get(name, [name])}
        line = next((ln for d, ln in by_dist.items() if dists & _closure(d)), None)
        if line is None:
            raise BundleError(
                f"{importer} imports {name!r}, which {req_path.relative_to(root)} does not pin; add it there "
                "(and to constraints.txt) or import it only under TYPE_CHECKING"
            )
        wanted.append(line)
    ordered = tuple(ln for ln in req_lines if ln in wanted)
    return BundlePlan(handler_module, tuple(sorted(files)), ordered, tuple(sorted(third_party)))
