"""#46 items 2 and 6: the codemod on the notebook corpus: Profiler/Debugger notebooks, launchers, an SDK-style test.

tests/fixtures/notebooks_own/ holds notebooks and launchers written for this repository in the styles
teams use (its README gives each file's purpose). Each must reach its expected outcome with every check of
own_corpus.py passing: valid IPython in every cell after the rewrite, only code cells' sources changed and
the JSON layout kept, no ruff F821/F401/F841 finding the original did not have, every SDK v2 estimator
launched with disable_profiler=True, nothing of the Profiler's launcher settings left, and a second run
changing nothing. Decoys stay byte-identical and unreported. docs/migration.md publishes the table.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import nbformat
import pytest
from nbformat.warnings import MissingIDFieldWarning

from tests.unit.migrate.own_corpus import (
    CORPUS,
    _kept_layout,
    _kept_structure,
    files,
    measure,
    measure_file,
    table,
)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "migration.md"

#: what each file must come to, and why
EXPECTED = {
    # one launcher cell, then many cells that read the Profiler's output with smdebug.profiler: they stay, noted
    "analysis/profiler_data_walkthrough.ipynb": "converted, with a note",
    # reads the Profiler output of a job started elsewhere: nothing to convert, left with the cells named
    "analysis/existing_job_report.ipynb": "refused with a reason",
    # no Profiler, IPython that is not Python (`try: !pip ... except: !pip ...`, `x = !ls`, `%%time`)
    "decoys/deploy_endpoint_explain.ipynb": "untouched",
    # no Profiler: automagic `pip install sagemaker --upgrade`, an estimator without disable_profiler
    "decoys/data_parallel_mnist.ipynb": "untouched",
    # Debugger without the Profiler (hook, rules, smdebug.trials), `obj?`, `%%bash`
    "decoys/debugger_tensors_only.ipynb": "untouched",
    "launchers/pt_cifar_profiler_rules.ipynb": "converted, with a note",
    "launchers/tf_resnet_single_gpu.ipynb": "converted, with a note",
    # boto3 create_training_job: ProfilerConfig and ProfilerRuleConfigurations beside Debugger's rules
    "launchers/tf_boto3_create_training_job.ipynb": "converted, with a note",
    # a ProfilerRule among Debugger rules and no profiler_config: the job still gets disable_profiler=True
    "launchers/tf_mnist_builtin_rules.ipynb": "converted whole",
    # `except ImportError: !pip install smdebug` alone in its block
    "launchers/pt_mnist_hook_script_change.ipynb": "converted whole",
    # Japanese, `os` imported only in a cell after the first job, two jobs, one config
    "launchers/ja_pytorch_distributed_profile.ipynb": "converted whole",
    # Japanese saved with \\u escapes, two-space indent, sources as strings
    "launchers/ja_huggingface_inline_config.ipynb": "converted whole",
    # nbformat 4.5 saved without cell ids: none may be added
    "launchers/keras_callback_bottleneck.ipynb": "converted, with a note",
    "launchers/tf_batch_size_sweep.ipynb": "converted whole",
    # `import os` only inside main(): the module-level constants need their own import
    "launchers/nightly_launch.py": "converted whole",
    # compares ProfilerConfig objects with what jobs report: refused, byte-identical, with the lines to change
    "sdk/profiler_settings_checks.py": "refused with a reason",
}


def _id(path: Path) -> str:
    return str(path.relative_to(CORPUS))


def test_every_file_has_an_expected_outcome_and_a_purpose_line() -> None:
    listed = {_id(p) for p in files()}
    assert listed == set(EXPECTED)
    readme = (CORPUS / "README.md").read_text()
    for name in listed:
        # GIVEN a file of the corpus THEN the README says what it is for
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None, f"{name} is not in the README"
        assert len(row.split("|")[2].strip()) > 20, row


@pytest.mark.parametrize("path", files(), ids=_id)
def test_a_file_reaches_its_outcome_and_passes_every_check(path: Path) -> None:
    # GIVEN a notebook or launcher of the corpus WHEN converted through the CLI's path
    outcome = measure_file(path)
    # THEN it reaches what it should, and a conversion passes every check (own_corpus.py)
    assert outcome.problems == [], outcome.problems
    assert outcome.state == EXPECTED[_id(path)]
    if outcome.state in {"refused with a reason", "untouched"}:
        assert outcome.source == path.read_text()
    if outcome.state == "untouched":
        assert outcome.reported == []  # a decoy is not reported either


def test_the_sdk_style_file_is_refused_with_the_lines_that_compare_profiler_settings() -> None:
    # GIVEN the SDK-style test file WHEN converted THEN each line that needs the Profiler's settings is named
    reported = measure_file(CORPUS / "sdk" / "profiler_settings_checks.py").reported
    still_used = [r for r in reported if "is still used here after its removal" in r]
    assert {r.split("`")[1] for r in still_used} >= {"expected", "profiler_config", "framework_profile"}
    assert all(re.match(r"\d+: ", r) for r in still_used)


def test_the_checks_catch_a_notebook_written_back_by_another_writer() -> None:
    # GIVEN a corpus notebook saved with escapes, two-space indent and string sources, and one saved without ids
    for name, layout_key in [
        ("launchers/ja_huggingface_inline_config.ipynb", "indent"),
        ("launchers/keras_callback_bottleneck.ipynb", "cell ids"),
    ]:
        text = (CORPUS / name).read_text()
        # WHEN nbformat's own writer saves it (ids added, its indent and escaping) and an output is dropped
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingIDFieldWarning)  # the point: nbformat adds the ids
            rewritten = nbformat.writes(nbformat.reads(text, as_version=4))
        damaged = json.loads(text)
        next(c for c in damaged["cells"] if c.get("outputs"))["outputs"] = []
        # THEN the layout and structure checks fail
        assert any(layout_key in p for p in _kept_layout(text, rewritten)), name
        assert any("more than its source" in p for p in _kept_structure(text, json.dumps(damaged))), name


def test_docs_publish_the_notebook_corpus_table() -> None:
    # GIVEN the corpus measured now WHEN compared with docs/migration.md THEN they agree
    counts, outcomes = measure()
    published = re.search(r"<!-- notebook-corpus -->\n(.*?)\n<!-- /notebook-corpus -->", DOCS.read_text(), re.S)
    assert published is not None, "docs/migration.md lacks the notebook-corpus table"
    assert published.group(1).strip() == table(counts, outcomes), table(counts, outcomes)
