"""The alarms one running training job should have: pure, so the manager, the stack and the tests agree.

Each host `algo-<n>` of a job gets (docs/platform-facts.md A8: GPU metrics are sums over the host's GPUs,
CPU over its vCPUs, memory and disk are 0-100 already):

- GpuUtilizationLow: GPUUtilization / GPUs < threshold, only once the job has trained past the warm-up.
- GpuMemoryHigh: GPUMemoryUtilization / GPUs > threshold.
- DiskHigh, MemoryHigh: DiskUtilization / MemoryUtilization > threshold.
- CpuHighGpuLow: 1 while CPUUtilization / vCPUs > cpu threshold AND GPUUtilization / GPUs < gpu threshold
  (Debugger's CPUBottleneck condition, A9), also only after the warm-up.

A host whose GPU count is unknown (a type missing from profstack/jobs/instances.py, or a heterogeneous cluster
whose host-to-type mapping SageMaker does not publish) gets no GPU alarm instead of a wrong one.

Alarm names are `<prefix>/job/<job>/algo-<n>/<kind>`. A prefix matches ^[a-z][a-z0-9-]{1,20}$ and a job
name has no `/`, so `<prefix>/job/` identifies exactly this deployment's per-job alarms; IAM scopes
PutMetricAlarm and DeleteAlarms to it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from profstack.jobs.instances import HostSpec

SAGEMAKER_NAMESPACE = "/aws/sagemaker/TrainingJobs"
PERIOD_SECONDS = 60  # SageMaker's instance metrics are per minute (A8)
KINDS = ("GpuUtilizationLow", "GpuMemoryHigh", "DiskHigh", "MemoryHigh", "CpuHighGpuLow")
_JOB_RE = r"[a-zA-Z0-9](?:-*[a-zA-Z0-9]){0,62}"  # SageMaker's TrainingJobName pattern
_FINGERPRINT_RE = re.compile(r"\[profstack:([0-9a-f]{12})\]$")


def alarm_prefix(name_prefix: str) -> str:
    """Every per-job alarm of this deployment starts with this; IAM grants only `<this>*`."""
    return f"{name_prefix}/job/"


def job_alarm_prefix(name_prefix: str, job: str) -> str:
    return f"{alarm_prefix(name_prefix)}{job}/"


def alarm_name(name_prefix: str, job: str, host: str, kind: str) -> str:
    return f"{job_alarm_prefix(name_prefix, job)}{host}/{kind}"


def job_of_alarm(name_prefix: str, name: str) -> str | None:
    """The job an alarm name belongs to, or None when the name is not one of ours."""
    match = re.fullmatch(
        re.escape(alarm_prefix(name_prefix)) + f"({_JOB_RE})/algo-[1-9][0-9]*/(" + "|".join(KINDS) + ")", name
    )
    return match.group(1) if match else None


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """Per-GPU / per-core percentages from the `alarms` config section."""

    gpu_utilization_low_percent: float
    gpu_memory_high_percent: float
    disk_high_percent: float
    memory_high_percent: float
    cpu_high_percent: float
    cpu_bound_gpu_low_percent: float
    evaluation_periods: int
    warmup_minutes: int


@dataclass(frozen=True, kw_only=True)
class RunningJob:
    """What the manager knows about a job from DescribeTrainingJob (never from the event alone)."""

    name: str
    hosts: tuple[HostSpec, ...]
    started: datetime | None  # TrainingStartTime; None until SageMaker sets it


@dataclass(frozen=True, kw_only=True)
class AlarmSpec:
    name: str
    summary: str
    metrics: tuple[Mapping[str, Any], ...]
    threshold: float
    comparison: str
    evaluation_periods: int
    fingerprint: str = field(default="")

    @property
    def description(self) -> str:
        return f"{self.summary} [profstack:{self.fingerprint}]"

    def put_kwargs(self, topic_arn: str, *, manager: str = "") -> dict[str, Any]:
        """Arguments of cloudwatch.put_metric_alarm. `manager` (the deployment's name prefix) is written as the
        alarm's MANAGED_BY_TAG: only alarms carrying it are ever updated or deleted (CloudWatch applies tags at
        creation only, so an alarm someone else created under a look-alike name never gets it)."""
        tags = [{"Key": MANAGED_BY_TAG, "Value": manager}] if manager else []
        return {
            **({"Tags": tags} if tags else {}),
            "AlarmName": self.name,
            "AlarmDescription": self.description[:1024],
            "Metrics": [dict(m) for m in self.metrics],
            "Threshold": self.threshold,
            "ComparisonOperator": self.comparison,
            "EvaluationPeriods": self.evaluation_periods,
            "DatapointsToAlarm": self.evaluation_periods,
            "TreatMissingData": "notBreaching",  # a host that stopped reporting is a finished job, not an alarm
            "AlarmActions": [topic_arn],
            "ActionsEnabled": True,
        }


#: the tag that proves the alarm manager created an alarm (value: the deployment's name prefix)
MANAGED_BY_TAG = "profstack:managed-by"


def fingerprint_of(description: str | None) -> str | None:
    match = _FINGERPRINT_RE.search(description or "")
    return match.group(1) if match else None


def _metric(query_id: str, metric: str, host_dimension: str, *, return_data: bool) -> dict[str, Any]:
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {
                "Namespace": SAGEMAKER_NAMESPACE,
                "MetricName": metric,
                "Dimensions": [{"Name": "Host", "Value": host_dimension}],
            },
            "Period": PERIOD_SECONDS,
            "Stat": "Average",
        },
        "ReturnData": return_data,
    }


def _expression(expression: str, label: str) -> dict[str, Any]:
    return {"Id": "e1", "Expression": expression, "Label": label, "ReturnData": True}


def _with_fingerprint(spec: AlarmSpec) -> AlarmSpec:
    payload = json.dumps(
        [spec.name, spec.summary, spec.metrics, spec.threshold, spec.comparison, spec.evaluation_periods],
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(payload.encode()).hexdigest()[:12]
    return AlarmSpec(
        name=spec.name,
        summary=spec.summary,
        metrics=spec.metrics,
        threshold=spec.threshold,
        comparison=spec.comparison,
        evaluation_periods=spec.evaluation_periods,
        fingerprint=digest,
    )


def warmed_up(job: RunningJob, th: Thresholds, now: datetime) -> bool:
    return job.started is not None and now >= job.started + timedelta(minutes=th.warmup_minutes)


def host_alarms(*, name_prefix: str, job: RunningJob, host: HostSpec, th: Thresholds, now: datetime) -> list[AlarmSpec]:
    dim = host.dimension(job.name)
    n = th.evaluation_periods
    caveat = f" ({host.note})" if host.note else ""
    where = f"{job.name} {host.name}"
    specs: list[AlarmSpec] = [
        AlarmSpec(
            name=alarm_name(name_prefix, job.name, host.name, "DiskHigh"),
            summary=f"{where}: disk above {th.disk_high_percent:g}% for {n} min.",
            metrics=(_metric("m1", "DiskUtilization", dim, return_data=True),),
            threshold=th.disk_high_percent,
            comparison="GreaterThanThreshold",
            evaluation_periods=n,
        ),
        AlarmSpec(
            name=alarm_name(name_prefix, job.name, host.name, "MemoryHigh"),
            summary=f"{where}: host memory above {th.memory_high_percent:g}% for {n} min.",
            metrics=(_metric("m1", "MemoryUtilization", dim, return_data=True),),
            threshold=th.memory_high_percent,
            comparison="GreaterThanThreshold",
            evaluation_periods=n,
        ),
    ]
    gpus = host.gpus
    if gpus:
        specs.append(
            AlarmSpec(
                name=alarm_name(name_prefix, job.name, host.name, "GpuMemoryHigh"),
                summary=f"{where}: GPU memory above {th.gpu_memory_high_percent:g}% per GPU "
                f"(sum / {gpus} GPUs) for {n} min: risk of OOM{caveat}.",
                metrics=(
                    _metric("gpumem", "GPUMemoryUtilization", dim, return_data=False),
                    _expression(f"gpumem / {gpus}", "GPU memory % per GPU"),
                ),
                threshold=th.gpu_memory_high_percent,
                comparison="GreaterThanThreshold",
                evaluation_periods=n,
            )
        )
        if warmed_up(job, th, now):
            specs.append(
                AlarmSpec(
                    name=alarm_name(name_prefix, job.name, host.name, "GpuUtilizationLow"),
                    summary=f"{where}: GPU utilisation below {th.gpu_utilization_low_percent:g}% per GPU "
                    f"(sum / {gpus} GPUs) for {n} min after a {th.warmup_minutes} min warm-up: likely input-, "
                    f"CPU- or launch-bound; profile it and read its ProfStack report{caveat}.",
                    metrics=(
                        _metric("gpu", "GPUUtilization", dim, return_data=False),
                        _expression(f"gpu / {gpus}", "GPU utilisation % per GPU"),
                    ),
                    threshold=th.gpu_utilization_low_percent,
                    comparison="LessThanThreshold",
                    evaluation_periods=n,
                )
            )
            if host.vcpus:
                specs.append(
                    AlarmSpec(
                        name=alarm_name(name_prefix, job.name, host.name, "CpuHighGpuLow"),
                        summary=f"{where}: CPU above {th.cpu_high_percent:g}% per vCPU (sum / {host.vcpus}) while "
                        f"GPU below {th.cpu_bound_gpu_low_percent:g}% per GPU (sum / {gpus}) for {n} min: "
                        f"CPU-bound (Debugger CPUBottleneck){caveat}.",
                        metrics=(
                            _metric("cpu", "CPUUtilization", dim, return_data=False),
                            _metric("gpu", "GPUUtilization", dim, return_data=False),
                            _expression(
                                f"IF(cpu / {host.vcpus} > {th.cpu_high_percent:g} AND "
                                f"gpu / {gpus} < {th.cpu_bound_gpu_low_percent:g}, 1, 0)",
                                "CPU high while GPU low (1 = yes)",
                            ),
                        ),
                        threshold=1,
                        comparison="GreaterThanOrEqualToThreshold",
                        evaluation_periods=n,
                    )
                )
    return [_with_fingerprint(s) for s in specs]


def job_alarms(*, name_prefix: str, job: RunningJob, th: Thresholds, now: datetime) -> list[AlarmSpec]:
    return [
        spec for host in job.hosts for spec in host_alarms(name_prefix=name_prefix, job=job, host=host, th=th, now=now)
    ]


def desired_by_name(
    *, name_prefix: str, jobs: Sequence[RunningJob], th: Thresholds, now: datetime
) -> dict[str, AlarmSpec]:
    return {spec.name: spec for job in jobs for spec in job_alarms(name_prefix=name_prefix, job=job, th=th, now=now)}
