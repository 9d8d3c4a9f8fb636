"""End to end: every corpus script, migrated, runs under real torch (CPU) and its trace feeds the engine.

One subprocess per script (torch's start-up dominates), four at a time; each script trains a tiny
model for 4-5 steps. The schedule the codemod writes (wait=1, warmup=1, active=3) records the
third to fifth steps, so each trace holds up to three ProfilerStep annotations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from profstack.migrate.smprof import rewrite_source

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "smprof" / "scripts").glob("*.py"))
# what each script annotates (record_function names), checked in its trace
EXPECTED_ANNOTATIONS = {
    "01_docs_fallback": {"forward", "step_2", "step_3", "step_4"},
    "02_alias_decorator": {"forward", "optimizer_step"},
    "03_from_import_handles": {"forward", "backward"},
    "04_class_trainer": {"step"},
    "05_inline_singleton": {"train_step"},
    "06_while_loop_config": {"data", "compute"},
    "07_local_profiler_nested": {"batch_2", "batch_3", "batch_4"},
    "08_handle_across_functions": {"step_2", "step_3", "step_4"},
}


def _run(script: Path, workdir: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    migrated = workdir / script.name
    migrated.write_text(rewrite_source(script.read_text(), filename=str(script)).source)
    traces = workdir / f"{script.stem}-tensorboard"
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
def test_migrated_scripts_record_traces_the_engine_analyses(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is pinned in requirements/dev.txt")
    from profstack.analysis import AnalysisOptions, analyze, discover_sources

    assert len(SCRIPTS) >= 8
    # GIVEN every corpus script, rewritten WHEN each runs on this machine's torch (CPU build: CUDA
    # activity is skipped with a warning)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(SCRIPTS, pool.map(lambda s: _run(s, tmp_path), SCRIPTS), strict=True))
    for script, (traces, run) in results.items():
        assert run.returncode == 0, f"{script.name}: {run.stderr[-2000:]}"
        # THEN tensorboard_trace_handler wrote one Kineto trace holding the migrated annotations
        files = list(traces.glob("*.pt.trace.json"))
        assert len(files) == 1, script.name
        events = json.loads(files[0].read_text())["traceEvents"]
        names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
        assert EXPECTED_ANNOTATIONS[script.stem] <= names, (script.name, names)
        steps = sorted(n for n in names if n.startswith("ProfilerStep#"))
        assert 1 <= len(steps) <= 3, (script.name, steps)  # the schedule bounds the trace
        # AND the analysis engine reads it: complete, CPU-only, with those annotations counted (every recorded
        # step: HTA's default drops the last ProfilerStep, and the last step's annotations with it)
        result = analyze(discover_sources([traces]), AnalysisOptions(include_last_step=True))
        assert result.complete, script.name
        (rank,) = result.summary["ranks"]
        assert rank["has_gpu"] is False
        counted = {a["name"]: a for a in rank["annotations"]["cpu"]}
        for name in EXPECTED_ANNOTATIONS[script.stem]:
            assert counted[name]["count"] >= 1, (script.name, name)
            assert counted[name]["total_us"] > 0, (script.name, name)
