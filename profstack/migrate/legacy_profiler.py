"""Audit and clean what SageMaker Profiler and Debugger left in an account.

- `audit`: training jobs that still run the Profiler or Debugger profiler rules, and the
  bytes under each job's `rule-output/` and `profiler-output/` (docs/platform-facts.md A6).
- `merge_expiry_rule` / `apply_expiry_rule`: add the tag-based expiry rule to a bucket that
  holds legacy output, merged with the rules it already has (PutBucketLifecycleConfiguration
  replaces the whole configuration, docs/platform-facts.md A7).
- `disable_profiler`: stop the Profiler on jobs that are still in progress.

AWS clients are injected; nothing here creates one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from profstack.layout import LEGACY_RULE_OUTPUT_TAG

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

EXPIRY_RULE_ID = "profstack-legacy-rule-output"
LEGACY_FOLDERS = ("rule-output", "profiler-output")
MAX_LIFECYCLE_RULES = 1000  # per bucket (docs/platform-facts.md A7)


class LegacyProfilerError(Exception):
    """An expected failure, as one line."""


@dataclass(frozen=True)
class S3Prefix:
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> S3Prefix:
        if not uri.startswith("s3://"):
            raise LegacyProfilerError(f"not an S3 URI: {uri}")
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not bucket:
            raise LegacyProfilerError(f"not an S3 URI: {uri}")
        return cls(bucket, prefix.strip("/"))

    def child(self, *parts: str) -> S3Prefix:
        joined = "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))
        return S3Prefix(self.bucket, joined + "/")

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class PrefixUsage:
    location: S3Prefix
    objects: int
    bytes: int


@dataclass
class ProfilerJob:
    name: str
    status: str
    created: datetime
    profiler_enabled: bool
    profiler_rules: list[tuple[str, str]]  # (rule name, evaluation status)
    output_roots: list[S3Prefix]
    usage: list[PrefixUsage] = field(default_factory=list)

    @property
    def legacy_bytes(self) -> int:
        return sum(u.bytes for u in self.usage)


@dataclass
class AuditReport:
    jobs: list[ProfilerJob]
    scanned: int
    since: datetime

    @property
    def buckets(self) -> dict[str, int]:
        """Bucket -> bytes of legacy output found in it."""
        totals: dict[str, int] = {}
        for job in self.jobs:
            for usage in job.usage:
                totals[usage.location.bucket] = totals.get(usage.location.bucket, 0) + usage.bytes
        return totals

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "jobs_scanned": self.scanned,
            "jobs_using_profiler": [
                {
                    "name": j.name,
                    "status": j.status,
                    "created": j.created.isoformat(),
                    "profiler_enabled": j.profiler_enabled,
                    "profiler_rules": [{"name": n, "status": s} for n, s in j.profiler_rules],
                    "legacy_output": [
                        {"location": str(u.location), "objects": u.objects, "bytes": u.bytes} for u in j.usage
                    ],
                }
                for j in self.jobs
            ],
            "legacy_bytes_by_bucket": self.buckets,
        }


def _training_job_names(sm: SageMakerClient, since: datetime, limit: int) -> Iterator[str]:
    paginator = sm.get_paginator("list_training_jobs")
    seen = 0
    for page in paginator.paginate(CreationTimeAfter=since, SortBy="CreationTime", SortOrder="Descending"):
        for summary in page["TrainingJobSummaries"]:
            if seen >= limit:
                return
            seen += 1
            yield summary["TrainingJobName"]


def _describe(sm: SageMakerClient, name: str) -> ProfilerJob | None:
    job = sm.describe_training_job(TrainingJobName=name)
    profiler = job.get("ProfilerConfig") or {}
    rules = [
        (status.get("RuleConfigurationName", "?"), status.get("RuleEvaluationStatus", "?"))
        for status in job.get("ProfilerRuleEvaluationStatuses", [])
    ]
    rules += [
        (config["RuleConfigurationName"], "Configured")
        for config in job.get("ProfilerRuleConfigurations", [])
        if config["RuleConfigurationName"] not in {n for n, _ in rules}
    ]
    enabled = bool(profiler) and not profiler.get("DisableProfiler", False)
    if not enabled and not rules:
        return None
    roots: list[S3Prefix] = []
    for uri in (profiler.get("S3OutputPath"), job.get("OutputDataConfig", {}).get("S3OutputPath")):
        if uri:
            root = S3Prefix.parse(uri)
            if root not in roots:
                roots.append(root)
    return ProfilerJob(
        name=name,
        status=job["TrainingJobStatus"],
        created=job["CreationTime"],
        profiler_enabled=enabled,
        profiler_rules=rules,
        output_roots=roots,
    )


def measure_prefix(s3: S3Client, location: S3Prefix) -> PrefixUsage:
    objects = size = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=location.prefix):
        for item in page.get("Contents", []):
            objects += 1
            size += item["Size"]
    return PrefixUsage(location, objects, size)


def audit(
    sm: SageMakerClient,
    s3: S3Client,
    *,
    since_days: int = 90,
    max_jobs: int = 1000,
    now: datetime | None = None,
    measure_output: bool = True,
) -> AuditReport:
    since = (now or datetime.now(UTC)) - timedelta(days=since_days)
    jobs: list[ProfilerJob] = []
    scanned = 0
    for name in _training_job_names(sm, since, max_jobs):
        scanned += 1
        job = _describe(sm, name)
        if job is None:
            continue
        jobs.append(job)
        if not measure_output:
            continue
        for root in job.output_roots:
            for folder in LEGACY_FOLDERS:
                try:
                    usage = measure_prefix(s3, root.child(name, folder))
                except ClientError as exc:
                    code = exc.response.get("Error", {}).get("Code", "")
                    if code in {"AccessDenied", "NoSuchBucket"}:
                        continue  # reported as unknown size; the job row still shows
                    raise
                if usage.objects:
                    job.usage.append(usage)
    return AuditReport(jobs=jobs, scanned=scanned, since=since)


def merge_expiry_rule(existing: Sequence[dict[str, Any]], *, days: int) -> list[dict[str, Any]]:
    """The bucket's rules with ProfStack's tag-expiry rule added or updated; the others untouched."""
    if days <= 0:
        raise LegacyProfilerError("days must be positive")
    key, value = LEGACY_RULE_OUTPUT_TAG
    ours = {
        "ID": EXPIRY_RULE_ID,
        "Status": "Enabled",
        "Filter": {"Tag": {"Key": key, "Value": value}},
        "Expiration": {"Days": days},
    }
    others = [dict(rule) for rule in existing if rule.get("ID") != EXPIRY_RULE_ID]
    if len(others) + 1 > MAX_LIFECYCLE_RULES:
        raise LegacyProfilerError(
            f"bucket already has {len(others)} lifecycle rules; the limit is {MAX_LIFECYCLE_RULES}"
        )
    return [*others, ours]


def current_lifecycle_rules(s3: S3Client, bucket: str) -> list[dict[str, Any]]:
    try:
        rules: list[dict[str, Any]] = list(s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"])  # type: ignore[arg-type]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchLifecycleConfiguration":
            return []
        raise
    return rules


def apply_expiry_rule(s3: S3Client, bucket: str, *, days: int, apply: bool) -> tuple[list[dict[str, Any]], bool]:
    """Returns (merged rules, changed). Writes only with apply=True and only when something changes."""
    existing = current_lifecycle_rules(s3, bucket)
    merged = merge_expiry_rule(existing, days=days)
    changed = merged != existing
    if apply and changed:
        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": merged})  # type: ignore[typeddict-item]
    return merged, changed


def disable_profiler(sm: SageMakerClient, jobs: Iterable[ProfilerJob], *, apply: bool) -> list[str]:
    """Names of in-progress jobs whose Profiler is (or would be) turned off."""
    targets = [j.name for j in jobs if j.status == "InProgress" and j.profiler_enabled]
    if apply:
        for name in targets:
            sm.update_training_job(TrainingJobName=name, ProfilerConfig={"DisableProfiler": True})
    return targets
