"""The codemods give the same output in every process: no edit may follow a node's `id()` or a set's order.

Regression: the script codemod keyed the `if smprof:` guards it unwraps by `id()` of a node of the
rewritten tree. That node was freed once the guard was unwrapped, and a node made later (the user's
`if __name__ == "__main__":` test) could get the same address: the whole main block was replaced by
`prof.start()`, in some processes only (hash seed, memory layout). Each run below is a fresh process
with its own hash seed; the corpus script with the guards is cut into cells every way it can be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = sorted((ROOT / "tests" / "fixtures" / "smprof_round2" / "scripts").glob("*.py"))
GUARDED = "r01_optional_import_guard.py"  # `try: import smprof / except ImportError: smprof = None`, `if smprof:`
SEEDS = ("0", "1", "2")

# Run in each process: every corpus script converted as a file and as notebooks of its statements cut
# into cells (every cut for the guarded script, one cell a statement and every other statement for the
# rest); printed as JSON: {script: {"file": new source, cut: [new cell sources] or null (refused)}}.
_WORKER = r"""
import ast, itertools, json, sys
from pathlib import Path
from nbformat import writes
from nbformat.v4 import new_code_cell, new_notebook
from profstack.migrate.notebook import rewrite_notebook
from profstack.migrate.smprof import rewrite_source

def chunks(source):
    tree = ast.parse(source)
    starts = [min([n.lineno, *[d.lineno for d in getattr(n, "decorator_list", [])]]) for n in tree.body]
    lines = source.splitlines(keepends=True)
    cuts = sorted({1, *starts})
    return ["".join(lines[a - 1 : b - 1]) for a, b in zip(cuts, [*cuts[1:], len(lines) + 1])]

out = {}
for name, every_cut in json.loads(sys.argv[1]):
    source = Path(name).read_text()
    parts = chunks(source)
    n = len(parts) - 1
    some = [(True,) * n, tuple(i % 2 == 0 for i in range(n))]
    cuts = itertools.product([False, True], repeat=n) if every_cut else some
    result = {"file": rewrite_source(source).source}
    for cut in cuts:
        cells = [parts[0]]
        for part, new_cell in zip(parts[1:], cut):
            if new_cell:
                cells.append(part)
            else:
                cells[-1] += part
        text = writes(new_notebook(cells=[new_code_cell(c.rstrip("\n")) for c in cells])) + "\n"
        new = rewrite_notebook(text)
        cells_out = ["".join(c["source"]) for c in json.loads(new.source)["cells"]] if new.changed else None
        result["".join("1" if c else "0" for c in cut)] = cells_out
    out[Path(name).name] = result
print(json.dumps(out))
"""


def _run(seed: str) -> subprocess.Popen[str]:
    scripts = [(str(s), s.name == GUARDED) for s in SCRIPTS]
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, json.dumps(scripts)],
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _code_lines(text: str) -> list[str]:
    """The lines that carry code or comments (cells lose the blank lines between them)."""
    return [line for line in text.splitlines() if line.strip()]


def test_scripts_split_into_cells_convert_the_same_in_every_process() -> None:
    # GIVEN the corpus scripts, the one guarded by `if smprof:` cut into cells in every way
    assert GUARDED in [s.name for s in SCRIPTS]
    # WHEN each is converted (as a file, and as notebooks) in fresh processes with different hash seeds
    runs = [_run(seed) for seed in SEEDS]
    outputs = []
    for seed, run in zip(SEEDS, runs, strict=True):
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, f"PYTHONHASHSEED={seed}: {stderr[-2000:]}"
        outputs.append(json.loads(stdout))
    # THEN in every process each notebook holds the script's own conversion, line for line (nothing lost,
    # nothing swapped; the cells lose only the blank lines between them)
    for seed, output in zip(SEEDS, outputs, strict=True):
        for script, results in output.items():
            assert results["file"] != (SCRIPTS[0].parent / script).read_text()
            expected = _code_lines(results["file"])
            for cut, cells in results.items():
                if cut == "file":
                    continue
                if cells is None:  # a refused split (a range across cells), as test_notebook checks
                    assert script != GUARDED, f"{script}, cells cut at {cut}: refused"
                    continue
                assert _code_lines("\n".join(cells)) == expected, f"PYTHONHASHSEED={seed}: {script}, cells cut at {cut}"
    # AND every process gives the same bytes for every script and every cut
    for seed, output in zip(SEEDS[1:], outputs[1:], strict=True):
        assert output == outputs[0], f"PYTHONHASHSEED={seed} converts differently from PYTHONHASHSEED={SEEDS[0]}"


_GUARDED_HEAD = """try:
    import smprof
except ImportError:
    smprof = None
"""


def test_a_guard_inside_an_annotated_range_goes_too() -> None:
    from profstack.migrate.smprof import rewrite_source

    # GIVEN an `if smprof is not None:` guard between an annotation_begin and its end (the range becomes a
    # `with` block the statements move into)
    source = _GUARDED_HEAD + (
        "\n\ndef step(x):\n"
        '    smprof.annotation_begin("b")\n'
        "    # about the guard\n"
        "    if smprof is not None:\n"
        '        print("profiling")  # noted\n'
        "    x += 1\n"
        '    smprof.annotation_end("b")\n'
        "    return x\n"
    )
    # WHEN converted
    result = rewrite_source(source)
    # THEN the guard is gone inside the block too (smprof is no longer imported: it would raise NameError),
    # its body and comments kept in its place
    assert result.manual == []
    assert "smprof" not in result.source
    assert (
        '    with torch.profiler.record_function("b"):\n'
        "        # about the guard\n"
        '        print("profiling")  # noted\n'
        "        x += 1\n"
        "    return x\n"
    ) in result.source


def test_a_guard_that_keeps_nothing_leaves_its_comment_to_the_next_statement() -> None:
    from profstack.migrate.smprof import rewrite_source

    # GIVEN `if not smprof:` (dead once the profiler always imports) under a comment
    source = _GUARDED_HEAD + (
        "\nprof = smprof.SMProfiler.instance() if smprof else None\n"
        "\n\ndef train(batches):\n"
        "    # warn when the profiler is missing\n"
        "    if not smprof:\n"
        '        print("no profiler")\n'
        "    prof.start_profiling()\n"
        "    for b in batches:\n"
        "        b.step()\n"
        "    prof.stop_profiling()\n"
    )
    # WHEN converted
    result = rewrite_source(source)
    # THEN the guard goes, its comment stays on the statement that now comes first
    assert result.manual == []
    assert "no profiler" not in result.source
    assert "    # warn when the profiler is missing\n    prof.start()\n" in result.source
