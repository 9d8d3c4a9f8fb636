"""`make demo` end to end: synthesized templates -> moto server -> event -> handler -> local report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from demo import run as demo
from lambdas.trace_processor.tfevents import read_event_file


@pytest.mark.slow
def _job_dirs(out: Path) -> list[Path]:
    """The per-job report folders (history/ next to them holds the history rows kept across runs)."""
    return [p for p in out.iterdir() if p.is_dir() and p.name != "history"]


def test_demo_runs_the_pipeline_and_copies_the_report(
    tmp_path: Path, traces_dir: Path, capsys: pytest.CaptureFixture[str], aws_credentials: None
) -> None:
    # GIVEN no cloud assembly (the demo synthesizes one without bundling) and the sample traces
    # WHEN the demo runs
    code = demo.main(["--cdk-out", str(tmp_path / "none"), "--traces", str(traces_dir), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    # THEN it deployed the data plane from the templates, processed the job and copied the report out
    assert code == 0
    assert "deployed from the templates via CloudFormation" in out
    assert "EventBridge rule -> SQS delivered 1 message(s)" in out
    (job_dir,) = _job_dirs(tmp_path / "out")
    assert (job_dir / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
    summary = json.loads((job_dir / "summary.json").read_text())
    assert sorted(r["rank"] for r in summary["ranks"]) == [0, 1]
    # AND (issue 15) the instance metrics seeded into the emulator's CloudWatch are in the report, per GPU
    assert summary["system"]["status"] == "ok"
    system = json.loads((job_dir / "system.json").read_text())
    gpu = {h["host"]: h["series"]["GPUUtilization"] for h in system["hosts"]}
    assert sorted(gpu) == ["algo-1", "algo-2"]
    assert all(s["divisor"] == 8 and max(s["values"]) <= 100 for s in gpu.values())  # p4d: 8 GPUs
    assert "System metrics" in (job_dir / "report.html").read_text()
    assert "system metrics: ok (2 hosts)" in out
    assert f"HTML report: {(job_dir / 'report.html').resolve()}" in out
    assert "notification (SNS -> e-mail)" in out
    assert "legacy rule-output tagged for expiry: profstack:class=legacy-rule-output" in out
    assert "GPUIdlePercent" in out
    # AND the job's cost is in the e-mail and its history rows are copied out next to the report
    assert "GPU cost: about $" in out
    assert len(list((tmp_path / "out" / "history").rglob("*.jsonl"))) == 3
    # AND the TensorBoard event file is copied next to the report, readable as scalars
    (event_file,) = list((job_dir / demo.TENSORBOARD_DIR).iterdir())
    assert event_file.name.startswith("events.out.tfevents.")
    assert f"-> {event_file.resolve()}" in out
    assert any(e.scalars for e in read_event_file(event_file.read_bytes()))
    # AND (issue 36) the user's report index is copied out beside the job folder its links point to
    index = (tmp_path / "out" / "index.html").read_text()
    assert f'href="{job_dir.name}/report.html"' in index
    assert f"report index: {(tmp_path / 'out' / 'index.html').resolve()}" in out


@pytest.mark.slow
def test_demo_reuses_one_folder_per_job_across_runs(
    tmp_path: Path, traces_dir: Path, capsys: pytest.CaptureFixture[str], aws_credentials: None
) -> None:
    # GIVEN a synthesized cloud assembly and an output folder holding a previous run's report
    cdk_out = demo._synthesize()
    args = ["--cdk-out", str(cdk_out), "--traces", str(traces_dir), "--out", str(tmp_path / "out")]
    assert demo.main(args) == 0
    (first,) = _job_dirs(tmp_path / "out")
    (first / "stale-file-from-an-older-run").write_text("x")
    # WHEN the demo runs again
    assert demo.main(args) == 0
    capsys.readouterr()
    # THEN the job's one folder was replaced, not joined by a second one
    assert _job_dirs(tmp_path / "out") == [first]
    # AND the history rows of both runs of the one job are one set (the job's rows are overwritten)
    assert len(list((tmp_path / "out" / "history" / "jobs").rglob("*.jsonl"))) == 1
    assert not (first / "stale-file-from-an-older-run").exists()
    assert (first / "summary.json").is_file()
    # AND the report index lists the job once
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert [r["job"] for r in index["jobs"]] == [first.name]
    # AND (issue 36) a run of another job adds its row: the earlier job's row, kept in its folder, is restored
    # into the fresh emulator, where the processor rebuilds the index from the row files
    assert demo.main([*args, "--job", "second-demo-job"]) == 0
    assert "report index: 1 job row(s) of earlier demo runs restored" in capsys.readouterr().out
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert [r["job"] for r in index["jobs"]] == ["second-demo-job", first.name]
