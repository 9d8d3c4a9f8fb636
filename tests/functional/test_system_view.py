"""Issue 15, items 3-5 end to end through moto: a job's CloudWatch instance metrics (seeded with PutMetricData
the way SageMaker publishes them) -> the trace processor (SQS handler, and the fan-out aggregate step) ->
report.html with per-host charts per GPU, system.json, Debugger's system findings in summary.json, and the
e-mail with the FailureReason and the console links.

What moto 5.2's GetMetricData does (read in moto/cloudwatch/models.py, noted in docs/platform-facts.md C):
MetricStat queries with Dimensions, Period and Stat (Average here), buckets aligned to StartTime, exact
dimension-set match, ScanBy; metric math over the other queries; no NextToken and no throttling. The
CloudWatch failure case therefore uses botocore's Stubber (validated against the service model).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from demo.lambda_harness import LambdaContext, patched_environ, sqs_event, sqs_record
from profstack import layout
from profstack.analysis.summary import SUMMARY_SCHEMA_VERSION, summary_schema
from tests.functional.processing_support import (
    TRACE_BUCKET,
    USER,
    DataPlane,
    create_data_plane,
    emulate_run,
    job_event,
    processor_environ,
    register_training_job,
    seed_instance_metric,
    throttled_cloudwatch,
)

RANK0 = "hta/trace_filter/sampled_rank-0.json.gz"
RANK1 = "hta/trace_filter/sampled_rank-1.json.gz"
INSTANCE = "ml.g5.12xlarge"  # the pinned table (profstack/jobs/instances.py): 4 GPUs, 48 vCPUs
GPUS, VCPUS = 4, 48
MINUTES = 50
NOW = datetime.now(UTC).replace(second=0, microsecond=0)
START = NOW - timedelta(minutes=60)
END = NOW - timedelta(minutes=5)
PASS_DEFINITION = json.dumps({"StartAt": "Wait", "States": {"Wait": {"Type": "Pass", "End": True}}})
#: per GPU / per vCPU values each host really had; SageMaker publishes GPU and CPU summed over the host
LOW_GPU_HOST = {"GPUUtilization": 20.0, "GPUMemoryUtilization": 30.0, "CPUUtilization": 35.0,
                "MemoryUtilization": 40.0, "DiskUtilization": 12.0}  # fmt: skip
BUSY_HOST = {"GPUUtilization": 85.0, "GPUMemoryUtilization": 60.0, "CPUUtilization": 50.0,
             "MemoryUtilization": 55.0, "DiskUtilization": 12.0}  # fmt: skip
FAILURE = (
    'AlgorithmError: ExecuteUserScriptError: Command "/opt/conda/bin/python3.11 train.py" exited with code 1\n'
    "RuntimeError: CUDA out of memory"
)


def _environ(plane: DataPlane, **extra: str) -> dict[str, str]:
    return processor_environ(plane.topic_arn, AWS_REGION="us-east-1", NAME_PREFIX="profstack", **extra)


@pytest.fixture
def plane(aws_credentials: None) -> Iterator[DataPlane]:
    with mock_aws():
        data_plane = create_data_plane()
        with patched_environ(_environ(data_plane)):
            from lambdas.trace_processor import runtime

            runtime.reset()
            yield data_plane
            runtime.reset()


def _sagemaker_sum(metric: str, per_unit: float) -> float:
    return per_unit * {"GPUUtilization": GPUS, "GPUMemoryUtilization": GPUS, "CPUUtilization": VCPUS}.get(metric, 1)


def _seed(plane: DataPlane, job: str, hosts: dict[str, dict[str, float]]) -> None:
    for host, values in hosts.items():
        for metric, per_unit in values.items():
            seed_instance_metric(plane, job, host, metric, [_sagemaker_sum(metric, per_unit)] * MINUTES, start=START)


def _job(
    plane: DataPlane,
    traces_dir: Path,
    job: str,
    *,
    traces: bool = True,
    status: str = "Completed",
    failure: str | None = None,
) -> None:
    register_training_job(plane, job, instance_type=INSTANCE, instance_count=2)
    emulate_run(job, start=START, end=END, status=status, failure_reason=failure)
    if traces:
        for i, rel in enumerate((RANK0, RANK1)):
            key = f"{layout.job_tensorboard_prefix(USER, job)}algo-{i + 1}_1.1.pt.trace.json.gz"
            plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)


def _process(job: str, status: str = "Completed", *, receive_count: int = 1) -> dict[str, Any]:
    from lambdas.trace_processor import handler

    record = sqs_record(job_event(job, status), receive_count=receive_count)
    response: dict[str, Any] = handler.handler(sqs_event(record), LambdaContext())
    return response


def _read(plane: DataPlane, job: str, name: str) -> Any:
    body = plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{layout.job_reports_prefix(USER, job)}{name}")["Body"]
    data = body.read().decode()
    return data if name.endswith(".html") else json.loads(data)


def _polylines(html: str) -> list[tuple[str, set[float]]]:
    """(host label, y coordinates) of each chart line, in page order (GPU utilisation is the first chart)."""
    found = re.findall(r'<polyline points="([^"]*)" stroke="[^"]*"><title>([^<]*)</title>', html)
    return [(label, {float(p.split(",")[1]) for p in points.split()}) for points, label in found]


def _y(per_unit: float) -> float:
    return round(170.0 - per_unit / 100.0 * 170.0, 1)  # profstack/report/system.py line_chart, y from 0 to 100 %


def _system_findings(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in summary["findings"] if (f.get("evidence") or {}).get("source") == "cloudwatch"]


def test_a_report_shows_each_hosts_metrics_per_gpu_and_the_system_rules_judge_them(
    plane: DataPlane, traces_dir: Path
) -> None:
    # GIVEN a 2 x ml.g5.12xlarge job with traces, whose algo-1 kept its GPUs at 20 % and algo-2 at 85 %
    job = "sysm-traced"
    _job(plane, traces_dir, job)
    _seed(plane, job, {"algo-1": LOW_GPU_HOST, "algo-2": BUSY_HOST})
    # WHEN the job-completed event is processed
    assert _process(job) == {"batchItemFailures": []}

    # THEN system.json holds each host's series divided by its GPU / vCPU count
    system = _read(plane, job, "system.json")
    assert system["status"] == "ok"
    assert system["complete"] is True
    assert system["period_s"] == 60
    hosts = {h["host"]: h for h in system["hosts"]}
    assert set(hosts) == {"algo-1", "algo-2"}
    for host, expected in (("algo-1", LOW_GPU_HOST), ("algo-2", BUSY_HOST)):
        assert (hosts[host]["instance_type"], hosts[host]["gpus"], hosts[host]["vcpus"]) == (INSTANCE, GPUS, VCPUS)
        for metric, per_unit in expected.items():
            series = hosts[host]["series"][metric]
            assert set(series["values"]) == {per_unit}, (host, metric)
            assert len(series["timestamps"]) == MINUTES
            assert series["normalised"] is True
        assert hosts[host]["series"]["GPUUtilization"]["divisor"] == GPUS
        assert hosts[host]["series"]["CPUUtilization"]["divisor"] == VCPUS
    assert system["links"]["Alarms"].endswith("search=profstack%2Fjob%2Fsysm-traced%2F")

    # AND the report has the system panel with one line per host per chart, at the per-GPU values
    html = _read(plane, job, "report.html")
    assert "System metrics" in html
    assert 'badge warning">system metrics' not in html  # every series read: no caveat in the header
    lines = _polylines(html)
    assert len(lines) == 2 * 5  # 2 hosts x (GPU, GPU memory, CPU, host memory, disk)
    (gpu1, y1), (gpu2, y2) = lines[0], lines[1]
    assert (gpu1, gpu2) == (f"algo-1 ({INSTANCE})", f"algo-2 ({INSTANCE})")
    assert y1 == {_y(20.0)}  # 80 summed over 4 GPUs -> 20 % per GPU, not 80 %
    assert y2 == {_y(85.0)}
    assert lines[4][1] == {_y(35.0)}  # CPU: 1680 over 48 vCPUs -> 35 %
    assert "<td>20 / 20</td>" in html  # the per-host table: GPU p50 / p95 per GPU
    assert 'href="https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#metricsV2' in html

    # AND the summary validates against the current schema, with LowGPUUtilization fired for algo-1 only
    summary = _read(plane, job, "summary.json")
    jsonschema.validate(summary, summary_schema())
    assert summary["schema_version"] == SUMMARY_SCHEMA_VERSION
    assert summary["system"] == {
        "status": "ok", "reason": None, "file": "system.json", "hosts": 2, "period_s": 60,
        "start_s": START.timestamp(), "end_s": END.timestamp(), "complete": True, "downsampled": False,
    }  # fmt: skip
    found = _system_findings(summary)
    low = [f for f in found if f["rule_id"] == "LowGPUUtilization"]
    assert [f["evidence"]["host"] for f in low] == ["algo-1"]
    assert low[0]["evidence"]["p95_pct"] == 20.0
    assert low[0]["ranks"] == []
    assert {f["evidence"]["host"] for f in found if f["rule_id"] == "OverallSystemUsage"} == {"algo-1", "algo-2"}
    assert not [f for f in found if f["rule_id"] in {"CPUBottleneck", "IOBottleneck", "GPUMemoryIncrease"}]
    assert not [w for w in summary.get("warnings", []) if w["source"] == "cloudwatch"]


def test_busy_hosts_fire_no_low_gpu_rule_and_a_redelivery_does_not_duplicate_findings(
    plane: DataPlane, traces_dir: Path
) -> None:
    # GIVEN both hosts busy (85 % per GPU: 340 summed over 4 GPUs, which a per-host threshold would misread)
    job = "sysm-busy"
    _job(plane, traces_dir, job)
    _seed(plane, job, {"algo-1": BUSY_HOST, "algo-2": BUSY_HOST})
    # WHEN processed, and SageMaker's event arrives again after the idempotency record expired
    assert _process(job) == {"batchItemFailures": []}
    first = _read(plane, job, "summary.json")
    from lambdas.trace_processor import runtime
    from lambdas.trace_processor.events import parse_event
    from lambdas.trace_processor.pipeline import process_job

    process_job(parse_event(job_event(job)), env=runtime.env(), clients=runtime.clients(), engine=runtime.engine())
    second = _read(plane, job, "summary.json")
    # THEN no system rule but the reference OverallSystemUsage fires, and re-running adds nothing twice
    assert {f["rule_id"] for f in _system_findings(first)} == {"OverallSystemUsage"}
    assert _system_findings(second) == _system_findings(first)
    assert second["warnings"] == first["warnings"]


def test_a_job_without_traces_gets_the_system_view(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a job that wrote no trace but ran with idle GPUs on algo-1
    job = "sysm-untraced"
    _job(plane, traces_dir, job, traces=False)
    _seed(plane, job, {"algo-1": LOW_GPU_HOST, "algo-2": BUSY_HOST})
    # WHEN processed
    assert _process(job) == {"batchItemFailures": []}
    # THEN the page is the system report: the no-traces explanation, then CPU/GPU/memory/disk per host
    html = _read(plane, job, "report.html")
    assert f"<title>No traces: {job}</title>" in html
    assert "No PyTorch profiler traces" in html
    assert len(_polylines(html)) == 10
    assert _polylines(html)[0][1] == {_y(20.0)}
    assert "System findings" in html
    assert "LowGPUUtilization" in html
    # AND summary.json still says no traces, with the system section and findings
    summary = _read(plane, job, "summary.json")
    assert summary["no_traces"] is True
    assert summary["system"]["status"] == "ok"
    assert [f["evidence"]["host"] for f in _system_findings(summary) if f["rule_id"] == "LowGPUUtilization"] == [
        "algo-1"
    ]
    assert _read(plane, job, "system.json")["status"] == "ok"
    # AND the e-mail still says no traces, and links the job's metrics
    (note,) = plane.notifications()
    assert "no traces" in note["Subject"]
    assert "Instance metrics: https://us-east-1.console.aws.amazon.com/cloudwatch/home" in note["Message"]


def test_a_job_cloudwatch_holds_nothing_for_is_a_stated_case(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a job whose hosts published no metrics (e.g. shorter than SageMaker's one-minute period)
    job = "sysm-silent"
    _job(plane, traces_dir, job, traces=False)
    # WHEN processed
    assert _process(job) == {"batchItemFailures": []}
    # THEN the system view says "no data" with the reason, distinct from "unavailable"
    summary = _read(plane, job, "summary.json")
    assert summary["system"]["status"] == "no_data"
    assert summary["system"]["complete"] is True  # CloudWatch answered: there is nothing
    assert "holds no instance metrics" in summary["system"]["reason"]
    assert not [w for w in summary["warnings"] if w["source"] == "cloudwatch"]  # a complete answer, not a warning
    system = _read(plane, job, "system.json")
    assert system["status"] == "no_data"
    assert [h["series"] for h in system["hosts"]] == [{}, {}]
    assert "No data from CloudWatch." in _read(plane, job, "report.html")


def test_a_failed_jobs_email_carries_its_failure_reason_and_console_links(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a job that failed with SageMaker's FailureReason
    job = "sysm-failed"
    _job(plane, traces_dir, job, status="Failed", failure=FAILURE)
    _seed(plane, job, {"algo-1": LOW_GPU_HOST, "algo-2": BUSY_HOST})
    # WHEN its Failed event is processed
    assert _process(job, "Failed") == {"batchItemFailures": []}
    # THEN the one e-mail starts with the failure and links the job, its metrics, its alarms and its logs
    (note,) = plane.notifications()
    assert re.match(rf"^ProfStack: {job} Failed, \d+ findings: AlgorithmError: ExecuteUserScriptError", note["Subject"])
    assert len(note["Subject"]) < 100
    message = note["Message"]
    assert message.startswith(f"Training job {job} failed.\n\nFailureReason:\n  AlgorithmError:")
    assert "  RuntimeError: CUDA out of memory" in message
    console = "https://us-east-1.console.aws.amazon.com"
    assert f"Training job: {console}/sagemaker/home?region=us-east-1#/jobs/{job}" in message
    assert f"Instance metrics: {console}/cloudwatch/home?region=us-east-1#metricsV2?search=" in message
    assert f"Alarms: {console}/cloudwatch/home?region=us-east-1#alarmsV2:?search=profstack%2Fjob%2F{job}%2F" in message
    assert f"Logs: {console}/cloudwatch/home?region=us-east-1#logsV2:log-groups/log-group/" in message
    assert message.index("FailureReason") < message.index("Top findings") < message.index("Alarms:")
    assert f"Report: s3://{TRACE_BUCKET}/{layout.job_reports_prefix(USER, job)}report.html" in message


def test_a_cloudwatch_failure_still_yields_a_report_that_says_the_metrics_are_unavailable(
    plane: DataPlane, traces_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lambdas.trace_processor import runtime

    # GIVEN the processor's CloudWatch client retries throttling in botocore's standard mode
    cloudwatch = runtime.clients().cloudwatch
    assert cloudwatch is not None
    assert cloudwatch.meta.config.retries == {"mode": "standard", "total_max_attempts": 9}  # 8 retries
    # AND GetMetricData still failing once those retries are spent (Stubber: moto cannot throttle)
    job = "sysm-cw-down"
    _job(plane, traces_dir, job)
    _seed(plane, job, {"algo-1": LOW_GPU_HOST, "algo-2": BUSY_HOST})
    stubber = throttled_cloudwatch(cloudwatch, 2)
    # WHEN the job's first delivery is processed (SQS will deliver it again: maxReceiveCount 2)
    first = _process(job, receive_count=1)
    # THEN the record fails, to be retried, before any analysis or output: a fault that may pass is not
    # stored as the job's final result
    assert len(first["batchItemFailures"]) == 1
    reports = plane.s3.list_objects_v2(Bucket=TRACE_BUCKET, Prefix=layout.job_reports_prefix(USER, job))
    assert reports.get("KeyCount", 0) == 0
    assert plane.notifications() == []
    # WHEN the last delivery meets the same fault
    response = _process(job, receive_count=2)
    stubber.assert_no_pending_responses()
    stubber.deactivate()
    # THEN that record succeeds and the trace report is written rather than lost to the DLQ
    assert response == {"batchItemFailures": []}
    summary = _read(plane, job, "summary.json")
    assert sorted(r["rank"] for r in summary["ranks"]) == [0, 1]
    jsonschema.validate(summary, summary_schema())
    # AND the system section is marked unavailable with the reason, as a warning too, not as "no metrics"
    assert summary["system"]["status"] == "unavailable"
    assert summary["system"]["complete"] is False
    assert "Throttling" in summary["system"]["reason"]
    assert "Rate exceeded" in summary["system"]["reason"]
    (warning,) = [w for w in summary["warnings"] if w["source"] == "cloudwatch"]
    assert warning["error_type"] == "SystemMetricsUnavailable"
    assert warning["message"].startswith("system metrics unavailable: GetMetricData failed after retries (Throttling)")
    system = _read(plane, job, "system.json")
    assert system["status"] == "unavailable"
    assert "hosts" not in system  # no series at all, rather than empty ones
    # AND no system rule judged metrics it did not read (MaxInitializationTime needs none and stays quiet)
    assert not _system_findings(summary)
    html = _read(plane, job, "report.html")
    assert "System metrics unavailable:" in html
    # AND the page's header does not read as if everything were there
    header = html[: html.index("</header>")] if "</header>" in html else html[:5000]
    assert '<span class="badge warning">system metrics unavailable</span>' in header
    assert not _polylines(html)
    # AND the e-mail says so
    (note,) = plane.notifications()
    assert "System metrics: unavailable: GetMetricData failed after retries (Throttling)" in note["Message"]


@pytest.fixture
def fanout_plane(aws_credentials: None) -> Iterator[tuple[DataPlane, Any]]:
    with mock_aws():
        data_plane = create_data_plane()
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        machine = sfn.create_state_machine(
            name="profstack-fanout", definition=PASS_DEFINITION, roleArn="arn:aws:iam::123456789012:role/sfn"
        )["stateMachineArn"]
        with patched_environ(_environ(data_plane, FANOUT_FILE_THRESHOLD="1", STATE_MACHINE_ARN=machine)):
            from lambdas.trace_processor import runtime

            runtime.reset()
            yield data_plane, sfn
            runtime.reset()


def test_a_fanned_out_job_gets_its_system_view_from_the_aggregate_step(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor import aggregate as aggregate_entry
    from lambdas.trace_processor import analyze_file as analyze_entry
    from lambdas.trace_processor import runtime

    plane, sfn = fanout_plane
    # GIVEN a two-file job that fans out, with its instance metrics in CloudWatch
    job = "sysm-fanout"
    _job(plane, traces_dir, job, status="Failed", failure=FAILURE)
    _seed(plane, job, {"algo-1": LOW_GPU_HOST, "algo-2": BUSY_HOST})
    # WHEN the processor starts the fan-out
    assert _process(job, "Failed") == {"batchItemFailures": []}
    (execution,) = sfn.list_executions(stateMachineArn=runtime.env().state_machine_arn)["executions"]
    payload = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    # THEN the execution input carries the bounded job description, JSON-safe, and no metrics were read yet
    assert payload["job"]["ResourceConfig"]["InstanceType"] == INSTANCE
    assert payload["job"]["TrainingStartTime"] == START.timestamp()
    assert payload["job"]["FailureReason"] == FAILURE
    assert "system.json" not in " ".join(plane.list_keys(layout.job_reports_prefix(USER, job)))
    # WHEN the map items and then the aggregate step run on what the state machine passes them
    manifest = json.loads(
        plane.s3.get_object(Bucket=payload["manifest"]["bucket"], Key=payload["manifest"]["key"])["Body"].read()
    )
    for item in manifest:
        analyze_entry.handler({"context": payload["context"], "partials": payload["partials"], "item": item},
                              LambdaContext())  # fmt: skip
    assert aggregate_entry.handler(payload, LambdaContext())["action"] == "reported"
    # THEN the job report has the system panel, system.json and the system findings, as on the one-Lambda path
    summary = _read(plane, job, "summary.json")
    jsonschema.validate(summary, summary_schema())
    assert summary["system"]["status"] == "ok"
    assert [f["evidence"]["host"] for f in _system_findings(summary) if f["rule_id"] == "LowGPUUtilization"] == [
        "algo-1"
    ]
    hosts = {h["host"]: h for h in _read(plane, job, "system.json")["hosts"]}
    assert set(hosts["algo-2"]["series"]["GPUUtilization"]["values"]) == {85.0}
    assert _polylines(_read(plane, job, "report.html"))[0][1] == {_y(20.0)}
    # AND the e-mail carries the failure reason and the links
    (note,) = plane.notifications()
    assert "FailureReason:\n  AlgorithmError" in note["Message"]
    assert "Alarms: https://us-east-1.console.aws.amazon.com/cloudwatch/" in note["Message"]


def _fanned_out(plane: DataPlane, sfn: Any, traces_dir: Path, job: str) -> dict[str, Any]:
    """Fan the job out and run its map items as the state machine would: the aggregate step's input."""
    from lambdas.trace_processor import analyze_file as analyze_entry
    from lambdas.trace_processor import runtime

    _job(plane, traces_dir, job)
    _seed(plane, job, {"algo-1": LOW_GPU_HOST, "algo-2": BUSY_HOST})
    assert _process(job) == {"batchItemFailures": []}
    (execution,) = sfn.list_executions(stateMachineArn=runtime.env().state_machine_arn)["executions"]
    payload: dict[str, Any] = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    manifest = json.loads(
        plane.s3.get_object(Bucket=payload["manifest"]["bucket"], Key=payload["manifest"]["key"])["Body"].read()
    )
    for item in manifest:
        analyze_entry.handler({"context": payload["context"], "partials": payload["partials"], "item": item},
                              LambdaContext())  # fmt: skip
    return payload


def _count_s3_reads(calls: list[str]) -> None:
    from lambdas.trace_processor import runtime

    runtime.clients().s3.meta.events.register(
        "before-parameter-build.s3.GetObject", lambda params, **_: calls.append(str(params.get("Key", "")))
    )


def test_the_aggregate_step_retries_a_transient_cloudwatch_fault_until_its_last_attempt(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor import aggregate as aggregate_entry
    from lambdas.trace_processor import runtime
    from lambdas.trace_processor.errors import SystemMetricsTransientError

    plane, sfn = fanout_plane
    # GIVEN a fanned-out job whose partials are written, and the aggregate step allowed N runs in all
    job = "sysm-fanout-throttled"
    payload = _fanned_out(plane, sfn, traces_dir, job)
    attempts = runtime.env().aggregate_max_attempts
    assert attempts == 3  # processing_support's AGGREGATE_MAX_ATTEMPTS
    reports = layout.job_reports_prefix(USER, job)
    before = plane.list_keys(reports)
    assert f"{reports}partials/manifest.json" in before
    outputs = {f"{reports}{name}" for name in ("summary.json", "report.html", "system.json")}
    assert not outputs & set(before)  # only the fan-out's own partials and trimmed traces so far
    # AND GetMetricData still throttled after botocore's retries on every run (Stubber: moto cannot throttle)
    cloudwatch = runtime.clients().cloudwatch
    assert cloudwatch is not None
    stubber = throttled_cloudwatch(cloudwatch, attempts)
    reads: list[str] = []
    _count_s3_reads(reads)
    # WHEN Step Functions runs the step with $$.State.RetryCount 0 .. N-2
    for attempt in range(attempts - 1):
        with pytest.raises(SystemMetricsTransientError) as raised:
            aggregate_entry.handler({**payload, "attempt": attempt}, LambdaContext())
        # THEN each run fails with the error name the state machine retries on, having written nothing: no
        # summary, report, system.json, TensorBoard scalars or e-mail, and read no partial (metrics come first);
        # the one read is the stored execution input, which vouches for the job description before CloudWatch
        assert type(raised.value).__name__ == "SystemMetricsTransientError"
        assert "Throttling" in str(raised.value)
        assert plane.list_keys(reports) == before
        assert all(k.endswith(".pt.trace.json.gz") for k in plane.list_keys(layout.job_tensorboard_prefix(USER, job)))
        assert plane.notifications() == []
        assert reads == [f"{reports}partials/execution-input.json"]
        reads.clear()
    # WHEN the last attempt (RetryCount N-1) meets the same fault
    outcome = aggregate_entry.handler({**payload, "attempt": attempts - 1}, LambdaContext())
    stubber.assert_no_pending_responses()  # one GetMetricData per run, and every run read it
    stubber.deactivate()
    # THEN the report is published rather than lost, with the system section unavailable and the reason
    assert outcome["action"] == "reported"
    summary = _read(plane, job, "summary.json")
    jsonschema.validate(summary, summary_schema())
    assert sorted(r["rank"] for r in summary["ranks"]) == [0, 1]
    assert summary["system"]["status"] == "unavailable"
    assert summary["system"]["complete"] is False
    assert "GetMetricData failed after retries (Throttling): " in summary["system"]["reason"]
    assert "Rate exceeded" in summary["system"]["reason"]
    (warning,) = [w for w in summary["warnings"] if w["source"] == "cloudwatch"]
    assert warning["error_type"] == "SystemMetricsUnavailable"
    system = _read(plane, job, "system.json")
    assert system["status"] == "unavailable"
    assert "hosts" not in system
    assert not _system_findings(summary)
    (note,) = plane.notifications()
    assert "System metrics: unavailable: GetMetricData failed after retries (Throttling)" in note["Message"]


def test_the_aggregate_step_reports_a_permanent_cloudwatch_fault_at_once(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor import aggregate as aggregate_entry
    from lambdas.trace_processor import runtime

    plane, sfn = fanout_plane
    # GIVEN a fanned-out job and GetMetricData denied (a fault that does not pass by retrying)
    job = "sysm-fanout-denied"
    payload = _fanned_out(plane, sfn, traces_dir, job)
    cloudwatch = runtime.clients().cloudwatch
    assert cloudwatch is not None
    with Stubber(cloudwatch) as stubber:
        stubber.add_client_error(
            "get_metric_data",
            service_error_code="AccessDenied",
            service_message="not authorized to perform: cloudwatch:GetMetricData",
            http_status_code=403,
        )
        # WHEN the step's first attempt runs, with retries left
        outcome = aggregate_entry.handler({**payload, "attempt": 0}, LambdaContext())
        stubber.assert_no_pending_responses()
    # THEN it publishes at once, with the system section unavailable and the reason, instead of retrying
    assert outcome["action"] == "reported"
    summary = _read(plane, job, "summary.json")
    assert summary["system"]["status"] == "unavailable"
    assert "GetMetricData denied (AccessDenied)" in summary["system"]["reason"]
    assert _read(plane, job, "system.json")["status"] == "unavailable"
    (note,) = plane.notifications()
    assert "System metrics: unavailable: " in note["Message"]
    assert "AccessDenied" in note["Message"]


def test_the_aggregate_reads_no_cloudwatch_for_a_job_description_it_was_not_sent(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor import aggregate as aggregate_entry
    from lambdas.trace_processor import runtime
    from lambdas.trace_processor.fanout import FanoutInputError

    plane, sfn = fanout_plane
    # GIVEN a fanned-out job's genuine input with another job's description swapped in (its hosts and times)
    payload = _fanned_out(plane, sfn, traces_dir, "sysm-forged")
    forged = {**payload, "job": {**payload["job"], "TrainingJobName": "someone-elses-job"}, "attempt": 0}
    cloudwatch = runtime.clients().cloudwatch
    assert cloudwatch is not None
    calls: list[str] = []

    def count(model: Any, **_: Any) -> None:
        calls.append(model.name)

    cloudwatch.meta.events.register("before-call.cloudwatch.*", count)
    # WHEN the aggregate step runs THEN it refuses before any CloudWatch call (before, the forged description's
    # hosts were looked up first) and sends nothing
    try:
        with pytest.raises(FanoutInputError, match="is not what the processor sent"):
            aggregate_entry.handler(forged, LambdaContext())
    finally:
        cloudwatch.meta.events.unregister("before-call.cloudwatch.*", count)
    assert calls == []
    assert plane.notifications() == []


def test_an_aggregate_input_without_an_attempt_is_its_last(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor import aggregate as aggregate_entry
    from lambdas.trace_processor import runtime
    from lambdas.trace_processor.fanout import FanoutInputError

    plane, sfn = fanout_plane
    # GIVEN the input of an execution started under the previous definition (no "attempt": no retry is known
    # to follow) and GetMetricData throttled
    job = "sysm-fanout-legacy"
    payload = _fanned_out(plane, sfn, traces_dir, job)
    assert "attempt" not in payload
    cloudwatch = runtime.clients().cloudwatch
    assert cloudwatch is not None
    # WHEN an attempt that is not a retry count arrives THEN it is a clear input error, before any read
    with Stubber(cloudwatch), pytest.raises(FanoutInputError, match="not a retry count"):
        aggregate_entry.handler({**payload, "attempt": "0"}, LambdaContext())
    assert plane.notifications() == []
    with Stubber(cloudwatch) as stubber:
        stubber.add_client_error("get_metric_data", service_error_code="Throttling", http_status_code=400)
        # WHEN it runs without an attempt
        outcome = aggregate_entry.handler(payload, LambdaContext())
        stubber.assert_no_pending_responses()
    # THEN it publishes, as the step always did, stating the metrics unavailable (it cannot count on a retry)
    assert outcome["action"] == "reported"
    assert _read(plane, job, "summary.json")["system"]["status"] == "unavailable"
