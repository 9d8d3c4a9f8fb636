"""Audit and clean what SageMaker Profiler and Debugger profiling left in an account (AWS's checklist).

The audit starts from the training jobs that used the Profiler (DescribeTrainingJob's
ProfilerConfig / ProfilerRuleConfigurations) and derives everything else from them, never from a
generic key pattern (docs/platform-facts.md A6):

    (a) s3://<output path>/<job>/rule-output/ and .../profiler-output/ of each job: objects, bytes, cost
    (b) /aws/sagemaker/ProcessingJobs streams of the job's rule-evaluation processing jobs
        (ProfilerRuleEvaluationStatuses[].RuleEvaluationJobArn): bytes, cost
    (c) customer-managed IAM policies and roles whose statements name those paths (or DetailedProfiler
        apps); a role is "Profiler-only" when every policy it has is
    (d) DetailedProfiler apps in SageMaker domains
    (e) EventBridge rules, Step Functions state machines and Lambda functions whose pattern,
        targets, definition or environment name those paths or the rule jobs

A reference that mentions `rule-output/` or `profiler-output/` but matches no verified job's bucket
or prefix is listed as "review" (never counted as found, never acted on). Cleanup acts only on
(a) verified job prefixes (tag + expiry rule), (d) apps, and (b) log streams behind a flag; it
never edits IAM, EventBridge, Step Functions or Lambda. AWS clients are injected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from profstack.layout import LEGACY_RULE_OUTPUT_TAG

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

EXPIRY_RULE_ID = "profstack-legacy-rule-output"
LEGACY_FOLDERS = ("rule-output", "profiler-output")
#: SageMaker's final training-job statuses: only such a job's legacy folders are tagged for expiry by cleanup
TERMINAL_JOB_STATUSES = frozenset({"Completed", "Failed", "Stopped"})
MAX_LIFECYCLE_RULES = 1000  # per bucket (docs/platform-facts.md A7)
PROCESSING_LOG_GROUP = "/aws/sagemaker/ProcessingJobs"
# List prices, us-east-1 (S3 Standard storage; CloudWatch Logs archived storage). Override with flags.
S3_USD_PER_GB_MONTH = 0.023
LOGS_USD_PER_GB_MONTH = 0.03
GB = 1024**3
MAX_LOG_PAGES = 20  # per stream; beyond it the byte count is a lower bound


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
    folder: str = "rule-output"


@dataclass
class ProfilerJob:
    name: str
    status: str
    created: datetime
    profiler_enabled: bool
    profiler_rules: list[tuple[str, str]]  # (rule name, evaluation status)
    output_roots: list[S3Prefix]
    rule_jobs: list[str] = field(default_factory=list)  # processing job names of the rule evaluations
    usage: list[PrefixUsage] = field(default_factory=list)

    @property
    def legacy_bytes(self) -> int:
        return sum(u.bytes for u in self.usage)

    def prefixes(self, folders: Sequence[str] = LEGACY_FOLDERS) -> list[S3Prefix]:
        return [root.child(self.name, folder) for root in self.output_roots for folder in folders]


@dataclass(frozen=True)
class Finding:
    """One legacy resource. `verified`: derived from a profiled job; else listed for review only."""

    kind: (
        str  # rule-output | profiler-output | log-stream | iam-policy | iam-role | app | rule | state-machine | lambda
    )
    resource: str  # S3 URI or ARN (log stream: group:stream)
    why: str
    bytes: int | None = None
    monthly_usd: float | None = None
    verified: bool = True
    profiler_only: bool | None = None  # IAM: every statement (policy) / policy (role) is Profiler's
    command: str = ""  # what to run to act on it (cleanup, or the AWS CLI for what cleanup never edits)
    extra: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "resource": self.resource,
            "why": self.why,
            "verified": self.verified,
        }
        if self.bytes is not None:
            out["bytes"] = self.bytes
        if self.monthly_usd is not None:
            out["monthly_usd"] = round(self.monthly_usd, 4)
        if self.profiler_only is not None:
            out["profiler_only"] = self.profiler_only
        if self.command:
            out["command"] = self.command
        out.update(dict(self.extra))
        return out


@dataclass
class AuditReport:
    jobs: list[ProfilerJob]
    scanned: int
    since: datetime
    findings: list[Finding] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)  # what could not be read (access denied, ...)
    prices: tuple[float, float] = (S3_USD_PER_GB_MONTH, LOGS_USD_PER_GB_MONTH)

    @property
    def buckets(self) -> dict[str, int]:
        """Bucket -> bytes of legacy output found in it."""
        totals: dict[str, int] = {}
        for job in self.jobs:
            for usage in job.usage:
                totals[usage.location.bucket] = totals.get(usage.location.bucket, 0) + usage.bytes
        return totals

    @property
    def found(self) -> list[Finding]:
        return [f for f in self.findings if f.verified]

    @property
    def review(self) -> list[Finding]:
        return [f for f in self.findings if not f.verified]

    @property
    def monthly_usd(self) -> float:
        return sum(f.monthly_usd or 0.0 for f in self.found)

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
                    "rule_jobs": j.rule_jobs,
                    "legacy_output": [
                        {"location": str(u.location), "objects": u.objects, "bytes": u.bytes} for u in j.usage
                    ],
                }
                for j in self.jobs
            ],
            "legacy_bytes_by_bucket": self.buckets,
            "findings": [f.to_dict() for f in self.found],
            "review": [f.to_dict() for f in self.review],
            "estimated_monthly_usd": round(self.monthly_usd, 4),
            "prices_usd_per_gb_month": {"s3": self.prices[0], "logs": self.prices[1]},
            "incomplete": self.incomplete,
        }


# --- (a) jobs and their S3 prefixes -----------------------------------------------------------------


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
    statuses = job.get("ProfilerRuleEvaluationStatuses", [])
    rules = [(s.get("RuleConfigurationName", "?"), s.get("RuleEvaluationStatus", "?")) for s in statuses]
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
    rule_jobs = [s["RuleEvaluationJobArn"].rsplit("/", 1)[-1] for s in statuses if s.get("RuleEvaluationJobArn")]
    return ProfilerJob(
        name=name,
        status=job["TrainingJobStatus"],
        created=job["CreationTime"],
        profiler_enabled=enabled,
        profiler_rules=rules,
        output_roots=roots,
        rule_jobs=rule_jobs,
    )


def measure_prefix(
    s3: S3Client, location: S3Prefix, folder: str = "rule-output", *, expected_owner: str | None = None
) -> PrefixUsage:
    from profstack.migrate.rule_output import owner_kwargs

    objects = size = 0
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=location.bucket, Prefix=location.prefix, **owner_kwargs(expected_owner)
    )
    for page in pages:
        for item in page.get("Contents", []):
            objects += 1
            size += item["Size"]
    return PrefixUsage(location, objects, size, folder)


def audit(
    sm: SageMakerClient,
    s3: S3Client,
    *,
    since_days: int = 90,
    max_jobs: int = 1000,
    now: datetime | None = None,
    measure_output: bool = True,
    s3_price: float = S3_USD_PER_GB_MONTH,
    expected_owner: str | None = None,
) -> AuditReport:
    """The profiled jobs and (a): the bytes under each job's own rule-output/ and profiler-output/.

    With expected_owner (the caller's account), a job whose output lies in another account's bucket
    gets no finding (S3 answers 403): cleanup never tags, nor writes the lifecycle of, a bucket this
    account does not own. The report says so under `incomplete`."""

    from botocore.exceptions import ClientError  # lazily: the `aws` extra

    since = (now or datetime.now(UTC)) - timedelta(days=since_days)
    jobs: list[ProfilerJob] = []
    report = AuditReport(jobs=jobs, scanned=0, since=since)
    for name in _training_job_names(sm, since, max_jobs + 1):  # one more: to know there are more
        if report.scanned >= max_jobs:
            report.incomplete.append(
                f"more than {max_jobs} training jobs since {since:%Y-%m-%d}: only the {max_jobs} newest "
                "were read (raise --max-jobs)"
            )
            break
        report.scanned += 1
        job = _describe(sm, name)
        if job is None:
            continue
        jobs.append(job)
        if not measure_output:
            continue
        for root in job.output_roots:
            for folder in LEGACY_FOLDERS:
                location = root.child(name, folder)
                try:
                    usage = measure_prefix(s3, location, folder, expected_owner=expected_owner)
                except ClientError as exc:
                    code = exc.response.get("Error", {}).get("Code", "")
                    if code in {"AccessDenied", "NoSuchBucket"}:
                        owner = f" (or not account {expected_owner}'s bucket): left alone" if expected_owner else ""
                        report.incomplete.append(f"{location}: {code}{owner}")
                        continue
                    raise
                if usage.objects:
                    job.usage.append(usage)
                    running = job.status not in TERMINAL_JOB_STATUSES
                    report.findings.append(
                        Finding(
                            kind=folder,
                            resource=str(location),
                            why=f"{folder}/ of training job {name} ({usage.objects} objects)"
                            + (
                                f"; the job is {job.status}: its rules may still write here, review after it ends"
                                if running
                                else ""
                            ),
                            bytes=usage.bytes,
                            monthly_usd=usage.bytes / GB * s3_price,
                            # a running job's folder is listed for review, never tagged for expiry by cleanup
                            verified=not running,
                            command="profstack legacy cleanup --apply (after the job ends)"
                            if running
                            else "profstack legacy cleanup --apply",
                        )
                    )
    return report


# --- path matching for (c) and (e) ------------------------------------------------------------------

_PATH_TOKEN = re.compile(r"[A-Za-z0-9_.\-*?${}:/]*(?:rule-output|profiler-output)[A-Za-z0-9_.\-*?${}:/]*")
_S3_ARN = re.compile(r"^(?:arn:[a-z-]+:s3:::|s3://)")


def _wildcard(pattern: str) -> re.Pattern[str]:
    """IAM-style: `*` any run of characters (`/` included), `?` one; `${...}` variables as `*`."""
    pattern = re.sub(r"\$\{[^}]*\}", "*", pattern)
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


@dataclass(frozen=True)
class LegacyPaths:
    """What the verified jobs make Profiler's: their prefixes, buckets and rule-evaluation jobs."""

    prefixes: tuple[S3Prefix, ...]
    rule_jobs: frozenset[str]

    @classmethod
    def of(cls, jobs: Iterable[ProfilerJob]) -> LegacyPaths:
        jobs = list(jobs)
        return cls(tuple(p for j in jobs for p in j.prefixes()), frozenset(r for j in jobs for r in j.rule_jobs))

    @property
    def buckets(self) -> frozenset[str]:
        return frozenset(p.bucket for p in self.prefixes)

    def match(self, text: str) -> tuple[str | None, str | None]:
        """(verified reason, review reason) for a text (policy resource, definition, env value)."""
        for job in sorted(self.rule_jobs):
            if job in text:
                return f"names rule-evaluation job {job}", None
        review = None
        for token in _PATH_TOKEN.findall(text):
            bare = _S3_ARN.sub("", token)
            for prefix in self.prefixes:
                full = f"{prefix.bucket}/{prefix.prefix}"
                probe = _wildcard(bare)
                if probe.fullmatch(full + "x") or probe.fullmatch(full) or probe.match(prefix.prefix + "x"):
                    return f"names {prefix}", None
            if any(bare.startswith(f"{bucket}/") for bucket in self.buckets) or any(
                re.search(rf"[\"'\s:=]{re.escape(bucket)}[\"'\s,/]", text) for bucket in self.buckets
            ):
                return f"reads `{token}` in a bucket holding verified Profiler output", None
            review = f"mentions `{token}` but no verified job's bucket or prefix"
        return None, review


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _statements(document: Any) -> list[dict[str, Any]]:
    if isinstance(document, str):
        document = json.loads(document)
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)


def _statement_reason(statement: dict[str, Any], paths: LegacyPaths) -> tuple[str | None, str | None]:
    resources: list[str] = []
    for key in ("Resource", "NotResource"):
        value = statement.get(key, [])
        resources += [value] if isinstance(value, str) else list(value)
    review = None
    for resource in resources:
        if re.search(r":app/[^/]+/[^/]+/detailedprofiler/", resource, re.I):
            return f"grants on DetailedProfiler apps ({resource})", None
        verified, maybe = paths.match(resource)
        if verified:
            return verified, None
        review = review or maybe
    return None, review


# --- (b) logs, (c) IAM, (d) apps, (e) automation ----------------------------------------------------


def _log_streams(logs: Any, report: AuditReport, paths: LegacyPaths, price: float) -> None:

    from botocore.exceptions import ClientError  # lazily: the `aws` extra

    for job in sorted(paths.rule_jobs):
        try:
            pages = logs.get_paginator("describe_log_streams").paginate(
                logGroupName=PROCESSING_LOG_GROUP, logStreamNamePrefix=f"{job}/"
            )
            streams = [s for page in pages for s in page.get("logStreams", [])]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ResourceNotFoundException":
                return
            report.incomplete.append(f"{PROCESSING_LOG_GROUP}: {code}")
            return
        for stream in streams:
            name = stream["logStreamName"]
            size, complete = _stream_bytes(logs, name)
            size = max(size, int(stream.get("storedBytes", 0) or 0))
            report.findings.append(
                Finding(
                    kind="log-stream",
                    resource=f"{PROCESSING_LOG_GROUP}:{name}",
                    why=f"log of rule-evaluation job {job}" + ("" if complete else " (bytes: a lower bound)"),
                    bytes=size,
                    monthly_usd=size / GB * price,
                    command="profstack legacy cleanup --delete-log-streams --apply",
                )
            )


def _stream_bytes(logs: Any, stream: str) -> tuple[int, bool]:
    """Bytes of the stream's messages. DescribeLogStreams' storedBytes is no longer filled in (0)."""
    size, token = 0, None
    for _ in range(MAX_LOG_PAGES):
        kwargs: dict[str, Any] = {"logGroupName": PROCESSING_LOG_GROUP, "logStreamName": stream, "startFromHead": True}
        if token:
            kwargs["nextToken"] = token
        page = logs.get_log_events(**kwargs)
        size += sum(len(e.get("message", "").encode()) for e in page.get("events", []))
        new = page.get("nextForwardToken")
        if not page.get("events") or new == token:
            return size, True
        token = new
    return size, False


def _iam(iam: Any, report: AuditReport, paths: LegacyPaths) -> None:
    policy_only: dict[str, bool] = {}
    for page in iam.get_paginator("list_policies").paginate(Scope="Local"):
        for policy in page.get("Policies", []):
            arn = policy["Arn"]
            version = iam.get_policy_version(PolicyArn=arn, VersionId=policy["DefaultVersionId"])
            verdict = _classify_document(version["PolicyVersion"]["Document"], paths)
            if verdict is None:
                continue
            reason, only, verified = verdict
            policy_only[arn] = only and verified
            report.findings.append(
                Finding(
                    kind="iam-policy",
                    resource=arn,
                    why=reason,
                    verified=verified,
                    profiler_only=only if verified else None,
                    command=(
                        f"aws iam delete-policy --policy-arn {arn}   # after detaching it"
                        if only and verified
                        else f"aws iam get-policy-version --policy-arn {arn} --version-id {policy['DefaultVersionId']}"
                    ),
                )
            )
    for page in iam.get_paginator("list_roles").paginate():
        for role in page.get("Roles", []):
            _role(iam, role, report, paths, policy_only)


def _classify_document(document: Any, paths: LegacyPaths) -> tuple[str, bool, bool] | None:
    """(reason, every statement Profiler's, verified) or None when nothing names Profiler paths."""
    statements = _statements(document)
    reasons, reviews = [], []
    for statement in statements:
        verified, review = _statement_reason(statement, paths)
        if verified:
            reasons.append(verified)
        elif review:
            reviews.append(review)
    if reasons:
        return "; ".join(sorted(set(reasons))), len(reasons) == len(statements), True
    if reviews:
        return reviews[0], False, False
    return None


def _role(
    iam: Any, role: dict[str, Any], report: AuditReport, paths: LegacyPaths, policy_only: dict[str, bool]
) -> None:
    name = role["RoleName"]
    verdicts: list[bool] = []  # per policy: Profiler-only?
    reasons: list[str] = []
    for policy_name in iam.list_role_policies(RoleName=name).get("PolicyNames", []):
        document = iam.get_role_policy(RoleName=name, PolicyName=policy_name)["PolicyDocument"]
        verdict = _classify_document(document, paths)
        if verdict is not None and verdict[2]:
            reasons.append(f"inline {policy_name}: {verdict[0]}")
            verdicts.append(verdict[1])
        else:
            verdicts.append(False)
    for attached in iam.list_attached_role_policies(RoleName=name).get("AttachedPolicies", []):
        arn = attached["PolicyArn"]
        if arn in policy_only:
            reasons.append(f"attached {attached['PolicyName']}")
            verdicts.append(policy_only[arn])
        else:
            verdicts.append(False)
    if not reasons:
        return
    only = bool(verdicts) and all(verdicts)
    report.findings.append(
        Finding(
            kind="iam-role",
            resource=role["Arn"],
            why=("exists only for Profiler: " if only else "names Profiler output: ") + "; ".join(reasons),
            profiler_only=only,
            command=f"aws iam delete-role --role-name {name}   # after removing its policies"
            if only
            else f"aws iam list-role-policies --role-name {name}",
        )
    )


def _apps(sm: SageMakerClient, report: AuditReport) -> None:
    for page in sm.get_paginator("list_apps").paginate():
        for app in page.get("Apps", []):
            if app.get("AppType") != "DetailedProfiler" or app.get("Status") in {"Deleted", "Deleting"}:
                continue
            owner = app.get("UserProfileName") or app.get("SpaceName") or "?"
            report.findings.append(
                Finding(
                    kind="app",
                    resource=f"{app['DomainId']}/{owner}/DetailedProfiler/{app['AppName']}",
                    why=f"DetailedProfiler app ({app.get('Status', '?')}) in domain {app['DomainId']}",
                    command="profstack legacy cleanup --apply",
                    extra=tuple(
                        (k, str(app[k])) for k in ("DomainId", "UserProfileName", "SpaceName", "AppName") if app.get(k)
                    ),
                )
            )


def _reacts_to_rule_jobs(pattern: Any, paths: LegacyPaths) -> str | None:
    """An event pattern on processing-job state changes that selects profiler rule-evaluation jobs."""
    if not isinstance(pattern, dict):
        return None
    detail_types = pattern.get("detail-type", [])
    if "SageMaker Processing Job State Change" not in detail_types:
        return None
    names = (pattern.get("detail") or {}).get("ProcessingJobName")
    if names is None:
        return None  # every processing job: not Profiler's
    for name in names if isinstance(names, list) else [names]:
        if isinstance(name, str) and name in paths.rule_jobs:
            return f"selects rule-evaluation job {name}"
        if isinstance(name, dict):
            for op in ("prefix", "wildcard", "suffix"):
                value = name.get(op)
                if not isinstance(value, str):
                    continue
                for job in paths.rule_jobs:
                    hit = (
                        (op == "prefix" and job.startswith(value))
                        or (op == "suffix" and job.endswith(value))
                        or (op == "wildcard" and _wildcard(value).fullmatch(job))
                    )
                    if hit:
                        return f"selects rule-evaluation jobs by {op} {value!r} (e.g. {job})"
    return None


def _automation(events: Any, sfn: Any, lam: Any, report: AuditReport, paths: LegacyPaths) -> None:
    flagged_targets: dict[str, str] = {}
    if events is not None:
        for page in events.get_paginator("list_rules").paginate():
            for rule in page.get("Rules", []):
                targets = events.list_targets_by_rule(
                    Rule=rule["Name"], EventBusName=rule.get("EventBusName", "default")
                )
                pattern = json.loads(rule["EventPattern"]) if rule.get("EventPattern") else None
                texts = [json.dumps(pattern or {})] + [json.dumps(t) for t in targets.get("Targets", [])]
                reason = _reacts_to_rule_jobs(pattern, paths)
                review = None
                for text in texts:
                    if reason:
                        break
                    reason, review = paths.match(text)[0], review or paths.match(text)[1]
                if reason or review:
                    if reason:
                        for target in targets.get("Targets", []):
                            flagged_targets[target["Arn"]] = rule["Name"]
                    report.findings.append(
                        Finding(
                            kind="rule",
                            resource=rule["Arn"],
                            why=reason or review or "",
                            verified=reason is not None,
                            command=f"aws events disable-rule --name {rule['Name']}   # review its targets first",
                        )
                    )
    if sfn is not None:
        for page in sfn.get_paginator("list_state_machines").paginate():
            for machine in page.get("stateMachines", []):
                arn = machine["stateMachineArn"]
                definition = sfn.describe_state_machine(stateMachineArn=arn)["definition"]
                reason, review = _match_json(definition, paths)
                if arn in flagged_targets and not reason:
                    reason = f"target of EventBridge rule {flagged_targets[arn]}"
                if reason or review:
                    report.findings.append(
                        Finding(
                            kind="state-machine",
                            resource=arn,
                            why=reason or review or "",
                            verified=reason is not None,
                            command=f"aws stepfunctions describe-state-machine --state-machine-arn {arn}",
                        )
                    )
    if lam is not None:
        for page in lam.get_paginator("list_functions").paginate():
            for function in page.get("Functions", []):
                arn = function["FunctionArn"]
                env = (function.get("Environment") or {}).get("Variables", {})
                reason, review = _match_json(json.dumps(env), paths)
                rule_name = flagged_targets.get(arn) or flagged_targets.get(arn.rsplit(":", 1)[0])
                if not reason and rule_name:
                    reason = f"target of EventBridge rule {rule_name}"
                if reason or review:
                    report.findings.append(
                        Finding(
                            kind="lambda",
                            resource=arn,
                            why=reason or review or "",
                            verified=reason is not None,
                            command=f"aws lambda get-function-configuration --function-name {function['FunctionName']}",
                        )
                    )


def _match_json(text: str, paths: LegacyPaths) -> tuple[str | None, str | None]:
    try:
        value = json.loads(text)
    except ValueError:
        return paths.match(text)
    review = None
    blob = json.dumps(value)
    for string in _strings(value):
        verified, maybe = paths.match(string)
        if verified:
            return verified, None
        if maybe:
            # a path built from parts: the bucket may sit in a sibling field ("Bucket": "...")
            verified_blob, _ = paths.match(blob)
            if verified_blob:
                return verified_blob, None
            review = review or maybe
    if "ProfilerRuleEvaluationStatuses" in blob:
        return "reads ProfilerRuleEvaluationStatuses", None
    return None, review


@dataclass
class AccountClients:
    sagemaker: Any
    s3: Any
    logs: Any = None
    iam: Any = None
    events: Any = None
    stepfunctions: Any = None
    lambda_: Any = None
    account_id: str | None = None  # the caller's account (STS): S3 calls name it as ExpectedBucketOwner


def audit_account(
    clients: AccountClients,
    *,
    since_days: int = 90,
    max_jobs: int = 1000,
    now: datetime | None = None,
    s3_price: float = S3_USD_PER_GB_MONTH,
    logs_price: float = LOGS_USD_PER_GB_MONTH,
) -> AuditReport:
    """The whole checklist, (a) to (e). A service that answers AccessDenied marks the report incomplete."""
    report = audit(
        clients.sagemaker,
        clients.s3,
        since_days=since_days,
        max_jobs=max_jobs,
        now=now,
        s3_price=s3_price,
        expected_owner=clients.account_id,
    )
    report.prices = (s3_price, logs_price)
    paths = LegacyPaths.of(report.jobs)

    def logs() -> None:
        if clients.logs is not None:
            _log_streams(clients.logs, report, paths, logs_price)

    def iam() -> None:
        if clients.iam is not None:
            _iam(clients.iam, report, paths)

    def apps() -> None:
        _apps(clients.sagemaker, report)

    def automation() -> None:
        _automation(clients.events, clients.stepfunctions, clients.lambda_, report, paths)

    steps: list[tuple[str, Callable[[], None]]] = [
        ("logs", logs),
        ("iam", iam),
        ("sagemaker apps", apps),
        ("events/stepfunctions/lambda", automation),
    ]
    from botocore.exceptions import ClientError  # lazily: the `aws` extra

    for what, step in steps:
        try:
            step()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code not in {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}:
                raise
            report.incomplete.append(f"{what}: {code}")
    return report


# --- cleanup ----------------------------------------------------------------------------------------


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
        # a versioned bucket keeps an expired object as a noncurrent version (with its tag) behind a
        # delete marker: without this its bytes are never freed. Ignored by unversioned buckets.
        "NoncurrentVersionExpiration": {"NoncurrentDays": 1},
    }
    others = [dict(rule) for rule in existing if rule.get("ID") != EXPIRY_RULE_ID]
    if len(others) + 1 > MAX_LIFECYCLE_RULES:
        raise LegacyProfilerError(
            f"bucket already has {len(others)} lifecycle rules; the limit is {MAX_LIFECYCLE_RULES}"
        )
    return [*others, ours]


def current_lifecycle_rules(s3: S3Client, bucket: str, *, expected_owner: str | None = None) -> list[dict[str, Any]]:
    return _current_lifecycle(s3, bucket, expected_owner=expected_owner)[0]


def _current_lifecycle(
    s3: S3Client, bucket: str, *, expected_owner: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """(rules, TransitionDefaultMinimumObjectSize): the bucket's whole lifecycle configuration."""

    from botocore.exceptions import ClientError  # lazily: the `aws` extra

    from profstack.migrate.rule_output import owner_kwargs

    try:
        response = s3.get_bucket_lifecycle_configuration(Bucket=bucket, **owner_kwargs(expected_owner))
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchLifecycleConfiguration":
            return [], None
        raise
    rules: list[dict[str, Any]] = list(response["Rules"])  # type: ignore[arg-type]
    return rules, response.get("TransitionDefaultMinimumObjectSize")


def apply_expiry_rule(
    s3: S3Client, bucket: str, *, days: int, apply: bool, expected_owner: str | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """Returns (merged rules, changed). Writes only with apply=True and only when something changes.

    PutBucketLifecycleConfiguration replaces the whole configuration: the bucket's other rules and
    its TransitionDefaultMinimumObjectSize (omitted, it resets to all_storage_classes_128K) are
    written back as they were."""
    from profstack.migrate.rule_output import owner_kwargs

    existing, minimum_size = _current_lifecycle(s3, bucket, expected_owner=expected_owner)
    merged = merge_expiry_rule(existing, days=days)
    changed = merged != existing
    if apply and changed:
        extra: dict[str, Any] = owner_kwargs(expected_owner)
        if minimum_size:
            extra["TransitionDefaultMinimumObjectSize"] = minimum_size
        s3.put_bucket_lifecycle_configuration(
            Bucket=bucket,
            LifecycleConfiguration={"Rules": merged},  # type: ignore[typeddict-item]
            **extra,
        )
    return merged, changed


def disable_profiler(sm: SageMakerClient, jobs: Iterable[ProfilerJob], *, apply: bool) -> list[str]:
    """Names of in-progress jobs whose Profiler is (or would be) turned off."""
    targets = [j.name for j in jobs if j.status == "InProgress" and j.profiler_enabled]
    if apply:
        for name in targets:
            sm.update_training_job(TrainingJobName=name, ProfilerConfig={"DisableProfiler": True})
    return targets


@dataclass
class CleanupResult:
    tagged: int = 0
    already_tagged: int = 0
    tag_failures: list[str] = field(default_factory=list)
    expiry_rules: list[str] = field(default_factory=list)  # buckets whose lifecycle got (or would get) the rule
    apps: list[str] = field(default_factory=list)
    log_streams: list[str] = field(default_factory=list)
    left_alone: list[Finding] = field(default_factory=list)  # IAM, rules, state machines, functions, review


def cleanup(
    report: AuditReport,
    clients: AccountClients,
    *,
    apply: bool,
    expire_days: int = 30,
    delete_log_streams: bool = False,
    on_object: Callable[[str, int], None] | None = None,
) -> CleanupResult:
    """Act on the verified findings only; with apply=False count what would be done and change nothing."""
    from profstack.migrate.rule_output import TaggingError, iter_prefix_keys, merge_object_tag

    result = CleanupResult()
    owner = clients.account_id  # every S3 call names it: never a write to another account's bucket
    tag_key, tag_value = LEGACY_RULE_OUTPUT_TAG
    buckets: set[str] = set()
    for finding in report.found:
        if finding.kind in LEGACY_FOLDERS:
            location = S3Prefix.parse(finding.resource)
            buckets.add(location.bucket)
            keys = iter_prefix_keys(
                clients.s3, location.bucket, [location.prefix.rstrip("/") + "/"], expected_owner=owner
            )
            for key, size in keys:
                if on_object is not None:  # the exact listing: s3://bucket/key and its size
                    on_object(f"s3://{location.bucket}/{key}", size)
                if not apply:
                    result.tagged += 1
                    continue
                try:
                    if merge_object_tag(clients.s3, location.bucket, key, tag_key, tag_value, expected_owner=owner):
                        result.tagged += 1
                    else:
                        result.already_tagged += 1
                except TaggingError as exc:
                    result.tag_failures.append(str(exc))
        elif finding.kind == "app":
            extra = dict(finding.extra)
            result.apps.append(finding.resource)
            if apply:
                kwargs = {"DomainId": extra["DomainId"], "AppType": "DetailedProfiler", "AppName": extra["AppName"]}
                if "UserProfileName" in extra:
                    kwargs["UserProfileName"] = extra["UserProfileName"]
                else:
                    kwargs["SpaceName"] = extra["SpaceName"]
                clients.sagemaker.delete_app(**kwargs)
        elif finding.kind == "log-stream" and delete_log_streams:
            group, _, stream = finding.resource.partition(":")
            result.log_streams.append(finding.resource)
            if apply:
                clients.logs.delete_log_stream(logGroupName=group, logStreamName=stream)
        else:
            result.left_alone.append(finding)
    result.left_alone += report.review
    for bucket in sorted(buckets):
        _, changed = apply_expiry_rule(clients.s3, bucket, days=expire_days, apply=apply, expected_owner=owner)
        if changed:
            result.expiry_rules.append(bucket)
    return result
