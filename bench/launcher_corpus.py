"""Launcher corpus numbers for docs/migration.md: converted, refused with a reason, decoys untouched.

    python -m bench.launcher_corpus            # the table, from tests/fixtures/launcher_corpus/
    PYTHONPATH=<other checkout> python bench/launcher_corpus.py --corpus tests/fixtures/launcher_corpus

Each file of the corpus is rewritten by `profstack.migrate.smprof.rewrite_source` (what `profstack
migrate smprof` runs) and classed by its folder's expectation:

* converted/: *converted* when the text changed, nothing is left for a person (no finding with a
  line), the --check gate finds nothing and every SageMaker SDK v2 estimator the file creates passes
  `disable_profiler=True` (SDK v2 profiles a job by default); otherwise *refused* (unchanged) or *partial*.
* refused/: *refused with a reason* when the text is unchanged and a finding names a line;
  *rewritten* otherwise (an unsafe edit).
* decoys/: *untouched* when byte-identical with no finding (the --check gate passes it);
  *untouched, reported* when identical but flagged; *rewritten* when edited (a wrong edit).

The second argument runs the same numbers against another checkout (e.g. before a change).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from profstack.migrate.provenance import DictFlow, Provenance, launcher_flavour, walk
from profstack.migrate.scan import remaining_uses
from profstack.migrate.smprof import RewriteError, rewrite_source

KINDS = ("converted", "refused", "decoys")
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "launcher_corpus"


def still_profiling(source: str) -> list[str]:
    """The SDK v2 estimator calls of a file that do not pass disable_profiler=True, as a keyword or through a
    keyword dict they spread (followed as the codemod follows them)."""
    module = cst.parse_module(source)
    prov = Provenance(MetadataWrapper(module, unsafe_skip_copy=True))
    flow = DictFlow(prov)
    nodes = list(walk(module))
    flow.build_all(nodes)
    out = []
    for node in nodes:
        if not (isinstance(node, cst.Call) and launcher_flavour(prov, node) == "estimator"):
            continue
        values = [a.value for a in node.args if a.keyword and a.keyword.value == "disable_profiler"]
        for arg in node.args:
            spread = flow.of_spread(arg.value) if arg.star == "**" else None
            if spread is not None:
                values += [e.value for _, e in spread.all_entries() if e.key == "disable_profiler" and e.value]
        if not any(isinstance(v, cst.Name) and v.value == "True" for v in values):
            out.append(module.code_for_node(node.func))
    return out


def classify(kind: str, source: str) -> str:
    try:
        result = rewrite_source(source)
    except RewriteError:
        return "error"
    reported = [f for f in result.manual if f.line]
    if kind == "converted":
        if result.changed and not reported and not remaining_uses(result.source) and not still_profiling(result.source):
            return "converted"
        return "partial" if result.changed else "refused"
    if kind == "refused":
        return "refused with a reason" if not result.changed and reported else "rewritten"
    if result.changed:
        return "rewritten"
    return "untouched, reported" if result.manual or remaining_uses(source) else "untouched"


def measure(corpus: Path) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for kind in KINDS:
        out[kind] = Counter(classify(kind, p.read_text()) for p in sorted((corpus / kind).glob("*.py")))
    return out


def table(numbers: dict[str, Counter[str]]) -> str:
    want = {"converted": "converted", "refused": "refused with a reason", "decoys": "untouched"}
    lines = ["| corpus kind | files | as expected | other outcomes |", "|---|---|---|---|"]
    for kind in KINDS:
        counts = numbers[kind]
        total = sum(counts.values())
        good = counts[want[kind]]
        other = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()) if name != want[kind]) or "none"
        lines.append(f"| {kind} | {total} | {good} {want[kind]} | {other} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args(argv)
    print(table(measure(args.corpus)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
