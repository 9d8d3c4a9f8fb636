"""#46 items 2 and 6: the codemod on real files, AWS's own Profiler/Debugger notebooks and the SDK's launcher.

tests/fixtures/notebooks_real/ holds them verbatim (README: where each comes from, at which commit, under
which licence). Each must reach its expected outcome with every check of real_corpus.py passing: valid
IPython in every cell after the rewrite, only sources changed, no ruff F821/F401/F841 finding the original
did not have, every SDK v2 estimator launched with disable_profiler=True, nothing of the Profiler's
launcher settings left, and a second run changing nothing. docs/migration.md publishes the table.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.migrate.real_corpus import CORPUS, files, measure, measure_file, table

DOCS = Path(__file__).resolve().parents[3] / "docs" / "migration.md"

#: what each real file must come to, and why
EXPECTED = {
    # its last cells analyse the Profiler's output with smdebug.profiler: left for a person, with a note
    "analysis/interactive_analysis_profiling_data.ipynb": "converted, with a note",
    # `try: !pip install ... except: !pip install ...`, and `pip install x` run by automagic: not the Profiler
    "decoys/04_deploy_infer_explain.ipynb": "untouched",
    "decoys/tensorflow2_smdataparallel_mnist_demo.ipynb": "untouched",
    "launchers/callback_bottleneck.ipynb": "converted, with a note",
    "launchers/dist-training-profile.ipynb": "converted whole",
    "launchers/low_batch_size.ipynb": "converted whole",
    "launchers/pt-resnet-profiling-multi-gpu-multi-node.ipynb": "converted, with a note",
    "launchers/pt-resnet-profiling-single-gpu-single-node.ipynb": "converted, with a note",
    # `except ImportError: !pip install smdebug` alone in its block (before: "does not parse")
    "launchers/pytorch_script_change_smdebug.ipynb": "converted whole",
    # ProfilerRule among Debugger rules and no profiler_config: the estimator still gets disable_profiler
    "launchers/tf-mnist-builtin-rule.ipynb": "converted whole",
    "launchers/tf-resnet-profiling-multi-gpu-multi-node-boto3.ipynb": "converted, with a note",
    "launchers/tf-resnet-profiling-single-gpu-single-node.ipynb": "converted, with a note",
    # the SDK's own Profiler tests compare ProfilerConfig objects with what jobs report: refused, with lines
    "sdk/integ_test_profiler.py": "refused with a reason",
}


def _id(path: Path) -> str:
    return str(path.relative_to(CORPUS))


def test_every_real_file_has_an_expected_outcome_and_a_provenance_line() -> None:
    listed = {_id(p) for p in files()}
    assert listed == set(EXPECTED)
    readme = (CORPUS / "README.md").read_text()
    for name in listed:
        # GIVEN a file of the corpus THEN the README names it with the commit it was taken at
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None, f"{name} is not in the README"
        assert re.search(r"\b[0-9a-f]{40}\b", row), row


@pytest.mark.parametrize("path", files(), ids=_id)
def test_a_real_file_reaches_its_outcome_and_passes_every_check(path: Path) -> None:
    # GIVEN a real notebook or launcher WHEN converted through the CLI's path
    outcome = measure_file(path)
    # THEN it reaches what it should, and a conversion passes every check (real_corpus.py)
    assert outcome.problems == [], outcome.problems
    assert outcome.state == EXPECTED[_id(path)]
    if outcome.state in {"refused with a reason", "untouched"}:
        assert outcome.source == path.read_text()


def test_docs_publish_the_real_corpus_table() -> None:
    # GIVEN the real corpus measured now WHEN compared with docs/migration.md THEN they agree
    counts, outcomes = measure()
    published = re.search(r"<!-- real-corpus -->\n(.*?)\n<!-- /real-corpus -->", DOCS.read_text(), re.S)
    assert published is not None, "docs/migration.md lacks the real-corpus table"
    assert published.group(1).strip() == table(counts, outcomes), table(counts, outcomes)
