"""Round-2 and round-3 corpora (#35, #46 item 3): every converted script runs under CPU torch and records a
bounded window.

One subprocess per script (torch's start-up dominates), two at a time. Each script trains or infers
for a few steps in the style the issue names (optional import guard, profiler factory, Hugging Face
and Lightning callbacks, loop in another method, nested loops under `if args.profile:`, try/finally,
no loop statement at all; round 3: `self.prof = None` in `__init__`, the profiler as a conditional
expression, availability tests used as values); the converted script must leave exactly one Kineto trace holding its
annotation labels and at most `active` (3) ProfilerStep ranges: the schedule, not the run, bounds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from profstack.migrate.scan import remaining_uses
from profstack.migrate.smprof import rewrite_source

ROUND2 = Path(__file__).resolve().parents[2] / "fixtures" / "smprof_round2"
ROUND3 = Path(__file__).resolve().parents[2] / "fixtures" / "smprof_round3"
SCRIPTS = sorted((ROUND2 / "scripts").glob("*.py")) + sorted((ROUND3 / "scripts").glob("*.py"))
LABELS = {
    "r01_optional_import_guard": {"forward"},
    "r02_profiler_factory": {"step"},
    "r03_hf_callback": {"hf_step"},
    "r04_lightning_callback": {"pl_batch"},
    "r05_method_train_step": {"train_step"},
    "r06_nested_loops_if_profile": {"batch"},
    "r07_try_finally": {"guarded_step"},
    "r08_work_function_no_loop": {"mapped_step"},
    "r09_calls_only": {"inference"},
    "r10_flag_and_conditional_start": {"flagged_step"},
    "s01_init_none_then_built": {"init_none_step"},
    "s02_conditional_instance": {"conditional_step"},
    "s03_flag_forms": {"flag_forms_step"},
}


def test_every_round2_script_has_its_expected_labels_listed() -> None:
    assert {p.stem for p in SCRIPTS} == set(LABELS)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_round2_script_is_converted_whole_with_a_schedule_and_a_step(script: Path) -> None:
    # GIVEN a script in a style the first codemod refused or recorded unbounded WHEN rewritten
    result = rewrite_source(script.read_text(), filename=str(script))
    # THEN it is converted, nothing is left for a person, and nothing of the Profiler remains
    assert result.changed
    assert result.manual == []
    assert remaining_uses(result.source) == []
    # AND the profile has a bounded schedule and something calls step() on it
    assert "schedule=torch.profiler.schedule(" in result.source
    assert ".step()\n" in result.source.replace("optimizer.step()", "").replace("OPTIMIZER.step()", "")
    # AND a second run changes nothing
    assert rewrite_source(result.source).source == result.source


def _run(script: Path, workdir: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    migrated = workdir / script.name
    migrated.write_text(rewrite_source(script.read_text(), filename=str(script)).source)
    traces = workdir / f"{script.stem}-traces"
    run = subprocess.run(
        [sys.executable, str(migrated)],
        env={**os.environ, "PROFSTACK_TRACE_DIR": str(traces), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return traces, run


@pytest.mark.slow
def test_converted_round2_scripts_run_and_record_a_bounded_window(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is pinned in requirements/dev.txt")
    # GIVEN every round-2 script, converted WHEN each runs on CPU torch
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(SCRIPTS, pool.map(lambda s: _run(s, tmp_path), SCRIPTS), strict=True))
    for script, (traces, run) in results.items():
        assert run.returncode == 0, f"{script.name}: {run.stderr[-2000:]}"
        # THEN one trace is written, holding the script's annotation labels
        files = list(traces.glob("*.pt.trace.json"))
        assert len(files) == 1, (script.name, files)
        events = json.loads(files[0].read_text())["traceEvents"]
        names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
        assert LABELS[script.stem] <= names, (script.name, names)
        # AND the schedule bounds it: 1 to 3 recorded steps, though every script runs 4 or more
        steps = {n for n in names if n.startswith("ProfilerStep#")}
        assert 1 <= len(steps) <= 3, (script.name, steps)
