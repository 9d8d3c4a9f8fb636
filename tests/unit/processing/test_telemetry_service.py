"""The processor's metrics carry the function's service dimension even when the module was imported before the
environment named it (a test session, a tool), which Powertools alone would not do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = """
import io, json, os, contextlib
os.environ.pop("POWERTOOLS_SERVICE_NAME", None)
from lambdas.trace_processor import telemetry          # imported with no service in the environment
from lambdas.trace_processor.job import Outcome
os.environ["POWERTOOLS_SERVICE_NAME"] = "profstack-trace-processor"   # then the function's environment
out = io.StringIO()
with contextlib.redirect_stdout(out):
    telemetry.publish_metrics(Outcome(job="j", status="Completed", action="reported", metrics={"GpuIdlePercent": 12.0}))
    telemetry.metrics.flush_metrics()
print("EMF", json.dumps([json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]))
"""


def test_metrics_bind_the_service_named_after_import() -> None:
    # GIVEN telemetry imported before POWERTOOLS_SERVICE_NAME is set WHEN a job's metrics are published
    run = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True)
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("EMF "))
    blobs = json.loads(line.removeprefix("EMF "))
    # THEN the flushed metric set (the one the alarms watch) has the service dimension and its value
    plain = [b for b in blobs if "GpuIdlePercent" in b and "TrainingJobName" not in b]
    assert plain
    assert all(b["service"] == "profstack-trace-processor" for b in plain)
    assert all(["service"] in b["_aws"]["CloudWatchMetrics"][0]["Dimensions"] for b in plain)
