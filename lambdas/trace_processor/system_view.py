"""The job's system view in the processor: its CloudWatch instance metrics (profstack/jobs/instance_metrics.py,
fetched by system_metrics.py here), Debugger's system rules on them (profstack.jobs.instance_rules), the console
links (profstack.jobs.links), and how they join the summary, the report, system.json and the e-mail
(outputs.publish_report).

Read once per job, after DescribeTrainingJob: in pipeline.process_job for a one-Lambda or no-traces job, in
fanout.aggregate for a fanned-out job (from the job description routing.start_fanout put in the execution
input, so the aggregate step needs no SageMaker permission).

CloudWatch never costs the job its report. The client retries throttling and transient errors (botocore's
standard mode, aws.BOTO_CONFIG); a transient fault that still fails, before the last try, raises
SystemMetricsTransientError so the work is retried: on an SQS delivery before the queue's last
(MAX_RECEIVE_COUNT) the record fails and SQS delivers it again; in the fan-out aggregate step, on an attempt
before its last (`$$.State.RetryCount` against AGGREGATE_MAX_ATTEMPTS, fanout.final_attempt) the step fails and
Step Functions retries it on that error name. Both read the view before writing any output. What fails on the
last delivery or attempt, or for good (access denied), makes the system section `unavailable`, with the reason in
`summary.system.reason` and a `SystemMetricsUnavailable` warning, and system.json says the same: it is never
stored as if the job had no metrics. A job CloudWatch holds no metrics for (shorter than the one-minute
period, no hosts, nothing published) is the distinct status `no_data`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from lambdas.trace_processor.aws import TRANSIENT_CODES, error_code
from lambdas.trace_processor.errors import SystemMetricsTransientError
from lambdas.trace_processor.system_metrics import fetch_system_metrics
from profstack.analysis.summary import SystemSection, SystemStatus
from profstack.jobs.instance_metrics import MAX_POINTS_PER_SERIES, HostMetrics, Series, SystemMetrics
from profstack.jobs.instance_rules import system_findings
from profstack.jobs.links import MAX_FAILURE_REASON, job_links

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

    from lambdas.trace_processor.aws import Clients
    from lambdas.trace_processor.env import ProcessorEnv
    from lambdas.trace_processor.job import JobContext

SYSTEM_FILE = "system.json"
#: system.json holds at most this many points in all (about 20 bytes each: a few MB for the biggest job);
#: each series also keeps at most MAX_POINTS_PER_SERIES (1440). Beyond, series are averaged down evenly.
MAX_SYSTEM_JSON_POINTS = 200_000
#: the source of the summary warnings this module adds (and replaces on a re-delivery)
WARNING_SOURCE = "cloudwatch"
MAX_WARNINGS = 10
#: DescribeTrainingJob keys the fan-out carries to the aggregate step (routing.start_fanout)
_DESCRIBE_KEYS = ("TrainingJobName", "TrainingJobStatus", "SecondaryStatus", "FailureReason", "ResourceConfig",
                  "CreationTime", "TrainingStartTime", "TrainingEndTime", "SecondaryStatusTransitions")  # fmt: skip
_MAX_TRANSITIONS = 50
_MAX_STATUS_MESSAGE = 300


def _logger() -> Any:
    # Imported when used: telemetry creates Powertools' Logger and Metrics, which read the environment once;
    # routing imports this module, and must stay importable before the function's environment is set.
    from lambdas.trace_processor.telemetry import logger

    return logger


@dataclass(frozen=True)
class SystemView:
    status: SystemStatus
    reason: str | None
    metrics: SystemMetrics | None  # None only when unavailable
    findings: tuple[dict[str, Any], ...] = ()
    links: Mapping[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.status in ("ok", "no_data")


def _no_data_reason(m: SystemMetrics) -> str:
    if not m.hosts:
        return "the job's resource configuration names no host, so there are no instance metrics to read"
    start = datetime.fromtimestamp(m.start, UTC)
    end = datetime.fromtimestamp(m.end, UTC)
    return (
        f"CloudWatch holds no instance metrics for {m.job} between {start:%Y-%m-%d %H:%M} and {end:%H:%M} UTC "
        "(a job shorter than SageMaker's one-minute period, or hosts that published none)"
    )


def classify(m: SystemMetrics) -> tuple[SystemStatus, str | None]:
    """ok / partial / no_data / unavailable, and the reason when not ok."""
    read = any(h.series for h in m.hosts)
    if read:
        return ("ok", None) if m.complete else ("partial", "; ".join(m.warnings[:3]) or "CloudWatch answered in part")
    if not m.hosts or m.complete:
        return "no_data", _no_data_reason(m)
    return "unavailable", "; ".join(m.warnings[:3]) or "GetMetricData returned nothing usable"


def is_transient(exc: BaseException) -> bool:
    """Throttling, a 5xx, a timeout or a dropped connection: a fault that may pass (not access denied or a
    bad request)."""
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return error_code(exc) in TRANSIENT_CODES or int(status) >= 500
    return isinstance(exc, BotoConnectionError | HTTPClientError)


def read_system_view(
    cloudwatch: CloudWatchClient | None,
    describe: Mapping[str, Any],
    *,
    region: str,
    name_prefix: str,
    thresholds: Mapping[str, float],
    now: datetime,
    retry_transient: bool = False,
) -> SystemView:
    """Read the job's metrics once and judge them. Never raises for CloudWatch (see the module docstring),
    except with ``retry_transient`` (an SQS delivery or a fan-out aggregate attempt that is not the last): a
    transient failure then raises SystemMetricsTransientError, so the work is retried instead of reported
    "unavailable"."""
    job = str(describe.get("TrainingJobName") or "")
    links = job_links(region, name_prefix, job) if job else {}
    metrics: SystemMetrics | None = None
    if cloudwatch is None:
        status: SystemStatus = "unavailable"
        reason: str | None = "no CloudWatch client was configured for the processor"
    else:
        try:
            metrics = fetch_system_metrics(cloudwatch, describe, now=now)
        except (ClientError, BotoCoreError) as exc:
            if retry_transient and is_transient(exc):
                raise SystemMetricsTransientError(
                    f"GetMetricData failed transiently after retries ({error_code(exc)}); retried before it is reported"
                ) from exc
            message = str(exc)[:300]
            status, reason = "unavailable", f"GetMetricData failed after retries ({error_code(exc)}): {message}"
            _logger().warning("system metrics unavailable", extra={"job": job, "reason": reason})
        except Exception as exc:  # a defect in the metrics code must not cost the job its report
            _logger().exception("system metrics failed; the report is written without them")
            status, reason = "unavailable", f"reading the system metrics failed: {type(exc).__name__}: {exc}"[:500]
        else:
            status, reason = classify(metrics)
    judged = metrics if status in ("ok", "partial") else None
    try:
        found = system_findings(judged, describe, thresholds)
    except Exception as exc:  # the same: a rule defect becomes a warning, not a lost report
        _logger().exception("system rules failed")
        found = []
        reason = f"{reason + '; ' if reason else ''}system rules failed: {type(exc).__name__}: {exc}"[:500]
    return SystemView(status, reason, metrics, tuple(found), links)


def for_job(
    clients: Clients,
    env: ProcessorEnv,
    ctx: JobContext,
    describe: Mapping[str, Any],
    *,
    retry_transient: bool = False,
) -> SystemView:
    """``read_system_view`` with the function's client, region, name prefix and thresholds: the one call
    of the processor (pipeline.py) and of the fan-out aggregate step (fanout.py)."""
    return read_system_view(
        clients.cloudwatch,
        describe,
        region=env.region or ctx.region,
        name_prefix=env.name_prefix,
        thresholds=env.system_rule_thresholds,
        now=datetime.now(UTC),
        retry_transient=retry_transient,
    )


# --- into the summary ------------------------------------------------------------------------------------------


def _warning(error_type: str, message: str) -> dict[str, Any]:
    return {"source": WARNING_SOURCE, "error_type": error_type, "message": message[:1000], "fatal": False}


def summary_warnings(view: SystemView) -> list[dict[str, Any]]:
    """The summary `warnings[]` entries of the system view (same shape as every warning)."""
    out: list[dict[str, Any]] = []
    # no_data is a complete answer (CloudWatch holds nothing for the job): stated in `system.status` and
    # `system.reason`, in system.json and on the page, but not a warning (it loses nothing).
    kind = {"unavailable": "SystemMetricsUnavailable", "partial": "SystemMetricsPartial"}
    if view.status in kind:
        prefix = "system metrics unavailable: " if view.status == "unavailable" else ""
        out.append(_warning(kind[view.status], prefix + (view.reason or view.status)))
    # with no data at all the reason says it; the metrics' own warnings (unverified GPU counts...) judge nothing
    notes = view.metrics.warnings if view.metrics is not None and view.status != "no_data" else ()
    for w in notes[:MAX_WARNINGS]:
        if not view.reason or w not in view.reason:
            out.append(_warning("SystemMetricsWarning", w))
    return out


def summary_section(view: SystemView, *, downsampled: bool) -> SystemSection:
    m = view.metrics
    return {
        "status": view.status,
        "reason": view.reason,
        "file": SYSTEM_FILE,
        "hosts": sum(1 for h in m.hosts if h.series) if m else 0,
        "period_s": m.period_s if m else None,
        "start_s": m.start if m else None,
        "end_s": m.end if m else None,
        "complete": view.complete,
        "downsampled": downsampled,
    }


# --- system.json, bounded ---------------------------------------------------------------------------------------


def _average_down(series: Series, limit: int) -> Series:
    if len(series.values) <= limit:
        return series
    size = len(series.values) / limit
    stamps: list[float] = []
    values: list[float] = []
    for i in range(limit):
        lo, hi = int(i * size), max(int((i + 1) * size), int(i * size) + 1)
        chunk_t, chunk_v = series.timestamps[lo:hi], series.values[lo:hi]
        stamps.append(chunk_t[0])  # the bucket's first minute: timestamps stay on the period grid's points
        values.append(sum(chunk_v) / len(chunk_v))
    return Series(series.metric, tuple(stamps), tuple(values), series.normalised, series.divisor)


def bounded(m: SystemMetrics, *, max_points: int = MAX_SYSTEM_JSON_POINTS) -> tuple[SystemMetrics, bool]:
    """The metrics with every series at most min(MAX_POINTS_PER_SERIES, max_points / series) points long."""
    n_series = sum(len(h.series) for h in m.hosts)
    if not n_series:
        return m, False
    limit = max(1, min(MAX_POINTS_PER_SERIES, max_points // n_series))
    if all(len(s.values) <= limit for h in m.hosts for s in h.series.values()):
        return m, False
    hosts = tuple(
        HostMetrics(
            h.host, h.instance_type, h.gpus, h.vcpus, {k: _average_down(s, limit) for k, s in h.series.items()}, h.note
        )
        for h in m.hosts
    )
    return SystemMetrics(m.job, m.start, m.end, m.period_s, hosts, m.complete, m.warnings), True


def system_document(view: SystemView, m: SystemMetrics | None, *, downsampled: bool) -> dict[str, Any]:
    """system.json: the status first, then the series (absent, not empty, when CloudWatch could not be read)."""
    doc: dict[str, Any] = {
        "status": view.status,
        "reason": view.reason,
        "complete": view.complete,
        "downsampled": downsampled,
        "max_points": MAX_SYSTEM_JSON_POINTS,
        "max_points_per_series": MAX_POINTS_PER_SERIES,
        "links": dict(view.links),
    }
    if m is not None:
        doc.update(m.to_json())
        doc["complete"] = view.complete
    return doc


# --- the fan-out's copy of the job description ------------------------------------------------------------------


def _json_time(value: Any) -> Any:
    return value.timestamp() if isinstance(value, datetime) else value


def describe_for_fanout(describe: Mapping[str, Any]) -> dict[str, Any]:
    """The DescribeTrainingJob keys the system view and the e-mail need, JSON-safe (times as epoch seconds)
    and bounded (Step Functions' execution input holds 256 KiB)."""
    out: dict[str, Any] = {}
    for key in _DESCRIBE_KEYS:
        if key not in describe:
            continue
        value = describe[key]
        if key == "SecondaryStatusTransitions" and isinstance(value, Sequence):
            value = [
                {
                    k: (str(v)[:_MAX_STATUS_MESSAGE] if k == "StatusMessage" else _json_time(v))
                    for k, v in t.items()
                    if k in ("Status", "StartTime", "EndTime", "StatusMessage")
                }
                for t in value[:_MAX_TRANSITIONS]
                if isinstance(t, Mapping)
            ]
        elif key == "FailureReason":
            value = str(value)[:MAX_FAILURE_REASON]
        elif key == "ResourceConfig" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k in ("InstanceType", "InstanceCount", "InstanceGroups")}
        out[key] = _json_time(value)
    return out
