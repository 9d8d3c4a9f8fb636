"""What the alarm manager does: converge one job's alarms (on an event) or every job's (on a schedule).

The event only names the job. Whether it is running, and on which hosts, comes from DescribeTrainingJob
at the moment of handling, so duplicated, late or out-of-order events cannot resurrect the alarms of a
finished job: each invocation makes the job's alarms equal to what SageMaker says now. The function runs
with a reserved concurrency of 1, so two convergences never interleave. A missed event is repaired by
the next reconcile, which also removes the alarms of jobs that are no longer running (orphans) and
adds the warm-up-gated alarms once a job has trained long enough.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from lambdas.alarm_manager.dashboard import dashboard_body
from profstack.jobs.alarms import (
    AlarmSpec,
    RunningJob,
    Thresholds,
    alarm_prefix,
    job_alarm_prefix,
    job_alarms,
    job_of_alarm,
)
from profstack.jobs.instances import hosts_of


class AlarmStore(Protocol):
    def list(self, prefix: str) -> dict[str, str | None]: ...
    def put(self, spec: AlarmSpec) -> None: ...
    def delete(self, names: Iterable[str]) -> None: ...
    def put_dashboard(self, name: str, body: str) -> None: ...


class JobSource(Protocol):
    def describe(self, job: str) -> Mapping[str, Any] | None: ...
    def in_progress(self) -> list[str]: ...
    def tags(self, arn: str) -> dict[str, str]: ...


@dataclass(frozen=True, kw_only=True)
class Settings:
    name_prefix: str
    thresholds: Thresholds
    tag_filter: tuple[str, str] | None = None  # only jobs with this tag get alarms (processing.job_tag_filter)
    dashboard_name: str | None = None
    region: str = ""


@dataclass
class SyncResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0
    jobs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def merge(self, other: SyncResult) -> None:
        self.created += other.created
        self.updated += other.updated
        self.deleted += other.deleted
        self.unchanged += other.unchanged
        self.jobs += other.jobs
        self.warnings += other.warnings

    def to_json(self) -> dict[str, Any]:
        return {
            "created": len(self.created),
            "updated": len(self.updated),
            "deleted": len(self.deleted),
            "unchanged": self.unchanged,
            "jobs": sorted(set(self.jobs)),
            "warnings": self.warnings[:50],
        }


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, tz=UTC)  # epoch ms (events) or s
    return None


def running_job(describe: Mapping[str, Any] | None, jobs: JobSource, settings: Settings) -> RunningJob | None:
    """The job as DescribeTrainingJob shows it, when it runs and passes the tag filter; else None."""
    if describe is None or describe.get("TrainingJobStatus") != "InProgress":
        return None
    if settings.tag_filter is not None:
        key, value = settings.tag_filter
        arn = str(describe.get("TrainingJobArn") or "")
        if not arn or jobs.tags(arn).get(key) != value:
            return None
    return RunningJob(
        name=str(describe["TrainingJobName"]),
        hosts=tuple(hosts_of(describe.get("ResourceConfig"))),
        started=_as_datetime(describe.get("TrainingStartTime")),
    )


def _converge(
    job_name: str, desired: list[AlarmSpec], existing: Mapping[str, str | None], alarms: AlarmStore
) -> SyncResult:
    result = SyncResult(jobs=[job_name])
    wanted = {s.name: s for s in desired}
    stale = [name for name in existing if name not in wanted]
    if stale:
        alarms.delete(stale)
        result.deleted += stale
    for name, spec in wanted.items():
        if name not in existing:
            alarms.put(spec)
            result.created.append(name)
        elif existing[name] != spec.fingerprint:
            alarms.put(spec)
            result.updated.append(name)
        else:
            result.unchanged += 1
    return result


def _warnings(job: RunningJob) -> list[str]:
    notes = sorted({h.note for h in job.hosts if h.note and (h.gpus is None or not h.verified)})
    return [f"{job.name}: {n}" for n in notes]


def sync_job(job_name: str, *, jobs: JobSource, alarms: AlarmStore, settings: Settings, now: datetime) -> SyncResult:
    """Make one job's alarms what SageMaker's current view of the job calls for."""
    job = running_job(jobs.describe(job_name), jobs, settings)
    desired = job_alarms(name_prefix=settings.name_prefix, job=job, th=settings.thresholds, now=now) if job else []
    existing = alarms.list(job_alarm_prefix(settings.name_prefix, job_name))
    # Only names that parse as this job's alarms are ours to touch (another job's name may extend this one).
    ours = {n: f for n, f in existing.items() if job_of_alarm(settings.name_prefix, n) == job_name}
    result = _converge(job_name, desired, ours, alarms)
    if job is not None:
        result.warnings += _warnings(job)
    return result


def reconcile(*, jobs: JobSource, alarms: AlarmStore, settings: Settings, now: datetime) -> SyncResult:
    """Every running job gets exactly its set; every other per-job alarm under the prefix goes."""
    existing = alarms.list(alarm_prefix(settings.name_prefix))
    by_job: dict[str, dict[str, str | None]] = {}
    foreign: list[str] = []
    for name, fp in existing.items():
        owner = job_of_alarm(settings.name_prefix, name)
        if owner is None:
            foreign.append(name)
        else:
            by_job.setdefault(owner, {})[name] = fp
    result = SyncResult()
    if foreign:
        result.warnings.append(
            f"{len(foreign)} alarm(s) under {alarm_prefix(settings.name_prefix)} with an "
            "unexpected name were left alone"
        )
    running: list[RunningJob] = []
    for name in sorted(set(jobs.in_progress())):
        job = running_job(jobs.describe(name), jobs, settings)
        if job is None:
            continue
        running.append(job)
        desired = job_alarms(name_prefix=settings.name_prefix, job=job, th=settings.thresholds, now=now)
        result.merge(_converge(job.name, desired, by_job.pop(job.name, {}), alarms))
        result.warnings += _warnings(job)
    for orphan_job, orphan_alarms in sorted(by_job.items()):
        result.merge(_converge(orphan_job, [], orphan_alarms, alarms))
    if settings.dashboard_name:
        alarms.put_dashboard(
            settings.dashboard_name,
            dashboard_body(jobs=running, region=settings.region, generated_at=now.strftime("%Y-%m-%d %H:%M UTC")),
        )
    return result
