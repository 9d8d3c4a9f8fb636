"""MLflow export against a real MLflow tracking server (MLflow from PyPI, SQLite backend, proxied artifacts)
that the test starts on 127.0.0.1; and the SigV4 signing a SageMaker managed server needs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from profstack.history.mlflow import (
    ARN_HEADER,
    JOB_TAG,
    MlflowClient,
    MlflowError,
    MlflowTarget,
    MlflowTargetError,
    export_job,
    summary_metrics,
)
from profstack.history.rows import job_numbers
from tests.unit.history.conftest import BuiltHistory

REPO = Path(__file__).resolve().parents[3]
MLFLOW = Path(os.environ.get("PROFSTACK_MLFLOW_BIN", REPO / ".venv-mlflow" / "bin" / "mlflow"))
START_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not MLFLOW.is_file():
        pytest.skip(f"{MLFLOW} not installed: `make install` builds .venv-mlflow from requirements/mlflow-server.txt")
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            str(MLFLOW), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination", str(root / "artifacts"),
        ],
        stdout=log, stderr=subprocess.STDOUT, cwd=root,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return dict(json.loads(response.read()))


@pytest.mark.slow
def test_a_job_becomes_one_run_with_its_metrics_and_the_report_as_artifact(
    mlflow_server: str, built_history: BuiltHistory
) -> None:
    # GIVEN the regressed resnet job's summary and a report page
    summary = built_history.summaries["resnet-w0"]
    page = b"<!DOCTYPE html><title>report</title>"
    client = MlflowClient(MlflowTarget.parse(mlflow_server))
    metrics = summary_metrics(summary, job_numbers(summary))
    # WHEN it is exported twice (a re-delivered job)
    for _ in range(2):
        run = export_job(
            client,
            experiment="profstack-test",
            job="resnet-w0",
            metrics=metrics,
            params={"user": "alice"},
            tags={"profstack.user": "alice"},
            artifacts={"profstack/report.html": (page, "text/html")},
        )
    # THEN the experiment holds one run for the job, finished, with the summary's numbers
    experiment = _get(f"{mlflow_server}/api/2.0/mlflow/experiments/get-by-name?experiment_name=profstack-test")
    runs = client._api("POST", "runs/search", {"experiment_ids": [experiment["experiment"]["experiment_id"]]})["runs"]
    assert len(runs) == 1
    got = _get(f"{mlflow_server}/api/2.0/mlflow/runs/get?run_id={run.run_id}")["run"]
    assert got["info"]["status"] == "FINISHED"
    logged = {m["key"]: m["value"] for m in got["data"]["metrics"]}
    assert logged["regressions"] == 1.0
    assert logged["cost_total_usd"] == summary["cost"]["total_usd"]
    assert logged["dataloader_share_pct"] == pytest.approx(job_numbers(summary)["dataloader_share_pct"])
    tags = {t["key"]: t["value"] for t in got["data"]["tags"]}
    assert tags[JOB_TAG] == "resnet-w0"
    assert {p["key"]: p["value"] for p in got["data"]["params"]} == {"user": "alice"}
    # AND the report is the run's artifact, byte for byte
    listed = _get(f"{mlflow_server}/api/2.0/mlflow/artifacts/list?run_id={run.run_id}&path=profstack")
    assert [f["path"] for f in listed["files"]] == ["profstack/report.html"]
    rest = run.artifact_uri.split(":", 1)[1].lstrip("/")
    with urllib.request.urlopen(
        f"{mlflow_server}/api/2.0/mlflow-artifacts/artifacts/{rest}/profstack/report.html"
    ) as r:
        assert r.read() == page


@pytest.mark.slow
def test_the_processor_exports_when_the_config_names_a_tracking_uri(
    mlflow_server: str, built_history: BuiltHistory
) -> None:
    from demo.lambda_harness import patched_environ
    from lambdas.trace_processor.aws import Clients
    from lambdas.trace_processor.history import export_mlflow
    from lambdas.trace_processor.job import JobContext

    # GIVEN the processor's environment with a plain MLflow URI (what JobHistory.environment() sets), by default
    ctx = JobContext("resnet-w4", "Completed", "alice", "bucket", 1_800_000_000.0, None)
    bob = JobContext("resnet-w5", "Completed", "bob", "bucket", 1_800_000_000.0, None)
    env = {"MLFLOW_TRACKING": mlflow_server, "MLFLOW_EXPERIMENT": "profstack-processor"}
    clients = Clients(s3=None, sagemaker=None, sns=None)  # type: ignore[arg-type]
    summary = built_history.summaries["resnet-w4"]
    with patched_environ(env):
        # WHEN alice's and bob's jobs are exported
        run_id = export_mlflow(clients, ctx, summary, "<p>r</p>")
        export_mlflow(clients, bob, summary, "<p>b</p>")
    # THEN each run is in its user's own experiment, with numbers and the report's S3 link, and no artifact:
    # MLflow lets every user of the server read every experiment (before: one shared experiment held every user's
    # report.html and summary.json)
    assert run_id
    run = _get(f"{mlflow_server}/api/2.0/mlflow/runs/get?run_id={run_id}")["run"]
    experiment = _get(f"{mlflow_server}/api/2.0/mlflow/experiments/get?experiment_id={run['info']['experiment_id']}")
    assert experiment["experiment"]["name"] == "profstack-processor/alice"
    assert _get(f"{mlflow_server}/api/2.0/mlflow/experiments/get-by-name?experiment_name=profstack-processor/bob")
    assert {t["key"]: t["value"] for t in run["data"]["tags"]}["profstack.report"].endswith("/report.html")
    assert run["data"]["metrics"]
    listed = _get(f"{mlflow_server}/api/2.0/mlflow/artifacts/list?run_id={run_id}&path=profstack")
    assert listed.get("files", []) == []
    # WHEN the config opts in to artifacts THEN the report and the summary are the run's artifacts
    with patched_environ({**env, "MLFLOW_ARTIFACTS": "true", "MLFLOW_EXPERIMENT_PER_USER": "false"}):
        run_id = export_mlflow(clients, ctx, summary, "<p>r</p>")
    assert run_id
    listed = _get(f"{mlflow_server}/api/2.0/mlflow/artifacts/list?run_id={run_id}&path=profstack")
    assert sorted(f["path"] for f in listed["files"]) == ["profstack/report.html", "profstack/summary.json"]
    # AND without MLFLOW_TRACKING nothing is exported
    assert export_mlflow(Clients(s3=None, sagemaker=None, sns=None), ctx, {}, "") is None  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_refused_request_is_not_transient(mlflow_server: str) -> None:
    client = MlflowClient(MlflowTarget.parse(mlflow_server))
    with pytest.raises(MlflowError) as caught:
        client._api("POST", "runs/log-batch", {"run_id": "no-such-run", "metrics": []})
    assert caught.value.transient is False


def test_an_unreachable_server_is_transient() -> None:
    client = MlflowClient(MlflowTarget.parse(f"http://127.0.0.1:{_free_port()}"), timeout_s=2)
    with pytest.raises(MlflowError) as caught:
        client.experiment_id("x")
    assert caught.value.transient is True


def test_targets_are_an_arn_or_an_http_uri() -> None:
    arn = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/team"
    target = MlflowTarget.parse(arn)
    assert target.base_url == "https://eu-west-1.experiments.sagemaker.aws"
    assert (target.arn, target.region) == (arn, "eu-west-1")
    assert MlflowTarget.parse("http://mlflow.internal:5000/").base_url == "http://mlflow.internal:5000"
    for bad in ("mlflow.internal", "file:///tmp/mlruns", "arn:aws:sagemaker:eu-west-1:123:mlflow-tracking-server/x"):
        with pytest.raises(MlflowTargetError):
            MlflowTarget.parse(bad)
    with pytest.raises(MlflowTargetError, match="credentials"):
        MlflowClient(target)


def _capture_server() -> tuple[HTTPServer, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, "headers": dict(self.headers)})
            body = json.dumps({"experiment": {"experiment_id": "7"}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def test_a_sagemaker_tracking_server_gets_sigv4_requests_with_its_arn() -> None:
    from botocore.credentials import Credentials

    # GIVEN an ARN target whose endpoint is a local capture server, and fixed credentials
    server, seen = _capture_server()
    arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/profstack"
    target = MlflowTarget(f"http://127.0.0.1:{server.server_port}", arn=arn, region="us-east-1")
    client = MlflowClient(target, credentials=Credentials("AKIDEXAMPLE", "secret", "token"))
    try:
        # WHEN a call is made
        assert client.experiment_id("profstack") == "7"
    finally:
        server.shutdown()
    # THEN it is signed for sagemaker-mlflow in the ARN's region and names the tracking server
    headers = {k.lower(): v for k, v in seen[0]["headers"].items()}
    assert headers[ARN_HEADER] == arn
    assert "Credential=AKIDEXAMPLE/" in headers["authorization"]
    assert "/us-east-1/sagemaker-mlflow/aws4_request" in headers["authorization"]
    assert ARN_HEADER in headers["authorization"].split("SignedHeaders=")[1]
    assert headers["x-amz-security-token"] == "token"
    assert seen[0]["path"] == "/api/2.0/mlflow/experiments/get-by-name?experiment_name=profstack"


def test_a_plain_uri_sends_no_credentials() -> None:
    server, seen = _capture_server()
    try:
        MlflowClient(MlflowTarget.parse(f"http://127.0.0.1:{server.server_port}")).experiment_id("p")
    finally:
        server.shutdown()
    headers = {k.lower() for k in seen[0]["headers"]}
    assert "authorization" not in headers
    assert ARN_HEADER not in headers


def test_summary_metrics_are_finite_and_named_as_mlflow_accepts(built_history: BuiltHistory) -> None:
    summary = built_history.summaries["resnet-w4"]
    metrics = summary_metrics(summary, {**job_numbers(summary), "bad metric!": float("nan"), "ok:x": 1.0})
    assert "bad metric!" not in metrics
    assert "bad metric_" not in metrics
    assert metrics["ok_x"] == 1.0
    assert metrics["regressions"] == 0.0
