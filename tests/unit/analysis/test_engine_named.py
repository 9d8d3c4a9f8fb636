"""Which engine ran (#33 item 4): `profstack --version`, `profstack analyze`, the summary and the Lambdas say it."""

from __future__ import annotations

import json

import pytest

from profstack.analysis import AnalysisOptions, analyze, native
from profstack.analysis.sources import BytesTraceSource

TRACE = json.dumps(
    {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}
).encode()


def test_the_summary_and_the_version_name_the_engine_and_why_python(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from profstack.cli import main

    # GIVEN the Python loop, for a stated reason (before: nothing said which engine ran, or why)
    monkeypatch.setattr(native, "ACCEL", None)
    monkeypatch.setattr(native, "WHY_PYTHON", "not built (no C compiler when profstack was installed)")
    summary = analyze([BytesTraceSource(TRACE, name="t.json")], AnalysisOptions()).summary
    # THEN the summary records it (schema 1.4) and --version prints it
    assert summary["generator"]["engine"] == "python"
    assert summary["generator"]["engine_reason"].startswith("not built")
    with pytest.raises(SystemExit):
        main(["--version"])
    version = " ".join(capsys.readouterr().out.split())  # argparse wraps it at the terminal's width
    assert version.endswith("(engine: python (not built (no C compiler when profstack was installed)))")


@pytest.mark.skipif(native.load() is None, reason="the C engine is not built here")
def test_with_the_c_engine_there_is_no_reason_to_give() -> None:
    summary = analyze([BytesTraceSource(TRACE, name="t.json")], AnalysisOptions()).summary
    assert summary["generator"]["engine"] == "c"
    assert "engine_reason" not in summary["generator"]
    assert native.describe() == "c"


def test_a_lambda_that_expected_the_c_engine_warns_once_at_cold_start_and_publishes_the_engine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lambdas.trace_processor.job import Outcome
    from lambdas.trace_processor.telemetry import check_engine, metrics, publish_metrics

    monkeypatch.setattr(native, "ACCEL", None)
    monkeypatch.setattr(native, "WHY_PYTHON", "import failed: wrong architecture")
    # WHEN the deployment expected the C engine THEN one warning names what runs instead, and why
    message = check_engine("c")
    assert message is not None
    assert "import failed: wrong architecture" in message
    assert check_engine("python") is None
    assert check_engine(None) is None
    # AND a reported job's metrics carry the engine as a dimension
    capsys.readouterr()
    publish_metrics(Outcome("job-1", "Completed", "reported", "s3://b/r.html", {"TraceFiles": 1.0}))
    metrics.flush_metrics()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    analysed = [d for d in lines if "JobsAnalysed" in d]
    assert analysed
    assert analysed[0]["Engine"] == "python"
