"""What still uses SageMaker Profiler in a Python file, after any rewrite: the `--check` gate.

Reads the syntax tree (not comments): imports of smprof/smppy and smdebug.profiler, SageMaker SDK
profiler classes (ProfilerConfig, Profiler, ProfilerRule, ...), the launcher keywords and dict keys
that configure the Profiler, and `importlib.import_module("smprof")`-style strings. Each is a Finding
with its line. Class names, methods and keywords count only where they are SageMaker's: a name bound
by a `sagemaker` import (or an attribute of a `sagemaker` module), a method or `profiler_config=` in a
file that imports sagemaker, `ProfilerConfig=` there, in a boto3 file or on create_training_job.
Lightning's `Profiler` or another library's `ProfilerConfig` is not the Profiler, and neither is a
keyword or method of a callee proven to be another library's (`provenance.foreign_profiler_lines`).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from profstack.migrate._cst import Finding, parse_quietly
from profstack.migrate.dependencies import is_requirement, mentions_profiler
from profstack.migrate.provenance import (
    BOTO_KEYWORDS,
    PROFILER_CLASSES,
    PROFILER_KEYWORDS,
    PROFILER_METHODS,
    TRAINING_JOB_CALLS,
    foreign_profiler_lines,
)

SMPROF_MODULES = frozenset({"smprof", "smppy"})


def _sagemaker_module(module: str | None) -> bool:
    return bool(module) and (module == "sagemaker" or str(module).startswith("sagemaker."))


#: what to do about an analysis that reads the Profiler's output
_SMDEBUG_HINT = (
    " (reads SageMaker Profiler output, which a migrated job no longer writes: read its traces with "
    "`profstack analyze` or the ProfStack report instead)"
)


def _smdebug_profiler(module: str | None) -> bool:
    return bool(module) and (module == "smdebug.profiler" or str(module).startswith("smdebug.profiler."))


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


@dataclass
class _Bindings:
    """What the file binds from SageMaker: only those names count (Lightning has a `Profiler` too)."""

    modules: set[str] = field(default_factory=set)  # local names of sagemaker modules
    classes: set[str] = field(default_factory=set)  # local names of SageMaker profiler classes
    star: bool = False  # `from sagemaker.debugger import *`
    boto: bool = False  # boto3/botocore imported: ProfilerConfig= is create_training_job's

    @property
    def sagemaker(self) -> bool:
        return bool(self.modules or self.classes or self.star)


def _bindings(tree: ast.AST) -> _Bindings:
    out = _Bindings()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root == "sagemaker":
                    out.modules.add(alias.asname or root)
                elif root in {"boto3", "botocore", "aiobotocore", "aioboto3"}:
                    out.boto = True
        elif isinstance(node, ast.ImportFrom) and _sagemaker_module(node.module):
            for alias in node.names:
                if alias.name == "*":
                    out.star = True
                elif alias.name in PROFILER_CLASSES:
                    out.classes.add(alias.asname or alias.name)
                else:
                    out.modules.add(alias.asname or alias.name)  # a submodule, or a class: harmless
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in {"boto3", "botocore"}:
            out.boto = True
    return out


def _turns_profiler_off(value: ast.expr | None) -> bool:
    """`{"DisableProfiler": True}`: the one ProfilerConfig that is not a use of the Profiler."""
    return (
        isinstance(value, ast.Dict)
        and len(value.keys) == 1
        and isinstance(value.keys[0], ast.Constant)
        and value.keys[0].value == "DisableProfiler"
        and isinstance(value.values[0], ast.Constant)
        and value.values[0].value is True
    )


def remaining_uses(source: str) -> list[Finding]:
    """Every line that still uses the Profiler. Unparsable text gives one finding at its error line."""
    try:
        tree = parse_quietly(source)
    except SyntaxError as exc:
        return [Finding(exc.lineno or 0, f"cannot parse: {exc.msg}")]
    bound = _bindings(tree)
    foreign = _LazyLines(source if bound.sagemaker or bound.boto else "")
    found: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in SMPROF_MODULES:
                    found.append(Finding(node.lineno, f"imports {alias.name}"))
                elif _smdebug_profiler(alias.name):
                    found.append(Finding(node.lineno, f"imports {alias.name}{_SMDEBUG_HINT}"))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").split(".")[0] in SMPROF_MODULES:
                found.append(Finding(node.lineno, f"imports from {node.module}"))
            elif node.level == 0 and _smdebug_profiler(node.module):
                found.append(Finding(node.lineno, f"imports from {node.module}{_SMDEBUG_HINT}"))
            elif node.module == "smdebug" and any(a.name == "profiler" for a in node.names):
                found.append(Finding(node.lineno, f"imports smdebug.profiler{_SMDEBUG_HINT}"))
            elif _sagemaker_module(node.module):
                for alias in node.names:
                    if alias.name in PROFILER_CLASSES:
                        found.append(Finding(node.lineno, f"imports {alias.name} from {node.module}"))
        elif isinstance(node, ast.Attribute) and node.attr in PROFILER_CLASSES and _root(node) in bound.modules:
            found.append(Finding(node.lineno, f"uses {ast.unparse(node)}"))
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in PROFILER_METHODS - {"disable_profiling"}  # that one stops a running job's Profiler
            and bound.sagemaker
            and node.end_lineno not in foreign
        ):
            found.append(Finding(node.lineno, f"calls {node.attr}()"))
        elif isinstance(node, ast.Call):
            for keyword in node.keywords:
                if (
                    keyword.arg in PROFILER_KEYWORDS
                    and _launcher_keyword(keyword.arg, node, bound)
                    and keyword.lineno not in foreign
                ):
                    found.append(Finding(keyword.lineno, f"passes {keyword.arg}="))
                elif (
                    keyword.arg == "disable_profiler"
                    and isinstance(keyword.value, ast.Constant)
                    and keyword.value.value is False
                    and bound.sagemaker
                ):
                    found.append(Finding(keyword.lineno, "disable_profiler=False keeps SDK v2's default Profiler on"))
        elif isinstance(node, ast.Dict) and (bound.sagemaker or bound.boto):
            for key, value in zip(node.keys, node.values, strict=True):  # `sm.create_training_job(**params)`
                if (
                    isinstance(key, ast.Constant)
                    and key.value in PROFILER_KEYWORDS
                    and not _turns_profiler_off(value)
                    and key.lineno not in foreign
                ):
                    found.append(Finding(key.lineno, f"sets {key.value!r}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in SMPROF_MODULES:
            found.append(Finding(node.lineno, f'names the module "{node.value}"'))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and is_requirement(node.value):
            found.append(Finding(node.lineno, f'requires "{node.value}" (setup.py / install list)'))
        elif isinstance(node, ast.Name) and (node.id in bound.classes or (bound.star and node.id in PROFILER_CLASSES)):
            found.append(Finding(node.lineno, f"uses {node.id}"))
    return sorted(set(found))


class _LazyLines:
    """foreign_profiler_lines, computed on the first lookup only (it needs LibCST's scope analysis)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: set[int] | None = None

    def __contains__(self, line: object) -> bool:
        if self.lines is None:
            self.lines = foreign_profiler_lines(self.source) if self.source else set()
        return line in self.lines


def _launcher_keyword(keyword: str, call: ast.Call, bound: _Bindings) -> bool:
    """`profiler_config=` of a SageMaker SDK call, or `ProfilerConfig=` of boto3's create/update_training_job."""
    if keyword in BOTO_KEYWORDS:
        value = next(k.value for k in call.keywords if k.arg == keyword)
        if (
            keyword == "ProfilerConfig"
            and isinstance(value, ast.Dict)
            and len(value.keys) == 1
            and isinstance(value.keys[0], ast.Constant)
            and value.keys[0].value == "DisableProfiler"
            and isinstance(value.values[0], ast.Constant)
            and value.values[0].value is True
        ):
            return False  # turns the Profiler off (UpdateTrainingJob / CreateTrainingJob)
        method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
        return bound.boto or bound.sagemaker or method in TRAINING_JOB_CALLS
    return bound.sagemaker


_SMDEBUG_PROFILER = re.compile(r"smdebug\.profiler", re.IGNORECASE)


def _names_profiler(code: str) -> bool:
    """The Profiler's names (PEP 503), wheels or index host, not a package whose name starts the same
    (`smprof-docs`, `smprofiler`, `smppy_lint`)."""
    return mentions_profiler(code) or bool(_SMDEBUG_PROFILER.search(code))


def _python_of(code: str) -> str:
    """A cell's Python, its IPython syntax as placeholder statements (profstack.migrate.ipython), so a
    `!pip install` alone in an `except:` block still leaves a cell that parses."""
    from profstack.migrate.ipython import IPythonError, to_python

    try:
        return to_python(code)
    except IPythonError:
        return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.splitlines())


PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})  # the rest of the cell is Python
SHELL_CELL_MAGICS = frozenset({"bash", "sh", "script", "system"})
READ_CELL_MAGICS = PYTHON_CELL_MAGICS | SHELL_CELL_MAGICS | {"writefile"}  # others (`%%html`) are not code we read


def notebook_uses(text: str) -> list[Finding]:
    """A Jupyter notebook's code cells that still use the Profiler, as `cell N: ...` findings (line 0): the
    check after `profstack.migrate.notebook` has rewritten what it can. IPython syntax (`%pip`, `!pip`,
    `x = !ls`, `obj?`) becomes placeholder statements before parsing, and is reported when it still names
    the Profiler. Unreadable JSON is
    one finding."""
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, AttributeError):
        return [Finding(0, "not a readable notebook (JSON)")]
    found: list[Finding] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        code = "".join(source) if isinstance(source, list) else str(source)
        first = code.lstrip().split("\n", 1)[0]
        if first.startswith("%%") and (first[2:].split() or [""])[0] not in READ_CELL_MAGICS:
            continue  # `%%html`, `%%markdown`, ...: text, not code
        python = _python_of(code)
        uses = [f.message for f in remaining_uses(python) if not f.message.startswith("cannot parse")]
        if uses or _names_profiler(code):
            why = uses[0] if uses else "names smprof/smppy (a magic or pip line)"
            found.append(Finding(0, f"cell {number}: {why}; convert it by hand"))
    return found
