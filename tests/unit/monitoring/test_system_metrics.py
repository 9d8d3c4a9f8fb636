"""System metrics for the report: GetMetricData against moto (seeded with PutMetricData), Debugger's
system rules, console links and the failed-job notification text."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import jsonschema
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from lambdas.trace_processor.system_metrics import fetch_system_metrics
from profstack.jobs import links as job_links
from profstack.jobs.instance_metrics import (
    MAX_DATAPOINTS_PER_CALL,
    HostMetrics,
    Series,
    SystemMetrics,
    batches,
    choose_period,
    job_window,
    metric_queries,
)
from profstack.jobs.instance_rules import SYSTEM_RULE_DEFAULTS, system_findings, system_thresholds
from profstack.jobs.instances import hosts_of
from tests.conftest import EVENTS_DIR, REPO_ROOT

NOW = datetime.now(UTC).replace(second=0, microsecond=0)
START = NOW - timedelta(minutes=60)
END = NOW - timedelta(minutes=5)
NS = "/aws/sagemaker/TrainingJobs"


def _describe(job: str = "resnet-1", **resource: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": job,
        "TrainingJobStatus": "Completed",
        "ResourceConfig": resource or {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
        "CreationTime": START - timedelta(minutes=5),
        "TrainingStartTime": START,
        "TrainingEndTime": END,
    }


def _seed(cw: Any, host: str, metric: str, values: list[float], *, start: datetime = START) -> None:
    data = [
        {
            "MetricName": metric,
            "Dimensions": [{"Name": "Host", "Value": host}],
            "Timestamp": start + timedelta(minutes=i),
            "Value": v,
        }
        for i, v in enumerate(values)
    ]
    for i in range(0, len(data), 500):
        cw.put_metric_data(Namespace=NS, MetricData=data[i : i + 500])


@pytest.fixture
def cloudwatch(aws_credentials: None) -> Any:
    with mock_aws():
        yield boto3.client("cloudwatch", region_name="us-east-1")


# --- GetMetricData -> per-host, per-GPU series ------------------------------------------------------------------


def test_metrics_are_read_per_host_and_divided_by_the_hosts_counts(cloudwatch: Any) -> None:
    # GIVEN SageMaker-style sums for a 2 x ml.p4d.24xlarge job (8 GPUs, 96 vCPUs per host)
    minutes = 50
    _seed(cloudwatch, "resnet-1/algo-1", "GPUUtilization", [8 * 60.0] * minutes)
    _seed(cloudwatch, "resnet-1/algo-1", "GPUMemoryUtilization", [8 * 40.0] * minutes)
    _seed(cloudwatch, "resnet-1/algo-1", "CPUUtilization", [96 * 25.0] * minutes)
    _seed(cloudwatch, "resnet-1/algo-1", "MemoryUtilization", [30.0] * minutes)
    _seed(cloudwatch, "resnet-1/algo-2", "GPUUtilization", [8 * 10.0] * minutes)
    _seed(cloudwatch, "other-job/algo-1", "GPUUtilization", [800.0] * minutes)  # not this job
    # WHEN the processor reads them
    m = fetch_system_metrics(cloudwatch, _describe(), now=NOW)
    # THEN each host's series is per GPU / per vCPU, over the job's window
    h1, h2 = m.hosts
    assert (h1.host, h1.gpus, h1.vcpus) == ("algo-1", 8, 96)
    assert set(h1.get("GPUUtilization").values) == {60.0}  # type: ignore[union-attr]
    assert set(h1.get("GPUMemoryUtilization").values) == {40.0}  # type: ignore[union-attr]
    assert set(h1.get("CPUUtilization").values) == {25.0}  # type: ignore[union-attr]
    assert set(h1.get("MemoryUtilization").values) == {30.0}  # type: ignore[union-attr]
    assert h1.get("DiskUtilization") is None  # not published: absent, not zero
    assert set(h2.get("GPUUtilization").values) == {10.0}  # type: ignore[union-attr]
    assert len(h1.get("GPUUtilization").timestamps) == minutes  # type: ignore[union-attr]
    assert m.period_s == 60
    assert m.complete
    assert not any("unverified" in w for w in m.warnings)  # the p4d row is checked against DescribeInstanceTypes
    json.dumps(m.to_json())  # serialisable for summary.json


def test_a_host_of_an_unverified_table_row_is_divided_and_flagged(cloudwatch: Any) -> None:
    # GIVEN a job on the one type no AWS source in the repository confirms (4 GPUs per the product page)
    _seed(cloudwatch, "gb-1/algo-1", "GPUUtilization", [4 * 50.0] * 10)
    m = fetch_system_metrics(
        cloudwatch, _describe("gb-1", InstanceType="ml.p6e-gb200.36xlarge", InstanceCount=1), now=NOW
    )
    # THEN it is divided by that count, and the warning says the count is unverified
    assert set(m.hosts[0].get("GPUUtilization").values) == {50.0}  # type: ignore[union-attr]
    assert any("unverified" in w for w in m.warnings)


def test_unknown_gpu_counts_keep_raw_sums_and_say_so(cloudwatch: Any) -> None:
    _seed(cloudwatch, "odd/algo-1", "GPUUtilization", [350.0] * 10)
    m = fetch_system_metrics(cloudwatch, _describe("odd", InstanceType="ml.p9.96xlarge", InstanceCount=1), now=NOW)
    series = m.hosts[0].get("GPUUtilization")
    assert series is not None
    assert not series.normalised
    assert set(series.values) == {350.0}
    assert any("raw sum" in w for w in m.warnings)
    # AND no per-GPU rule judges such a host
    assert [f for f in system_findings(m, _describe()) if f["rule_id"] == "LowGPUUtilization"] == []


def test_a_job_without_metrics_is_reported_as_such(cloudwatch: Any) -> None:
    m = fetch_system_metrics(cloudwatch, _describe("silent"), now=NOW)
    assert all(not h.series for h in m.hosts)
    assert any("no instance metrics" in w for w in m.warnings)


def _stubbed(error: str) -> Any:
    client = boto3.client("cloudwatch", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_client_error("get_metric_data", service_error_code=error, http_status_code=400)
    stubber.activate()
    return client


def test_access_denied_gives_an_incomplete_result_but_throttling_is_retried() -> None:
    m = fetch_system_metrics(_stubbed("AccessDenied"), _describe(), now=NOW)
    assert not m.complete
    assert any("cloudwatch:GetMetricData" in w for w in m.warnings)
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError):
        fetch_system_metrics(_stubbed("Throttling"), _describe(), now=NOW)


def test_long_and_old_jobs_stay_within_getmetricdata_limits() -> None:
    # a 30-day job on 64 hosts
    start, end = NOW - timedelta(days=40), NOW - timedelta(days=10)
    period = choose_period(start, end, NOW)
    assert period % 60 == 0
    assert period >= 300  # 1-minute data is gone after 15 days
    points = int((end - start).total_seconds() // period) + 1
    assert points <= 1441
    queries = metric_queries("big", hosts_of({"InstanceType": "ml.p5.48xlarge", "InstanceCount": 64}), period)
    assert len(queries) == 64 * 5
    for batch in batches(queries, points):
        assert len(batch) <= 500
        assert len(batch) * points <= MAX_DATAPOINTS_PER_CALL
    # AND the window of a running job ends now
    _, e = job_window({"TrainingStartTime": NOW - timedelta(hours=1)}, NOW)
    assert e == NOW


# --- Debugger's system rules ---------------------------------------------------------------------------------


def _metrics(**series: list[float]) -> SystemMetrics:
    t0 = START.timestamp()
    n = max(len(v) for v in series.values())
    stamps = tuple(t0 + 60 * i for i in range(n))
    built = {name: Series(name, stamps[: len(v)], tuple(v), True, None) for name, v in series.items()}  # type: ignore[arg-type]
    host = HostMetrics("algo-1", "ml.g5.xlarge", 1, 4, built)
    return SystemMetrics("j", t0, t0 + 60 * n, 60, (host,), True)


def _rules(m: SystemMetrics, **overrides: float) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in system_findings(m, {}, overrides):
        out.setdefault(f["rule_id"], []).append(f)
    return out


PATIENCE = int(SYSTEM_RULE_DEFAULTS["system_patience_minutes"])


def test_low_gpu_utilization_uses_debuggers_p95_and_p5() -> None:
    warm = [0.0] * PATIENCE  # start-up is skipped (patience)
    assert "LowGPUUtilization" not in _rules(_metrics(GPUUtilization=warm + [80.0] * 60))
    low = _rules(_metrics(GPUUtilization=warm + [60.0] * 60))["LowGPUUtilization"]
    assert low[0]["evidence"]["p95_pct"] == 60.0
    assert "below 70%" in low[0]["message"]
    spiky = _rules(_metrics(GPUUtilization=warm + [95.0] * 50 + [2.0] * 10))["LowGPUUtilization"]
    assert "fluctuates" in spiky[0]["message"]
    # configurable
    assert "LowGPUUtilization" not in _rules(_metrics(GPUUtilization=warm + [60.0] * 60), system_low_gpu_p95_pct=50)


def test_cpu_bottleneck_needs_gpu_low_and_cpu_high_more_than_half_the_time() -> None:
    warm = [0.0] * PATIENCE
    busy = _metrics(GPUUtilization=warm + [5.0] * 40, CPUUtilization=warm + [95.0] * 40)
    assert _rules(busy)["CPUBottleneck"][0]["evidence"]["time_pct"] == 100.0
    half = _metrics(GPUUtilization=warm + [5.0] * 20 + [80.0] * 20, CPUUtilization=warm + [95.0] * 40)
    assert "CPUBottleneck" not in _rules(half)  # exactly 50 % is not more than half


def test_io_bottleneck_is_a_marked_proxy_without_iowait() -> None:
    warm = [0.0] * PATIENCE
    idle = _metrics(GPUUtilization=warm + [3.0] * 40, CPUUtilization=warm + [10.0] * 40)
    (finding,) = _rules(idle)["IOBottleneck"]
    assert finding["evidence"]["proxy"] is True
    assert finding["severity"] == "info"
    assert "inferred" in finding["message"]
    # WITH iowait the Debugger definition applies
    m = _metrics(GPUUtilization=warm + [3.0] * 40, CPUUtilization=warm + [10.0] * 40)
    gpu = m.hosts[0].get("GPUUtilization")
    assert gpu is not None
    iowait = {"algo-1": Series("CPUUtilization", gpu.timestamps, tuple([0.0] * PATIENCE + [70.0] * 40), True, None)}
    measured = [f for f in system_findings(m, {}, iowait=iowait) if f["rule_id"] == "IOBottleneck"]
    assert measured[0]["evidence"]["proxy"] is False
    assert measured[0]["severity"] == "warning"


def test_gpu_memory_increase_uses_a_moving_average() -> None:
    warm = [0.0] * PATIENCE
    flat = [50.0] * 40
    rising = [40.0 + i * 0.5 for i in range(40)]  # +19.5 points
    noisy = [50.0 + (3.0 if i % 2 else -3.0) for i in range(40)]  # spikes, no trend
    assert "GPUMemoryIncrease" not in _rules(_metrics(GPUMemoryUtilization=warm + flat))
    assert "GPUMemoryIncrease" not in _rules(_metrics(GPUMemoryUtilization=warm + noisy))
    (f,) = _rules(_metrics(GPUMemoryUtilization=warm + rising))["GPUMemoryIncrease"]
    assert f["evidence"]["increase_pct"] > 5


def test_overall_system_usage_reports_percentiles() -> None:
    (f,) = _rules(_metrics(GPUUtilization=[float(i) for i in range(101)]))["OverallSystemUsage"]
    assert f["evidence"]["gpu_p50_pct"] == 50.0
    assert f["evidence"]["gpu_p99_pct"] == 99.0
    assert f["severity"] == "info"


def test_max_initialization_time_from_the_real_failed_event() -> None:
    detail = json.loads((EVENTS_DIR / "sagemaker_training_job_failed.json").read_text())["detail"]
    # Creation 1796562605000 -> Training 1796563200000: 9.9 min, under Debugger's 20
    assert system_findings(None, detail) == []
    (f,) = system_findings(None, detail, {"system_max_initialization_minutes": 5})
    assert f["rule_id"] == "MaxInitializationTime"
    assert f["evidence"]["initialization_minutes"] == 9.9
    # A job that never reached Training
    never = {**detail, "SecondaryStatusTransitions": detail["SecondaryStatusTransitions"][:1]}
    (g,) = system_findings(None, never)
    assert g["evidence"]["reached_training"] is False


def test_findings_have_the_trace_rules_shape() -> None:
    schema = json.loads((REPO_ROOT / "profstack" / "analysis" / "summary.schema.json").read_text())
    finding_schema = {**schema["$defs"]["finding"], "$defs": schema["$defs"]}
    warm = [0.0] * PATIENCE
    m = _metrics(
        GPUUtilization=warm + [3.0] * 40,
        CPUUtilization=warm + [10.0] * 40,
        GPUMemoryUtilization=warm + [40.0 + i for i in range(40)],
    )
    detail = json.loads((EVENTS_DIR / "sagemaker_training_job_failed.json").read_text())["detail"]
    found = system_findings(m, detail, {"system_max_initialization_minutes": 1})
    assert {f["rule_id"] for f in found} == {"LowGPUUtilization", "IOBottleneck", "GPUMemoryIncrease",
                                             "OverallSystemUsage", "MaxInitializationTime"}  # fmt: skip
    for f in found:
        jsonschema.validate(f, finding_schema)
        assert f["evidence"]["source"] == "cloudwatch"


def test_unknown_threshold_keys_are_ignored_and_known_ones_parsed() -> None:
    th = system_thresholds({"system_cpu_bottleneck_cpu_pct": 80, "low_gpu_util_busy_pct": 1})
    assert th["system_cpu_bottleneck_cpu_pct"] == 80.0
    assert "low_gpu_util_busy_pct" not in th


# --- links and the failed-job notification --------------------------------------------------------------------


def test_failed_notification_carries_failure_reason_and_console_links() -> None:
    detail = json.loads((EVENTS_DIR / "sagemaker_training_job_failed.json").read_text())["detail"]
    links = job_links.job_links("us-east-1", "profstack", detail["TrainingJobName"])
    subject, body = job_links.notification_text(detail, links, ["Report: s3://b/reports/alice/x/report.html"])
    assert subject.startswith("ProfStack: resnet-ddp-2026-11-29-13-10-05-123 Failed: AlgorithmError")
    assert len(subject) <= 100
    assert "exited with code 1" in body
    assert "FailureReason:" in body
    assert "Report: s3://" in body
    assert "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#alarmsV2:" in body
    assert "profstack%2Fjob%2Fresnet-ddp-2026-11-29-13-10-05-123%2F" in links["Alarms"]
    assert "%2Faws%2Fsagemaker%2FTrainingJobs" in links["Instance metrics"]
    assert "$252Faws$252Fsagemaker$252FTrainingJobs" in links["Logs"]
    # AND a completed job's text has no failure section
    completed = json.loads((EVENTS_DIR / "sagemaker_training_job_completed.json").read_text())["detail"]
    assert "FailureReason" not in job_links.notification_text(completed, links)[1]


def test_failure_reason_is_bounded_and_cleaned() -> None:
    reason = job_links.failure_reason({"FailureReason": "bad\x00\x1b[31m" + "x" * 5000})
    assert reason is not None
    assert len(reason) == job_links.MAX_FAILURE_REASON
    assert "\x00" not in reason
    assert "\x1b" not in reason
    assert job_links.failure_reason({"FailureReason": "  "}) is None


def test_console_domains_per_partition() -> None:
    assert job_links.console_base("cn-north-1") == "https://cn-north-1.console.amazonaws.cn"
    assert job_links.console_base("us-gov-west-1") == "https://us-gov-west-1.console.amazonaws-us-gov.com"
    assert job_links.job_links("", "p", "j") == {}
