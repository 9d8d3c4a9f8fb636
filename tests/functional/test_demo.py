"""`make demo` end to end: synthesized templates -> moto server -> event -> handler -> local report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profstack import demo


@pytest.mark.slow
def test_demo_runs_the_pipeline_and_copies_the_report(
    tmp_path: Path, traces_dir: Path, capsys: pytest.CaptureFixture[str], aws_credentials: None
) -> None:
    # GIVEN no cloud assembly (the demo synthesizes one without bundling) and the shared traces
    # WHEN the demo runs
    code = demo.main(["--cdk-out", str(tmp_path / "none"), "--traces", str(traces_dir), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    # THEN it deployed the data plane from the templates, processed the job and copied the report out
    assert code == 0
    assert "deployed from the templates via CloudFormation" in out
    assert "EventBridge rule -> SQS delivered 1 message(s)" in out
    (job_dir,) = list((tmp_path / "out").iterdir())
    assert (job_dir / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
    summary = json.loads((job_dir / "summary.json").read_text())
    assert sorted(r["rank"] for r in summary["ranks"]) == [0, 1]
    assert f"HTML report: {(job_dir / 'report.html').resolve()}" in out
    assert "notification (SNS -> e-mail)" in out
    assert "legacy rule-output tagged for expiry: profstack:class=legacy-rule-output" in out
    assert "GPUIdlePercent" in out
