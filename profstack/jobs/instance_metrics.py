"""A training job's instance metrics as a typed, per-host, per-GPU time series. Pure: no AWS calls.

SageMaker publishes, per minute, in `/aws/sagemaker/TrainingJobs` with dimension `Host=<job>/algo-<n>`
(docs/platform-facts.md A8): CPUUtilization summed over vCPUs, GPUUtilization and GPUMemoryUtilization
summed over GPUs, MemoryUtilization and DiskUtilization in 0-100. This module builds the GetMetricData
queries for a job's window and turns the answers into 0-100 series per host, dividing by the host's
counts from profstack/jobs/instances.py. A host whose count is unknown keeps its raw sums, flagged
`normalised=False`, and the result says so in `warnings` (never a confident per-GPU number it cannot know).

The I/O lives in lambdas/trace_processor/system_metrics.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from profstack.jobs.instances import HostSpec, hosts_of

NAMESPACE = "/aws/sagemaker/TrainingJobs"
Metric = Literal["CPUUtilization", "GPUUtilization", "GPUMemoryUtilization", "MemoryUtilization", "DiskUtilization"]
METRICS: tuple[Metric, ...] = (
    "CPUUtilization",
    "GPUUtilization",
    "GPUMemoryUtilization",
    "MemoryUtilization",
    "DiskUtilization",
)
_KEYS: dict[Metric, str] = {
    "CPUUtilization": "cpu",
    "GPUUtilization": "gpu",
    "GPUMemoryUtilization": "gpumem",
    "MemoryUtilization": "mem",
    "DiskUtilization": "disk",
}
MAX_POINTS_PER_SERIES = 1440  # one day at one minute; longer jobs get a coarser period
MAX_DATAPOINTS_PER_CALL = 100_800  # GetMetricData's limit per call
MAX_QUERIES_PER_CALL = 500
# CloudWatch keeps 1-minute data 15 days, 5-minute data 63 days, 1-hour data 455 days.
_RETENTION = ((timedelta(days=15), 60), (timedelta(days=63), 300), (timedelta(days=455), 3600))


@dataclass(frozen=True)
class Series:
    metric: Metric
    timestamps: tuple[float, ...]  # epoch seconds, ascending
    values: tuple[float, ...]  # 0-100 when normalised; else SageMaker's raw sum
    normalised: bool
    divisor: int | None  # what the raw value was divided by (GPUs or vCPUs); None for 0-100 metrics

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "timestamps": list(self.timestamps),
            "values": [round(v, 3) for v in self.values],
            "normalised": self.normalised,
            "divisor": self.divisor,
        }


@dataclass(frozen=True)
class HostMetrics:
    host: str  # algo-<n>
    instance_type: str | None
    gpus: int | None
    vcpus: int | None
    series: Mapping[str, Series]  # by metric name; a metric SageMaker did not publish is absent
    note: str = ""

    def get(self, metric: Metric) -> Series | None:
        return self.series.get(metric)


@dataclass(frozen=True)
class SystemMetrics:
    job: str
    start: float  # epoch seconds
    end: float
    period_s: int
    hosts: tuple[HostMetrics, ...]
    complete: bool
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "start": self.start,
            "end": self.end,
            "period_s": self.period_s,
            "complete": self.complete,
            "warnings": list(self.warnings),
            "hosts": [
                {
                    "host": h.host,
                    "instance_type": h.instance_type,
                    "gpus": h.gpus,
                    "vcpus": h.vcpus,
                    "note": h.note,
                    "series": {name: s.to_json() for name, s in h.series.items()},
                }
                for h in self.hosts
            ],
        }


# --- the window and the queries ------------------------------------------------------------------------------


def _dt(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, tz=UTC)
    return None


def job_window(describe: Mapping[str, Any], now: datetime) -> tuple[datetime, datetime]:
    """TrainingStartTime (else CreationTime) to TrainingEndTime (else now), both aligned to the minute."""
    start = _dt(describe.get("TrainingStartTime")) or _dt(describe.get("CreationTime")) or now
    end = _dt(describe.get("TrainingEndTime")) or now
    end = max(end, start + timedelta(minutes=1))
    start = start.replace(second=0, microsecond=0)
    end = (end + timedelta(seconds=59)).replace(second=0, microsecond=0)
    return start, end


def choose_period(start: datetime, end: datetime, now: datetime) -> int:
    """A multiple of 60 s that keeps each series under MAX_POINTS_PER_SERIES and within retention."""
    span = (end - start).total_seconds()
    period = max(60, math.ceil(span / MAX_POINTS_PER_SERIES / 60) * 60)
    age = now - start
    for limit, minimum in _RETENTION:
        if age <= limit:
            return max(period, minimum)
    return max(period, 3600)


def query_id(host_index: int, metric: Metric) -> str:
    return f"h{host_index}_{_KEYS[metric]}"


def metric_queries(job: str, hosts: Sequence[HostSpec], period: int) -> list[dict[str, Any]]:
    """GetMetricData MetricDataQueries: one per host and metric, Average over `period`."""
    return [
        {
            "Id": query_id(h.index, metric),
            "MetricStat": {
                "Metric": {
                    "Namespace": NAMESPACE,
                    "MetricName": metric,
                    "Dimensions": [{"Name": "Host", "Value": h.dimension(job)}],
                },
                "Period": period,
                "Stat": "Average",
            },
            "ReturnData": True,
        }
        for h in hosts
        for metric in METRICS
    ]


def batches(queries: Sequence[dict[str, Any]], points_per_series: int) -> list[list[dict[str, Any]]]:
    """Split the queries so no call asks for more than GetMetricData's datapoint or query limits."""
    size = max(1, min(MAX_QUERIES_PER_CALL, MAX_DATAPOINTS_PER_CALL // max(points_per_series, 1)))
    return [list(queries[i : i + size]) for i in range(0, len(queries), size)]


# --- the answers -----------------------------------------------------------------------------------------------


@dataclass
class RawResults:
    """What GetMetricData returned, merged over pages and calls: Id -> {timestamp: value}."""

    points: dict[str, dict[float, float]] = field(default_factory=dict)
    partial: bool = False
    messages: list[str] = field(default_factory=list)

    def add(self, results: Iterable[Mapping[str, Any]]) -> None:
        for r in results:
            bucket = self.points.setdefault(str(r["Id"]), {})
            for ts, value in zip(r.get("Timestamps", []), r.get("Values", []), strict=False):
                stamp = _dt(ts)
                if stamp is not None and isinstance(value, int | float) and math.isfinite(value):
                    bucket[stamp.timestamp()] = float(value)
            if r.get("StatusCode") not in (None, "Complete"):
                self.partial = True
            for m in r.get("Messages", []) or []:
                self.messages.append(f"{r['Id']}: {m.get('Code', '')} {m.get('Value', '')}".strip())


def _divisor(host: HostSpec, metric: Metric) -> tuple[int | None, bool]:
    """(divisor, known): GPU metrics divide by GPUs, CPU by vCPUs, the 0-100 metrics by nothing."""
    if metric in ("GPUUtilization", "GPUMemoryUtilization"):
        return (host.gpus, True) if host.gpus else (None, False)
    if metric == "CPUUtilization":
        return (host.vcpus, True) if host.vcpus else (None, False)
    return (None, True)


def build(
    *, job: str, hosts: Sequence[HostSpec], raw: RawResults, start: datetime, end: datetime, period: int
) -> SystemMetrics:
    warnings: list[str] = []
    out: list[HostMetrics] = []
    for h in hosts:
        series: dict[str, Series] = {}
        for metric in METRICS:
            points = raw.points.get(query_id(h.index, metric)) or {}
            if not points:
                continue
            divisor, known = _divisor(h, metric)
            stamps = sorted(points)
            values = tuple(points[t] / divisor if divisor else points[t] for t in stamps)
            series[metric] = Series(metric, tuple(stamps), values, normalised=known, divisor=divisor)
            if not known and h.gpus != 0:
                warnings.append(f"{h.name} {metric}: shown as SageMaker's raw sum ({h.note or 'count unknown'})")
        if h.note and not h.verified and h.gpus:
            warnings.append(f"{h.name}: {h.note}")
        out.append(HostMetrics(h.name, h.instance_type, h.gpus, h.vcpus, series, h.note))
    if not hosts:
        warnings.append("the job's resource configuration names no host")
    elif not any(h.series for h in out):
        warnings.append(f"CloudWatch returned no instance metrics for {job} between {start:%Y-%m-%d %H:%M} and "
                        f"{end:%Y-%m-%d %H:%M} UTC")  # fmt: skip
    if raw.partial:
        warnings.append("GetMetricData returned partial data")
    warnings += raw.messages[:20]
    return SystemMetrics(
        job=job,
        start=start.timestamp(),
        end=end.timestamp(),
        period_s=period,
        hosts=tuple(out),
        complete=not raw.partial and bool(hosts),
        warnings=tuple(dict.fromkeys(warnings)),
    )


def hosts_for(describe: Mapping[str, Any]) -> list[HostSpec]:
    return hosts_of(describe.get("ResourceConfig"))


# --- statistics used by the rules and the panel ------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), q in 0..100; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def after(series: Series, seconds_from: float) -> tuple[list[float], list[float]]:
    """(timestamps, values) at or after `seconds_from` (epoch s)."""
    pairs = [(t, v) for t, v in zip(series.timestamps, series.values, strict=True) if t >= seconds_from]
    return [t for t, _ in pairs], [v for _, v in pairs]


def aligned(a: Series, b: Series, seconds_from: float) -> list[tuple[float, float]]:
    """Value pairs of two series at the timestamps both have (at or after `seconds_from`)."""
    other = dict(zip(b.timestamps, b.values, strict=True))
    return [(v, other[t]) for t, v in zip(a.timestamps, a.values, strict=True) if t >= seconds_from and t in other]
