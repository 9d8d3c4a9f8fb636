"""The processor's system view without AWS: statuses, the bounded system.json, the fan-out's copy of the job
description, the one findings assembler, and the e-mail's size limits (issue 15, items 3-5)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.notification import MESSAGE_MAX_BYTES, SUBJECT_MAX, notification_text
from lambdas.trace_processor.system_view import (
    MAX_SYSTEM_JSON_POINTS,
    SystemView,
    bounded,
    classify,
    describe_for_fanout,
    summary_warnings,
)
from profstack.analysis.summary import add_findings
from profstack.jobs import links as job_links
from profstack.jobs.instance_metrics import MAX_POINTS_PER_SERIES, METRICS, HostMetrics, Series, SystemMetrics
from profstack.jobs.instance_rules import system_findings
from tests.conftest import EVENTS_DIR

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC).timestamp()


def _metrics(hosts: int, points: int, *, complete: bool = True, value: float = 42.0) -> SystemMetrics:
    stamps = tuple(T0 + 60 * i for i in range(points))
    series = {m: Series(m, stamps, tuple([value] * points), True, None) for m in METRICS} if points else {}
    return SystemMetrics(
        "j",
        T0,
        T0 + 60 * max(points, 1),
        60,
        tuple(HostMetrics(f"algo-{i + 1}", "ml.g5.12xlarge", 4, 48, series) for i in range(hosts)),
        complete,
    )


def test_statuses_tell_no_data_from_unavailable_and_partial() -> None:
    # GIVEN what fetch_system_metrics can return THEN each maps to one stated status
    assert classify(_metrics(2, 10)) == ("ok", None)
    status, reason = classify(_metrics(2, 0))
    assert status == "no_data"
    assert reason is not None
    assert "holds no instance metrics" in reason
    assert classify(_metrics(0, 0))[0] == "no_data"  # no hosts: nothing to read, said so
    denied = SystemMetrics("j", T0, T0 + 60, 60, _metrics(1, 0).hosts, False, ("GetMetricData denied (AccessDenied)",))
    assert classify(denied) == ("unavailable", "GetMetricData denied (AccessDenied)")
    partial = SystemMetrics("j", T0, T0 + 600, 60, _metrics(1, 10).hosts, False, ("GetMetricData returned partial",))
    assert classify(partial)[0] == "partial"


def test_system_json_is_bounded_for_the_biggest_job() -> None:
    # GIVEN 512 hosts (profstack.jobs.instances.MAX_HOSTS) x 5 metrics x 1440 points: 3.7 M points
    big = _metrics(512, MAX_POINTS_PER_SERIES)
    # WHEN bounded for system.json
    small, downsampled = bounded(big)
    # THEN it holds at most MAX_SYSTEM_JSON_POINTS in all, every host and metric still there, values averaged
    total = sum(len(s.values) for h in small.hosts for s in h.series.values())
    assert downsampled
    assert total <= MAX_SYSTEM_JSON_POINTS
    assert len(small.hosts) == 512
    assert all(set(h.series) == set(METRICS) for h in small.hosts)
    assert {v for h in small.hosts for s in h.series.values() for v in s.values} == {42.0}
    assert len(json.dumps(small.to_json())) < 8 * 2**20
    # AND a normal job is stored untouched
    normal = _metrics(2, 600)
    assert bounded(normal) == (normal, False)


def test_downsampling_averages_and_keeps_the_period_grid() -> None:
    stamps = tuple(T0 + 60 * i for i in range(10))
    gpu = Series("GPUUtilization", stamps, tuple(float(i) for i in range(10)), True, None)
    m = SystemMetrics("j", T0, T0 + 600, 60, (HostMetrics("algo-1", None, None, None, {"GPUUtilization": gpu}),), True)
    small, downsampled = bounded(m, max_points=5)
    series = small.hosts[0].series["GPUUtilization"]
    assert downsampled
    assert series.values == (0.5, 2.5, 4.5, 6.5, 8.5)
    assert series.timestamps == stamps[::2]


def test_the_fanout_copy_of_the_job_is_json_safe_bounded_and_judged_alike() -> None:
    # GIVEN the real Failed event's job, with 300 status transitions carrying long messages
    detail = json.loads((EVENTS_DIR / "sagemaker_training_job_failed.json").read_text())["detail"]
    created = datetime(2026, 11, 29, 13, 10, tzinfo=UTC)
    describe: dict[str, Any] = {
        **detail,
        "CreationTime": created,
        "TrainingStartTime": created + timedelta(minutes=25),
        "SecondaryStatusTransitions": [
            {"Status": "Starting", "StartTime": created, "StatusMessage": "x" * 10_000},
            {"Status": "Training", "StartTime": created + timedelta(minutes=25)},
            *[{"Status": "Training", "StartTime": created + timedelta(minutes=26)}] * 298,
        ],
        "FailureReason": "y" * 50_000,
        "HyperParameters": {"secret-ish": "not carried"},
    }
    # WHEN copied into the execution input
    copy = describe_for_fanout(describe)
    # THEN it is plain JSON, small, without keys the aggregate step does not need
    text = json.dumps(copy)
    assert len(text) < 16_000
    assert "HyperParameters" not in copy
    assert copy["CreationTime"] == created.timestamp()
    assert len(copy["SecondaryStatusTransitions"]) == 50
    assert len(copy["SecondaryStatusTransitions"][0]["StatusMessage"]) == 300
    assert len(copy["FailureReason"]) == job_links.MAX_FAILURE_REASON
    # AND the system rules judge the copy as they judge the original (MaxInitializationTime: 25 min > 20)
    original = system_findings(None, describe)
    assert [f["rule_id"] for f in original] == ["MaxInitializationTime"]
    assert system_findings(None, json.loads(text)) == original


def test_findings_join_in_severity_order_behind_unreadable_files_and_replace_their_earlier_copies() -> None:
    summary: dict[str, Any] = {
        "findings": [
            {"rule_id": "UnreadableTraceFiles", "severity": "warning"},
            {"rule_id": "CPUBound", "severity": "critical"},
            {"rule_id": "OverallSystemUsage", "severity": "info", "evidence": {"source": "cloudwatch"}},
            {"rule_id": "BatchSize", "severity": "info"},
        ]
    }

    def ours(f: Any) -> bool:
        return bool((f.get("evidence") or {}).get("source") == "cloudwatch")

    new = [
        {"rule_id": "LowGPUUtilization", "severity": "warning", "evidence": {"source": "cloudwatch"}},
        {"rule_id": "OverallSystemUsage", "severity": "info", "evidence": {"source": "cloudwatch"}},
    ]
    add_findings(summary, new, replace=ours)
    add_findings(summary, new, replace=ours)  # a re-delivery
    assert [f["rule_id"] for f in summary["findings"]] == [
        "UnreadableTraceFiles", "CPUBound", "LowGPUUtilization", "BatchSize", "OverallSystemUsage",
    ]  # fmt: skip


def test_warnings_name_the_state_once() -> None:
    view = SystemView("unavailable", "GetMetricData failed after retries (Throttling): Rate exceeded", None)
    (warning,) = summary_warnings(view)
    assert warning == {
        "source": "cloudwatch",
        "error_type": "SystemMetricsUnavailable",
        "message": "system metrics unavailable: GetMetricData failed after retries (Throttling): Rate exceeded",
        "fatal": False,
    }
    assert summary_warnings(SystemView("ok", None, _metrics(1, 10))) == []


CTX = JobContext(job="j-1", status="Failed", user="alice", trace_bucket="bkt", end_time_s=T0, tensorboard=None,
                 region="us-east-1")  # fmt: skip
LINKS = job_links.job_links("us-east-1", "profstack", "j-1")


def _huge_summary(n: int, text: str) -> dict[str, Any]:
    finding = {"rule_id": "R", "severity": "warning", "message": text * 50, "recommendation": text * 50, "ranks": []}
    return {"findings": [finding] * n, "inputs": [], "ranks": []}


@settings(max_examples=60, deadline=None)
@given(reason=st.text(min_size=1, max_size=3000), text=st.text(min_size=1, max_size=400))
def test_the_email_fits_sns_whatever_the_failure_reason_and_findings(reason: str, text: str) -> None:
    # GIVEN any FailureReason (SageMaker passes the user's own error text) and very long findings
    describe = {"TrainingJobName": "j-1", "TrainingJobStatus": "Failed", "FailureReason": reason}
    summary = _huge_summary(5, text)
    # WHEN the e-mail is built
    subject, message = notification_text(CTX, summary, "s3://bkt/r.html", describe=describe, links=LINKS)
    # THEN the subject is what SNS accepts: printable ASCII, one line, under 100 characters
    assert len(subject) <= SUBJECT_MAX < 100
    assert all(" " <= ch <= "~" for ch in subject)
    # AND the message is bounded, and still ends with every console link
    assert len(message.encode()) <= MESSAGE_MAX_BYTES
    for label, url in LINKS.items():
        assert f"{label}: {url}" in message
    assert "Report: s3://bkt/r.html" in message


def test_a_long_email_keeps_its_failure_and_links_and_says_it_was_shortened() -> None:
    describe = {"TrainingJobName": "j-1", "TrainingJobStatus": "Failed", "FailureReason": "AlgorithmError: boom"}
    subject, message = notification_text(CTX, _huge_summary(5, "é" * 400), "s3://bkt/r.html", describe=describe,
                                         links=LINKS)  # fmt: skip
    assert subject == "ProfStack: j-1 Failed, 5 findings: AlgorithmError: boom"
    assert len(message.encode()) <= MESSAGE_MAX_BYTES
    assert message.startswith("Training job j-1 failed.\n\nFailureReason:\n  AlgorithmError: boom")
    assert "shortened to fit the notification" in message
    assert message.rstrip().endswith(f"Logs: {LINKS['Logs']}")


class _FailingCloudWatch:
    """A CloudWatch client whose GetMetricData raises ``exc`` (after botocore's retries, as the caller sees it)."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def get_metric_data(self, **_: Any) -> Any:
        raise self.exc


def _client_error(code: str, status: int) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetMetricData"
    )


def _describe() -> dict[str, Any]:
    start = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    return {
        "TrainingJobName": "j",
        "TrainingJobStatus": "Completed",
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1},
        "TrainingStartTime": start,
        "TrainingEndTime": start + timedelta(minutes=30),
    }


def test_transient_cloudwatch_faults_retry_before_the_last_delivery_and_are_stated_on_it() -> None:
    import pytest
    from botocore.exceptions import EndpointConnectionError

    from lambdas.trace_processor.errors import SystemMetricsTransientError, failure_reason
    from lambdas.trace_processor.system_view import is_transient, read_system_view

    now = datetime(2026, 12, 1, tzinfo=UTC)
    transient = [
        _client_error("Throttling", 400),
        _client_error("InternalFailure", 500),
        _client_error("Whatever", 503),
        EndpointConnectionError(endpoint_url="https://monitoring.us-east-1.amazonaws.com"),
    ]
    permanent = [_client_error("AccessDenied", 403), _client_error("InvalidParameterValue", 400)]
    for exc in transient:
        assert is_transient(exc), exc
        # GIVEN a delivery that is not the last WHEN CloudWatch fails transiently THEN the record is retried
        with pytest.raises(SystemMetricsTransientError) as raised:
            read_system_view(
                _FailingCloudWatch(exc), _describe(), region="us-east-1", name_prefix="profstack",  # type: ignore[arg-type]
                thresholds={}, now=now, retry_transient=True,
            )  # fmt: skip
        assert failure_reason(raised.value) == "cloudwatch_transient"
        # AND on the last delivery the report is written with the system section unavailable
        view = read_system_view(
            _FailingCloudWatch(exc), _describe(), region="us-east-1", name_prefix="profstack",  # type: ignore[arg-type]
            thresholds={}, now=now, retry_transient=False,
        )  # fmt: skip
        assert view.status == "unavailable"
    for exc in permanent:
        # GIVEN a fault that will not pass (denied, bad request) THEN no retry is asked for, on any delivery
        assert not is_transient(exc), exc
        view = read_system_view(
            _FailingCloudWatch(exc), _describe(), region="us-east-1", name_prefix="profstack",  # type: ignore[arg-type]
            thresholds={}, now=now, retry_transient=True,
        )  # fmt: skip
        assert view.status == "unavailable"
        assert view.reason is not None


_FANOUT_ENV = {"TRACE_BUCKET": "b-x-y", "IDEMPOTENCY_TABLE": "t", "TOPIC_ARN": "arn:aws:sns:us-east-1:1:t"}


@given(max_attempts=st.integers(1, 20), retry_count=st.integers(0, 40))
@settings(max_examples=200, deadline=None)
def test_the_aggregate_steps_last_attempt_is_the_one_after_its_last_retry(max_attempts: int, retry_count: int) -> None:
    from lambdas.trace_processor.env import ProcessorEnv
    from lambdas.trace_processor.fanout import final_attempt

    # GIVEN AGGREGATE_MAX_ATTEMPTS runs in all (MaxAttempts = runs - 1 retries) and $$.State.RetryCount so far
    env = ProcessorEnv.from_environ({**_FANOUT_ENV, "AGGREGATE_MAX_ATTEMPTS": str(max_attempts)})
    # THEN the run is the last exactly when no retry is left, so a raise is always retried
    assert final_attempt({"attempt": retry_count}, env) is (retry_count >= max_attempts - 1)


def test_an_aggregate_attempt_that_is_unknown_or_malformed() -> None:
    import pytest

    from lambdas.trace_processor.env import EnvError, ProcessorEnv
    from lambdas.trace_processor.fanout import FanoutInputError, final_attempt

    with_count = ProcessorEnv.from_environ({**_FANOUT_ENV, "AGGREGATE_MAX_ATTEMPTS": "4"})
    without = ProcessorEnv.from_environ(_FANOUT_ENV)
    # GIVEN no attempt in the input (an older definition) or no count in the environment (not the aggregate
    # function: a direct call, the bench) THEN no retry is known to follow: the run is the last
    assert final_attempt({}, with_count) is True
    assert final_attempt({"attempt": 0}, without) is True
    # GIVEN an attempt that is no retry count THEN a clear input error, not a guess
    for bad in ("0", -1, 1.5, True, [0]):
        with pytest.raises(FanoutInputError, match="not a retry count"):
            final_attempt({"attempt": bad}, with_count)
    # GIVEN a count the state machine could not have (0 runs, or more than the bound) THEN the env is refused
    for bad_count in ("0", "21", "three"):
        with pytest.raises(EnvError, match="AGGREGATE_MAX_ATTEMPTS"):
            ProcessorEnv.from_environ({**_FANOUT_ENV, "AGGREGATE_MAX_ATTEMPTS": bad_count})


def test_the_aggregate_function_will_not_start_without_its_attempt_count() -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    # GIVEN the aggregate function's environment without AGGREGATE_MAX_ATTEMPTS WHEN it cold-starts
    env = {k: v for k, v in os.environ.items() if k != "AGGREGATE_MAX_ATTEMPTS"} | _FANOUT_ENV
    env["POWERTOOLS_METRICS_NAMESPACE"] = "ProfStack"
    run = subprocess.run(
        [sys.executable, "-c", "import lambdas.trace_processor.aggregate"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # THEN it fails loudly, naming the variable, instead of guessing which attempt is its last
    assert run.returncode != 0
    assert "EnvError: AGGREGATE_MAX_ATTEMPTS is not set" in run.stderr
    # AND with it, it starts
    ok = subprocess.run(
        [sys.executable, "-c", "import lambdas.trace_processor.aggregate"],
        cwd=REPO_ROOT, env=env | {"AGGREGATE_MAX_ATTEMPTS": "4"}, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
