"""End to end: an smprof script, migrated, runs under real torch and its trace feeds the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profstack.migrate.smprof import rewrite_source

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smprof" / "train_smprof.py"
DRIVER = """

if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    batches = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(4)]
    train(model, batches, torch.optim.SGD(model.parameters(), lr=0.01))
"""


@pytest.mark.slow
def test_migrated_script_records_a_trace_the_engine_analyses(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is pinned in requirements/dev.txt")
    # GIVEN the documented smprof script, rewritten, with a small driver
    script = tmp_path / "train.py"
    script.write_text(rewrite_source(FIXTURE.read_text()).source + DRIVER)
    traces = tmp_path / "tensorboard"
    # WHEN it runs on this machine's torch (CPU build: CUDA activity is skipped with a warning)
    run = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "PROFSTACK_TRACE_DIR": str(traces)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    # THEN tensorboard_trace_handler wrote one Kineto trace with the migrated annotations
    files = list(traces.glob("*.pt.trace.json"))
    assert len(files) == 1
    events = json.loads(files[0].read_text())["traceEvents"]
    annotations = [e["name"] for e in events if e.get("cat") == "user_annotation"]
    assert annotations.count("forward") == 4
    assert {f"step_{i}" for i in range(4)} <= set(annotations)
    # AND the analysis engine reports those annotations with their counts
    from profstack.analysis import AnalysisOptions, analyze, discover_sources

    result = analyze(discover_sources([traces]), AnalysisOptions())
    assert result.complete
    (rank,) = result.summary["ranks"]
    assert rank["has_gpu"] is False
    cpu_annotations = {a["name"]: a for a in rank["annotations"]["cpu"]}
    assert cpu_annotations["forward"]["count"] == 4
    assert cpu_annotations["forward"]["total_us"] > 0
