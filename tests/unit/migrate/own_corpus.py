"""Measure the codemod on the notebook corpus: Profiler/Debugger notebooks, launchers and an SDK-style test file.

Each file of tests/fixtures/notebooks_own/ (written for this repository; its README says what each one is
for) goes through the CLI's own path (`_process`, as `profstack migrate smprof` runs it) and is classed as
converted whole, converted with a note (its analysis cells read the Profiler's output and stay for a
person), refused with a reason (left byte-identical), untouched, or *wrong*: a conversion that fails one
of the checks below. Checks on a converted file, each against its original:

- every code cell is still valid IPython (read as IPython reads it, then compiled);
- the notebook validates, and only code cells' sources changed (outputs, metadata, cell ids or their
  absence, and cell count kept), in the JSON layout it was saved in (indent, escaped or raw non-ASCII,
  sources as lists of lines or strings, the final newline or its absence);
- no ruff F821 / F401 / F841 finding the original did not have (undefined names, unused imports and locals),
  on the cells as one program in their order, IPython syntax as placeholders;
- every SageMaker SDK v2 estimator it creates passes `disable_profiler=True`, and nothing of the Profiler's
  launcher settings is left (the --check gate finds only analysis code, for the note);
- a second run changes nothing.

Used by test_notebooks_own.py and to publish the table in docs/migration.md
(`python -m tests.unit.migrate.own_corpus` prints it, then each file's problems).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.launcher_corpus import still_profiling
from profstack.cli.migrate import _process
from profstack.migrate._cst import parse_quietly
from profstack.migrate.ipython import read_cell
from profstack.migrate.scan import PYTHON_CELL_MAGICS, remaining_uses

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "notebooks_own"
KINDS = ("launchers", "analysis", "decoys", "sdk")
COLUMNS = ("converted whole", "converted, with a note", "refused with a reason", "untouched", "wrong")
RUFF_RULES = "F821,F401,F841"
_PLACEHOLDER = re.compile(r"_profstack_ipython_\d+_")


@dataclass
class Outcome:
    path: Path
    state: str
    problems: list[str] = field(default_factory=list)
    ruff_added: list[str] = field(default_factory=list)
    source: str = ""
    reported: list[str] = field(default_factory=list)  # every finding left for a person


def files() -> list[Path]:
    return sorted(p for kind in KINDS for p in (CORPUS / kind).glob("*") if p.suffix in {".ipynb", ".py"})


def _is_python(source: str) -> bool:
    """A code cell whose body is Python: no cell magic, or one that runs its body as Python (`%%time`);
    `%%bash`, `%%writefile`, `%%html` cells hold another language or another file."""
    first = source.lstrip().split("\n", 1)[0]
    return not first.startswith("%%") or (first[2:].split() or [""])[0] in PYTHON_CELL_MAGICS


def python_of(path: Path, text: str) -> str:
    """The file as one Python program: a notebook's code cells in order, IPython syntax as `None`."""
    if path.suffix != ".ipynb":
        return text
    parts = []
    for cell in json.loads(text)["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if not _is_python(source):
            continue
        parts.append(_PLACEHOLDER.sub("None", read_cell(source).python))
    return "\n".join(parts) + "\n"


def ruff_findings(program: str) -> Counter[str]:
    """(rule, message) of each ruff F821/F401/F841 finding, without line numbers (a multiset)."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "program.py"
        target.write_text(program)
        run = subprocess.run(
            [ruff, "check", "--isolated", "--select", RUFF_RULES, "--output-format", "json", str(target)],
            capture_output=True,
            text=True,
            check=False,
        )
    return Counter(f"{f['code']} {f['message']}" for f in json.loads(run.stdout or "[]"))


def estimators_without_disable_profiler(program: str) -> list[str]:
    """SDK v2 estimator calls (proven by provenance) that do not pass disable_profiler=True."""
    return still_profiling(program)


def _cells_parse(path: Path, text: str) -> list[str]:
    if path.suffix != ".ipynb":
        try:
            parse_quietly(text)
        except SyntaxError as exc:
            return [f"does not parse: {exc}"]
        return []
    problems = []
    for number, cell in enumerate(json.loads(text)["cells"], start=1):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if not _is_python(source):
            continue
        try:
            with warnings.catch_warnings():  # the notebook's own `"\s"` strings: not what is checked
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                compile(read_cell(source).python, f"cell {number}", "exec")
        except SyntaxError as exc:
            problems.append(f"cell {number} is not valid IPython after the rewrite: {exc.msg}")
    return problems


def _kept_structure(before: str, after: str) -> list[str]:
    import nbformat
    from nbformat.warnings import MissingIDFieldWarning

    old, new = json.loads(before), json.loads(after)
    problems = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingIDFieldWarning)  # 4.5 notebooks saved without cell ids
            nbformat.validate(nbformat.reads(after, as_version=nbformat.NO_CONVERT))
    except nbformat.ValidationError as exc:
        problems.append(f"does not validate: {str(exc).splitlines()[0]}")
    if old["metadata"] != new["metadata"] or len(old["cells"]) != len(new["cells"]):
        problems.append("notebook metadata or cell count changed")
    for number, (a, b) in enumerate(zip(old["cells"], new["cells"], strict=False), start=1):
        if {k: v for k, v in a.items() if k != "source"} != {k: v for k, v in b.items() if k != "source"}:
            problems.append(f"cell {number}: more than its source changed")
        elif a["cell_type"] != "code" and a["source"] != b["source"]:
            problems.append(f"cell {number}: a {a['cell_type']} cell was edited")
    return problems


def _layout(text: str) -> dict[str, object]:
    second = text.split("\n", 2)[1] if text.count("\n") >= 2 else ""
    cells = json.loads(text)["cells"]
    return {
        "indent": len(second) - len(second.lstrip(" ")),
        "non-ASCII escaped": text.isascii() and bool(re.search(r"\\u[0-9a-fA-F]{4}", text)),
        "final newline": text.endswith("\n"),
        "cell ids": [("id" in cell) for cell in cells],
        "sources as lists": [isinstance(cell["source"], list) for cell in cells],
    }


def _kept_layout(before: str, after: str) -> list[str]:
    """The JSON layout the notebook was saved in (Jupyter, VS Code and other tools differ), kept."""
    old, new = _layout(before), _layout(after)
    return [f"layout changed: {key} {old[key]!r} -> {new[key]!r}" for key in old if old[key] != new[key]]


@functools.cache
def measure_file(path: Path) -> Outcome:
    args = argparse.Namespace(user=None, trace_bucket=None, no_tensorboard_config=False)
    kind = "notebook" if path.suffix == ".ipynb" else None
    text = path.read_text()
    result = _process(path, kind, text, args)
    noted = [f for f in result.manual if f.line or f.message.startswith("cell ")]
    reported = [f"{f.line}: {f.message}" if f.line else f.message for f in result.manual]
    if not result.changed:
        return Outcome(path, "refused with a reason" if noted else "untouched", source=text, reported=reported)
    state = "converted, with a note" if noted else "converted whole"
    outcome = Outcome(path, state, source=result.source, reported=reported)
    before, after = python_of(path, text), python_of(path, result.source)
    outcome.problems += _cells_parse(path, result.source)
    if path.suffix == ".ipynb":
        outcome.problems += _kept_structure(text, result.source)
        outcome.problems += _kept_layout(text, result.source)
    outcome.ruff_added = sorted((ruff_findings(after) - ruff_findings(before)).elements())
    outcome.problems += [f"ruff: {f}" for f in outcome.ruff_added]
    profiling = estimators_without_disable_profiler(after)
    outcome.problems += [f"`{c}(...)` still profiles (no disable_profiler=True)" for c in profiling]
    left = [f.message for f in remaining_uses(after) if "smdebug.profiler" not in f.message]
    outcome.problems += [f"left: {m}" for m in left]
    if _process(path, kind, result.source, args).changed:
        outcome.problems.append("a second run changes it again")
    if outcome.problems:
        outcome.state = "wrong"
    return outcome


def measure() -> tuple[dict[str, Counter[str]], list[Outcome]]:
    counts: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    outcomes = [measure_file(p) for p in files()]
    for outcome in outcomes:
        counts[outcome.path.parent.name][outcome.state] += 1
    return counts, outcomes


def table(counts: dict[str, Counter[str]], outcomes: list[Outcome]) -> str:
    lines = ["| kind | files | " + " | ".join(COLUMNS) + " |", "|---|---:|" + "---:|" * len(COLUMNS)]
    for kind in KINDS:
        row = counts[kind]
        lines.append(f"| {kind} | {sum(row.values())} | " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
    added = sum(len(o.ruff_added) for o in outcomes)
    lines.append("")
    lines.append(f"ruff {RUFF_RULES} findings the conversions added: {added}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m tests.unit.migrate.own_corpus: the table, and each file's problems
    measured, every = measure()
    print(table(measured, every))
    for item in every:
        for problem in item.problems:
            print(f"{item.path.relative_to(CORPUS)}: {problem}")
