"""The per-kind numbers docs/migration.md publishes for the migration corpus, measured through the CLI's path.

Scripts, notebooks, dependency files and decoys of tests/fixtures/smprof (first round, launchers aside:
their numbers are the launcher section's) and tests/fixtures/smprof_round2. Each file is converted whole,
converted with a note for a person, refused with a reason (left byte-identical), or untouched. Decoys
must all be untouched: a decoy in any other column is a wrong edit or a false alarm.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from profstack.cli.migrate import _candidates, _process, _read
from profstack.migrate.smprof import RewriteError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CORPUS = [
    FIXTURES / "smprof" / "scripts",
    FIXTURES / "smprof" / "unsafe",
    FIXTURES / "smprof" / "deps",
    FIXTURES / "smprof_round2",
    FIXTURES / "smprof_round3",
]
DOCS = Path(__file__).resolve().parents[3] / "docs" / "migration.md"
COLUMNS = ("converted whole", "converted, with a note", "refused with a reason", "untouched")
KINDS = ("training scripts", "notebooks", "dependency files", "decoys")


def _kind(path: Path, kind: str | None) -> str:
    if "decoys" in path.parts:
        return "decoys"
    if kind == "notebook":
        return "notebooks"
    return "training scripts" if kind is None else "dependency files"


def measure() -> dict[str, Counter[str]]:
    args = argparse.Namespace(user=None, trace_bucket=None, no_tensorboard_config=False)
    counts: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    for path, kind, _skipped in _candidates(CORPUS):
        text, _encoding = _read(path, kind)
        try:
            outcome = _process(path, kind, text, args)
        except RewriteError:
            counts[_kind(path, kind)]["refused with a reason"] += 1  # cannot parse: said as file:line
            continue
        if outcome.changed:
            column = "converted, with a note" if outcome.manual else "converted whole"
        else:
            column = "refused with a reason" if outcome.manual else "untouched"
        counts[_kind(path, kind)][column] += 1
    return counts


def table(counts: dict[str, Counter[str]]) -> str:
    lines = ["| kind | files | " + " | ".join(COLUMNS) + " |", "|---|---:|" + "---:|" * len(COLUMNS)]
    for kind in KINDS:
        row = counts[kind]
        lines.append(f"| {kind} | {sum(row.values())} | " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
    return "\n".join(lines)


def test_decoys_are_all_untouched() -> None:
    counts = measure()
    assert counts["decoys"]["untouched"] == sum(counts["decoys"].values()) >= 9


def test_docs_publish_the_measured_numbers() -> None:
    # GIVEN the corpus measured now WHEN compared with the table in docs/migration.md THEN they agree
    published = re.search(r"<!-- corpus-numbers -->\n(.*?)\n<!-- /corpus-numbers -->", DOCS.read_text(), re.S)
    assert published is not None, "docs/migration.md lacks the corpus-numbers table"
    assert published.group(1).strip() == table(measure()), table(measure())
