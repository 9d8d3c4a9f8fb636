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

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from profstack.layout import LEGACY_RULE_OUTPUT_TAG
from profstack.migrate.legacy_automation import (
    Graph,
    Node,
    other_targets,
    read_functions,
    read_iam,
    read_pipelines,
    read_rules,
    read_state_machines,
    resolve,
)
from profstack.migrate.legacy_evidence import (
    DEBUGGER_CLOSED_TO_NEW_CUSTOMERS,
    PROFILER_REPORT_FOLDER,
    Evidence,
    LegacyPaths,
    Location,
    describe_failure,
    iam_action,
)
from profstack.migrate.legacy_monitoring import Watched, Watchers, read_alarms, read_dashboards

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
#: the sections that read what may run as an IAM role
RUNNER_SECTIONS = frozenset({"eventbridge rules", "step functions", "lambda functions", "sagemaker pipelines"})


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
    noncurrent: int = 0  # object versions behind the current ones (a versioned bucket): billed too


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
    debugger_rules: list[str] = field(default_factory=list)  # DebugRuleConfigurations: Debugger, not Profiler
    debugger_rule_jobs: list[str] = field(default_factory=list)
    #: ProfilerConfig says DisableProfiler: true and no Profiler rule is configured: the job may still have written
    #: profiler-output/ before it was turned off (UpdateTrainingJob, `profstack legacy disable-profiler`)
    past_only: bool = False
    region: str = ""
    role_arn: str = ""

    @property
    def profiled_now(self) -> bool:
        """The Profiler is on, or Profiler rules are configured."""
        return self.profiler_enabled or bool(self.profiler_rules)

    @property
    def uses_profiler(self) -> bool:
        return self.profiled_now or self.past_only

    def folder_verdict(self, folder: str) -> str:
        """Whose a rule-output/ sub-folder is. SageMaker names it after its rule configuration (`ProfilerReport-<ts>`,
        `LossNotDecreasing`), so the job's own rule names decide, exact names first, Debugger's before Profiler's:
        a Debugger rule may be called `ProfilerReportCustom`. The `ProfilerReport` stem counts only for a folder no
        rule of the job names."""
        if folder in self.debugger_rules:
            return "debugger"
        if folder in {r for r, _ in self.profiler_rules}:
            return "profiler"
        candidates = [(r, "debugger") for r in self.debugger_rules] + [(r, "profiler") for r, _ in self.profiler_rules]
        named = [(len(r), owner) for r, owner in candidates if folder.startswith(f"{r}-")]
        if named:
            return max(named)[1]  # the longest rule name that the folder carries, with a suffix
        if folder.startswith(PROFILER_REPORT_FOLDER) and not any(
            r.startswith(PROFILER_REPORT_FOLDER) for r in self.debugger_rules
        ):
            return "profiler"
        return "review"

    @property
    def legacy_bytes(self) -> int:
        return sum(u.bytes for u in self.usage)

    def prefixes(self, folders: Sequence[str] = LEGACY_FOLDERS) -> list[S3Prefix]:
        if self.past_only:  # only what the Profiler wrote before it was turned off; no rule ran
            folders = [f for f in folders if f == "profiler-output"]
        return [root.child(self.name, folder) for root in self.output_roots for folder in folders]


@dataclass(frozen=True)
class Finding:
    """One legacy resource. `verified`: derived from a profiled job; else listed for review only."""

    # rule-output | profiler-output | log-stream | log-group | iam-policy | iam-role | app | rule | state-machine
    # | lambda
    kind: str
    resource: str  # S3 URI or ARN (log stream: group:stream)
    why: str
    bytes: int | None = None
    monthly_usd: float | None = None
    verified: bool = True
    profiler_only: bool | None = None  # IAM: every statement (policy) / policy (role) is Profiler's
    command: str = ""  # what to run to act on it (cleanup, or the AWS CLI for what cleanup never edits)
    extra: tuple[tuple[str, str], ...] = ()
    owner: str = "profiler"  # "debugger": Debugger's, named and kept (never found, never cleaned up)
    region: str = ""  # where it is (S3 output: the job's region); empty: the audit's own region

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
        if self.region:
            out["region"] = self.region
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
    debugger_jobs: list[ProfilerJob] = field(default_factory=list)  # Debugger rules only: kept
    failed_sections: set[str] = field(default_factory=set)  # read incompletely: cleanup does not act on them
    versioned: dict[str, bool] = field(default_factory=dict)  # bucket -> versioning on (or suspended)
    job_roles: dict[str, list[str]] = field(default_factory=dict)  # role ARN -> a few training jobs that ran as it
    regions: list[str] = field(default_factory=list)  # the regions audited whole

    def fail(self, section: str, service: str, exc: Exception) -> None:
        """One line naming what failed (the missing permission, when denied); the rest of the audit goes on."""
        self.failed_sections.add(section)
        self.incomplete.append(describe_failure(section, service, exc))

    def complete(self, section: str) -> bool:
        """The section was read completely, in every region (`s3 output` covers `s3 output [eu-west-1]`)."""
        return not any(f == section or f.startswith(f"{section} [") for f in self.failed_sections)

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
        return [f for f in self.findings if f.verified and f.owner == "profiler"]

    @property
    def review(self) -> list[Finding]:
        return [f for f in self.findings if not f.verified and f.owner == "profiler"]

    @property
    def debugger(self) -> list[Finding]:
        return [f for f in self.findings if f.owner == "debugger"]

    @property
    def monthly_usd(self) -> float:
        return sum(f.monthly_usd or 0.0 for f in self.found)

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "regions": self.regions,
            "jobs_scanned": self.scanned,
            "jobs_using_profiler": [
                {
                    "name": j.name,
                    **({"region": j.region} if j.region else {}),
                    "status": j.status,
                    "created": j.created.isoformat(),
                    "profiler_enabled": j.profiler_enabled,
                    **({"turned_off_after_profiling": True} if j.past_only else {}),
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
            "debugger": {
                "closed_to_new_customers": DEBUGGER_CLOSED_TO_NEW_CUSTOMERS,
                "jobs": [{"name": j.name, "rules": j.debugger_rules} for j in self.debugger_jobs],
                "kept": [f.to_dict() for f in self.debugger],
            },
            "incomplete": self.incomplete,
            "incomplete_sections": sorted(self.failed_sections),
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


def _describe(sm: SageMakerClient, name: str, roles: dict[str, list[str]] | None = None) -> ProfilerJob | None:
    job = sm.describe_training_job(TrainingJobName=name)
    if roles is not None and job.get("RoleArn"):
        named = roles.setdefault(job["RoleArn"], [])
        if len(named) < 3:  # a few names say which jobs run as a role; every job's name is not needed
            named.append(name)
    profiler = job.get("ProfilerConfig") or {}
    statuses = job.get("ProfilerRuleEvaluationStatuses", [])
    rules = [(s.get("RuleConfigurationName", "?"), s.get("RuleEvaluationStatus", "?")) for s in statuses]
    rules += [
        (config["RuleConfigurationName"], "Configured")
        for config in job.get("ProfilerRuleConfigurations", [])
        if config["RuleConfigurationName"] not in {n for n, _ in rules}
    ]
    enabled = bool(profiler) and not profiler.get("DisableProfiler", False)
    # turned off: before it was (UpdateTrainingJob with DisableProfiler: true), the Profiler may have written
    # profiler-output/; whether it did is read from S3, never assumed
    past_only = bool(profiler) and not enabled and not rules
    debug_statuses = job.get("DebugRuleEvaluationStatuses", [])
    debugger_rules = [c["RuleConfigurationName"] for c in job.get("DebugRuleConfigurations", [])]
    debugger_rules += [
        s["RuleConfigurationName"]
        for s in debug_statuses
        if s.get("RuleConfigurationName") and s["RuleConfigurationName"] not in debugger_rules
    ]
    if not enabled and not rules and not debugger_rules and not past_only:
        return None
    roots: list[S3Prefix] = []
    for uri in (profiler.get("S3OutputPath"), job.get("OutputDataConfig", {}).get("S3OutputPath")):
        if uri:
            root = S3Prefix.parse(uri)
            if root not in roots:
                roots.append(root)
    # an ARN spells the job's name in lower case; the name itself (and its log streams) may not be
    rule_jobs = [s["RuleEvaluationJobArn"].rsplit("/", 1)[-1] for s in statuses if s.get("RuleEvaluationJobArn")]
    debugger_rule_jobs = [
        s["RuleEvaluationJobArn"].rsplit("/", 1)[-1] for s in debug_statuses if s.get("RuleEvaluationJobArn")
    ]
    return ProfilerJob(
        name=name,
        status=job["TrainingJobStatus"],
        created=job["CreationTime"],
        profiler_enabled=enabled,
        profiler_rules=rules,
        output_roots=roots,
        rule_jobs=rule_jobs,
        debugger_rules=debugger_rules,
        debugger_rule_jobs=debugger_rule_jobs,
        past_only=past_only,
        role_arn=str(job.get("RoleArn") or ""),
    )


def _list_current(s3: S3Client, location: S3Prefix, expected_owner: str | None) -> list[tuple[str, int, bool]]:
    from profstack.migrate.rule_output import owner_kwargs

    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=location.bucket, Prefix=location.prefix, **owner_kwargs(expected_owner)
    )
    return [(item["Key"], int(item["Size"]), True) for page in pages for item in page.get("Contents", [])]


def _list_versions(s3: S3Client, location: S3Prefix, expected_owner: str | None) -> list[tuple[str, int, bool]]:
    """Every version (key, size, is latest) under the prefix; delete markers hold no bytes and are left out."""
    from profstack.migrate.rule_output import owner_kwargs

    pages = s3.get_paginator("list_object_versions").paginate(
        Bucket=location.bucket, Prefix=location.prefix, **owner_kwargs(expected_owner)
    )
    return [
        (v["Key"], int(v.get("Size", 0)), bool(v.get("IsLatest"))) for page in pages for v in page.get("Versions", [])
    ]


def is_versioned(s3: S3Client, bucket: str, report: AuditReport, expected_owner: str | None = None) -> bool:
    """Versioning on or suspended (both keep noncurrent versions); asked once per bucket."""
    from botocore.exceptions import ClientError

    from profstack.migrate.rule_output import owner_kwargs

    if bucket not in report.versioned:
        try:
            status = s3.get_bucket_versioning(Bucket=bucket, **owner_kwargs(expected_owner)).get("Status")
        except ClientError as exc:
            report.fail(f"s3 versioning of {bucket}", "s3", exc)
            status = None
        report.versioned[bucket] = status in {"Enabled", "Suspended"}
    return report.versioned[bucket]


def _usage(location: S3Prefix, folder: str, items: list[tuple[str, int, bool]]) -> PrefixUsage:
    current = [i for i in items if i[2]]
    return PrefixUsage(
        location, len(current), sum(size for _, size, _ in items), folder, noncurrent=len(items) - len(current)
    )


def _groups(location: S3Prefix, items: list[tuple[str, int, bool]]) -> dict[str | None, list[tuple[str, int, bool]]]:
    """rule-output/'s objects by the sub-folder SageMaker wrote them into (None: directly in the folder)."""
    groups: dict[str | None, list[tuple[str, int, bool]]] = {}
    for item in items:
        rest = item[0][len(location.prefix) :]
        segment, slash, _ = rest.partition("/")
        groups.setdefault(segment if slash else None, []).append(item)
    return groups


def _folder_finding(job: ProfilerJob, usage: PrefixUsage, verdict: str, what: str, price: float) -> Finding:
    running = job.status not in TERMINAL_JOB_STATUSES
    size = f"{usage.objects} objects" + (f", {usage.noncurrent} older versions" if usage.noncurrent else "")
    if verdict == "debugger":
        return Finding(
            kind=usage.folder,
            resource=str(usage.location),
            why=f"{what} of training job {job.name} ({size}): Debugger's, kept (Debugger is not Profiler)",
            region=job.region,
            bytes=usage.bytes,
            verified=False,
            owner="debugger",
        )
    if verdict == "review":
        return Finding(
            kind=usage.folder,
            resource=str(usage.location),
            why=f"{what} of training job {job.name} ({size}) belongs to none of its Profiler rules: review",
            region=job.region,
            bytes=usage.bytes,
            verified=False,
        )
    past = "; the job now says DisableProfiler: true, but the Profiler wrote this before it was turned off"
    return Finding(
        kind=usage.folder,
        resource=str(usage.location),
        why=f"{what} of training job {job.name} ({size})"
        + (past if job.past_only else "")
        + (f"; the job is {job.status}: its rules may still write here, review after it ends" if running else ""),
        region=job.region,
        bytes=usage.bytes,
        monthly_usd=usage.bytes / GB * price,
        # a running job's folder is listed for review, never tagged for expiry by cleanup
        verified=not running,
        command="profstack legacy cleanup --apply (after the job ends)"
        if running
        else "profstack legacy cleanup --apply",
    )


def _measure_folder(
    s3: S3Client,
    job: ProfilerJob,
    location: S3Prefix,
    *,
    folder: str,
    report: AuditReport,
    price: float,
    owner: str | None,
) -> None:
    items = _list_current(s3, location, owner)
    if not items:
        return
    if is_versioned(s3, location.bucket, report, owner):
        items = _list_versions(s3, location, owner)
    whole = _usage(location, folder, items)
    if folder == "profiler-output" or job.profiled_now:
        job.usage.append(whole)
    if folder == "profiler-output" or (job.profiled_now and not job.debugger_rules):
        # no Debugger rule ran: everything SageMaker wrote here is the Profiler's
        report.findings.append(_folder_finding(job, whole, "profiler", f"{folder}/", price))
        return
    # Debugger rules write beside Profiler's: split by rule, never tagged whole
    for segment, part in sorted(_groups(location, items).items(), key=lambda kv: kv[0] or ""):
        if segment is None:
            usage = _usage(location, folder, part)
            report.findings.append(_folder_finding(job, usage, "review", f"{folder}/ (loose objects)", price))
            continue
        usage = _usage(location.child(segment), folder, part)
        verdict = job.folder_verdict(segment)
        if verdict == "profiler" and not job.profiled_now:
            verdict = "review"  # a Profiler-looking folder of a job that never ran the Profiler
        report.findings.append(_folder_finding(job, usage, verdict, f"{folder}/{segment}/", price))


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

    Every S3 call names expected_owner (the caller's account) as the bucket's owner, so a job whose output lies in
    another account's bucket gets no finding (S3 answers 403): cleanup never tags, nor writes the lifecycle of, a
    bucket this account does not own. The report says so under `incomplete`. Measuring needs the owner. A job with
    Debugger rules has its rule-output/ split by rule: Debugger's folders are named and kept, never tagged."""
    since = (now or datetime.now(UTC)) - timedelta(days=since_days)
    report = AuditReport(jobs=[], scanned=0, since=since)
    audit_region(
        report,
        sm,
        s3,
        max_jobs=max_jobs,
        measure_output=measure_output,
        s3_price=s3_price,
        expected_owner=expected_owner,
    )
    return report


def audit_region(
    report: AuditReport,
    sm: SageMakerClient,
    s3: S3Client,
    *,
    max_jobs: int,
    measure_output: bool = True,
    s3_price: float = S3_USD_PER_GB_MONTH,
    expected_owner: str | None = None,
    region: str = "",
    section: Callable[[str], str] = str,
) -> None:
    """One region's training jobs (since report.since) and their output, added to the report."""
    from botocore.exceptions import ClientError  # lazily: the `aws` extra

    if measure_output and not expected_owner:
        raise LegacyProfilerError("measuring S3 output needs the caller's account: every S3 call names it as owner")
    scanned = 0
    try:
        for name in _training_job_names(sm, report.since, max_jobs + 1):  # one more: to know there are more
            if scanned >= max_jobs:
                where = f" in {region}" if region else ""
                report.incomplete.append(
                    f"more than {max_jobs} training jobs{where} since {report.since:%Y-%m-%d}: only the {max_jobs} "
                    "newest were read (raise --max-jobs)"
                )
                break
            scanned += 1
            report.scanned += 1
            job = _describe(sm, name, report.job_roles)
            if job is None:
                continue
            job.region = region
            if measure_output:
                _measure_job(s3, job, report, s3_price, expected_owner or "", section=section)
            if job.past_only and measure_output:  # turned off: a Profiler job only if it left profiler-output/
                job.past_only = any(u.folder == "profiler-output" for u in job.usage)
            if job.uses_profiler or job.debugger_rules:
                (report.jobs if job.uses_profiler else report.debugger_jobs).append(job)
    except ClientError as exc:
        report.fail(section("training jobs"), "sagemaker", exc)


def _measure_job(
    s3: S3Client,
    job: ProfilerJob,
    report: AuditReport,
    price: float,
    owner: str,
    *,
    section: Callable[[str], str] = str,
) -> None:
    from botocore.exceptions import ClientError

    folders: tuple[str, ...] = LEGACY_FOLDERS
    if not job.profiled_now:  # Debugger's rules, or what the Profiler wrote before it was turned off
        folders = ("profiler-output",) * job.past_only + ("rule-output",) * bool(job.debugger_rules)
    for root in job.output_roots:
        for folder in folders:
            location = root.child(job.name, folder)
            try:
                _measure_folder(s3, job, location, folder=folder, report=report, price=price, owner=owner)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code in {"AccessDenied", "NoSuchBucket"}:
                    report.incomplete.append(f"{location}: {code} (or not account {owner}'s bucket): left alone")
                    continue
                report.fail(section("s3 output"), "s3", exc)


def legacy_paths(report: AuditReport) -> LegacyPaths:
    """The folders and rule jobs the verified jobs make Profiler's, and those Debugger's."""
    profiler: list[Location] = []
    debugger: list[Location] = []
    for job in [*report.jobs, *report.debugger_jobs]:
        for root in job.output_roots:
            base = root.child(job.name).prefix
            if job.uses_profiler:
                profiler.append(Location(root.bucket, f"{base}profiler-output/", job.name))
                if job.past_only:
                    pass  # no rule ran: only profiler-output/ is the Profiler's
                elif not job.debugger_rules:
                    profiler.append(Location(root.bucket, f"{base}rule-output/", job.name))
                else:
                    stems = {r for r, _ in job.profiler_rules}
                    if not any(r.startswith(PROFILER_REPORT_FOLDER) for r in job.debugger_rules):
                        stems.add(PROFILER_REPORT_FOLDER)  # a Debugger rule named ProfilerReport... keeps it exact
                    for rule in sorted(stems):
                        profiler.append(Location(root.bucket, f"{base}rule-output/{rule}", job.name))
            for rule in job.debugger_rules:
                debugger.append(Location(root.bucket, f"{base}rule-output/{rule}", job.name))
            if job.debugger_rules:
                debugger.append(Location(root.bucket, f"{base}debug-output/", job.name))
    return LegacyPaths(
        prefixes=tuple(profiler),
        rule_jobs=frozenset(r.lower() for j in report.jobs for r in j.rule_jobs),
        debugger_prefixes=tuple(debugger),
        debugger_rule_jobs=frozenset(
            r.lower() for j in [*report.jobs, *report.debugger_jobs] for r in j.debugger_rule_jobs
        ),
    )


# --- (b) logs, (d) apps ---------------------------------------------------------------------------------------


def _stream_candidates(job: ProfilerJob, rule_job: str) -> list[str]:
    """Prefixes to list log streams by. The ARN spells the rule job's name in lower case, but its log streams
    carry the name as created (`Job-A-ProfilerReport-...`), and DescribeLogStreams' prefix is case-sensitive:
    also list by the training job's own name, which starts the rule job's."""
    candidates = [f"{rule_job}/"]
    shared = 0
    for a, b in zip(job.name.lower(), rule_job, strict=False):
        if a != b:
            break
        shared += 1
    if shared:
        candidates.append(job.name[:shared])
    return list(dict.fromkeys(candidates))


def _log_streams(logs: Any, report: AuditReport, price: float, region: str = "") -> None:
    from botocore.exceptions import ClientError  # lazily: the `aws` extra

    here = [job for job in report.jobs if job.region == region]
    wanted = [(job, rj, "profiler") for job in here for rj in job.rule_jobs]
    wanted += [
        (job, rj, "debugger")
        for job in [*report.jobs, *report.debugger_jobs]
        if job.region == region
        for rj in job.debugger_rule_jobs
    ]
    seen: set[str] = set()
    for job, rule_job, owner in wanted:
        for prefix in _stream_candidates(job, rule_job.lower()):
            try:
                pages = logs.get_paginator("describe_log_streams").paginate(
                    logGroupName=PROCESSING_LOG_GROUP, logStreamNamePrefix=prefix
                )
                streams = [s for page in pages for s in page.get("logStreams", [])]
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code", "") == "ResourceNotFoundException":
                    return  # no processing job ever logged in this region
                raise
            for stream in streams:
                name = stream["logStreamName"]
                if name in seen or name.split("/", 1)[0].lower() != rule_job.lower():
                    continue
                seen.add(name)
                found = _stream_finding(logs, name, rule_job, owner=owner, stream=stream, price=price)
                report.findings.append(replace(found, region=region))


def _stream_finding(
    logs: Any, name: str, rule_job: str, *, owner: str, stream: dict[str, Any], price: float
) -> Finding:
    if owner == "debugger":
        return Finding(
            kind="log-stream",
            resource=f"{PROCESSING_LOG_GROUP}:{name}",
            why=f"log of Debugger rule-evaluation job {rule_job}: kept (Debugger is not Profiler)",
            verified=False,
            owner="debugger",
        )
    size, complete = _stream_bytes(logs, name)
    size = max(size, int(stream.get("storedBytes", 0) or 0))
    return Finding(
        kind="log-stream",
        resource=f"{PROCESSING_LOG_GROUP}:{name}",
        why=f"log of rule-evaluation job {rule_job}" + ("" if complete else " (bytes: a lower bound)"),
        bytes=size,
        monthly_usd=size / GB * price,
        command="profstack legacy cleanup --delete-log-streams --apply",
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


def _log_groups(logs: Any, report: AuditReport, price: float, region: str = "") -> None:
    """The log group of each Profiler function found (cleanup never deletes log groups: listed with the command)."""
    for finding in [f for f in report.found if f.kind == "lambda" and f.region == region]:
        group = f"/aws/lambda/{finding.resource.rsplit(':', 1)[-1]}"
        pages = logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=group)
        for page in pages:
            for found in page.get("logGroups", []):
                if found["logGroupName"] != group:
                    continue
                size = int(found.get("storedBytes", 0) or 0)
                report.findings.append(
                    Finding(
                        kind="log-group",
                        resource=group,
                        why=f"log group of Profiler function {finding.resource.rsplit(':', 1)[-1]}",
                        bytes=size,
                        monthly_usd=size / GB * price,
                        command=f"aws logs delete-log-group --log-group-name {group}{_in(region)}"
                        "   # after deleting the function",
                        region=region,
                    )
                )


def _apps(sm: SageMakerClient, report: AuditReport, region: str = "") -> None:
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
                    region=region,
                )
            )


# --- (c) IAM and (e) automation: one graph (legacy_automation) ------------------------------------------------


def _in(region: str) -> str:
    return f" --region {region}" if region else ""


def _command(node: Node, others: list[tuple[str, str]]) -> str:
    """What to run to act on a node; `others`: a rule's targets that are not Profiler's (a partial edit)."""
    where = _in(node.region)
    if node.kind == "rule":
        bus = node.extra.get("EventBusName", "default")
        on_bus = f" --event-bus-name {bus}" if bus != "default" else ""
        if others:
            ids = " ".join(t for t, a in node.targets if (t, a) not in others)
            return (
                f"aws events remove-targets --rule {node.name} --ids {ids}{on_bus}{where}   # only the Profiler targets"
            )
        return f"aws events disable-rule --name {node.name}{on_bus}{where}   # review its targets first"
    if node.kind == "state-machine":
        edit = "   # set DisableProfiler: true and drop the Profiler rules in its tasks" if _edit(node) else ""
        return f"aws stepfunctions describe-state-machine --state-machine-arn {node.arn}{edit}"
    if node.kind == "pipeline":
        return (
            f"aws sagemaker describe-pipeline --pipeline-name {node.name}{where}   # rebuild it with the Profiler off: "
            "profstack migrate smprof --write on the script that defines it, then upsert"
        )
    if node.kind == "lambda":
        return f"aws lambda get-function-configuration --function-name {node.name}{where}"
    if node.kind == "iam-policy":
        if node.profiler_only:
            return f"aws iam delete-policy --policy-arn {node.arn}   # after detaching it"
        return f"aws iam get-policy-version --policy-arn {node.arn} --version-id {node.extra.get('DefaultVersionId')}"
    if node.profiler_only:
        return f"aws iam delete-role --role-name {node.name}   # after removing its policies"
    return f"aws iam list-role-policies --role-name {node.name}"


def _edit(node: Node) -> bool:
    return node.evidence is not None and node.evidence.edit


GRAPH_ORDER = {"rule": 0, "state-machine": 1, "lambda": 2, "pipeline": 3, "iam-policy": 4, "iam-role": 5}


def graph_findings(graph: Graph) -> list[Finding]:
    findings: list[Finding] = []
    nodes = [n for n in graph.nodes.values() if n.kind in GRAPH_ORDER]
    for node in sorted(nodes, key=lambda n: (GRAPH_ORDER[n.kind], n.arn)):
        if node.evidence is None:
            continue
        verdict = node.evidence.verdict
        # a role is Profiler's only when it exists for Profiler alone; a shared role is edited through its policy
        if node.kind == "iam-role" and verdict == "profiler" and not node.profiler_only:
            continue
        why = node.evidence.reason
        others = other_targets(node, graph) if node.kind == "rule" else []
        if verdict == "profiler" and others:
            names = ", ".join(a.rsplit(":", 1)[-1] for _, a in others)
            why += f"; it also targets {names} (not Profiler's): remove only the Profiler targets"
        if verdict == "profiler" and _edit(node):
            why += ": an edit (turn the Profiler off in it), not a removal"
        iam = node.kind in {"iam-policy", "iam-role"}
        verified = verdict == "profiler"
        findings.append(
            Finding(
                kind=node.kind,
                resource=node.arn,
                why=(why + ": kept (Debugger is not Profiler)") if verdict == "debugger" else why,
                verified=verified,
                profiler_only=(node.profiler_only if verified else None) if iam else None,
                command="" if verdict == "debugger" else _command(node, others),
                owner="debugger" if verdict == "debugger" else "profiler",
                region=node.region,
            )
        )
    return findings


def monitoring_findings(watchers: Watchers, region: str) -> list[Finding]:
    """Alarms and dashboards that watch what the Profiler left (legacy_monitoring)."""
    findings: list[Finding] = []
    for name, (alarm, evidence) in sorted(watchers.alarms.items()):
        if evidence is not None:
            command = f"aws cloudwatch delete-alarms --alarm-names {name}{_in(region)}"
            if evidence.verdict == "review":  # it watches the Profiler's among other things: an edit, for a person
                command = (
                    f"aws cloudwatch describe-alarms --alarm-names {name} --alarm-types MetricAlarm CompositeAlarm"
                    f"{_in(region)}   # remove what watches the Profiler's"
                )
            findings.append(_watcher_finding("alarm", str(alarm.get("AlarmArn") or name), evidence, region, command))
    for name, arn, evidence, widgets in watchers.dashboards:
        if evidence is None:
            continue
        if evidence.edit or evidence.verdict == "review":
            command = (
                f"aws cloudwatch get-dashboard --dashboard-name {name}{_in(region)}   # remove widgets "
                + ", ".join(str(i) for i in widgets)
                + ", then put-dashboard"
            )
        else:
            command = f"aws cloudwatch delete-dashboards --dashboard-names {name}{_in(region)}"
        findings.append(_watcher_finding("dashboard", arn, evidence, region, command))
    return findings


def _watcher_finding(kind: str, resource: str, evidence: Evidence, region: str, command: str) -> Finding:
    debugger = evidence.verdict == "debugger"
    return Finding(
        kind=kind,
        resource=resource,
        why=evidence.reason + (": kept (Debugger is not Profiler)" if debugger else ""),
        verified=evidence.verdict == "profiler",
        command="" if debugger else command,
        owner="debugger" if debugger else "profiler",
        region=region,
    )


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
    cloudwatch: Any = None
    ec2: Any = None  # DescribeRegions: the regions enabled for the account, whose functions may run as its roles
    region: str = ""  # the region of these clients
    #: the same account's clients in another region (IAM is global: a role serves every region)
    regional: Callable[[str], AccountClients | None] | None = None
    audit_regions: tuple[str, ...] = ()  # more regions to audit whole, besides `region`

    def regional_clients(self) -> list[AccountClients]:
        """This region's clients, then those of each other region audited whole."""
        found = [self]
        for region in self.audit_regions:
            other = self.regional(region) if self.regional and region != self.region else None
            if other is not None:
                found.append(other)
        return found


def audit_account(
    clients: AccountClients,
    *,
    since_days: int = 90,
    max_jobs: int = 1000,
    now: datetime | None = None,
    s3_price: float = S3_USD_PER_GB_MONTH,
    logs_price: float = LOGS_USD_PER_GB_MONTH,
) -> AuditReport:
    """The whole checklist, (a) to (e), in each audited region; IAM once (it is global), with every enabled region's
    functions, state machines, rules and pipelines read as the users of its roles. A service that is denied or fails
    marks its section incomplete, in one line naming the missing permission; every other section is still read
    (cleanup skips incomplete ones)."""
    since = (now or datetime.now(UTC)) - timedelta(days=since_days)
    report = AuditReport(jobs=[], scanned=0, since=since, prices=(s3_price, logs_price))
    regions = clients.regional_clients()
    report.regions = [r.region for r in regions if r.region]
    for here in regions:
        audit_region(
            report,
            here.sagemaker,
            clients.s3,
            max_jobs=max_jobs,
            s3_price=s3_price,
            expected_owner=clients.account_id,
            region=here.region,
            section=_section_in(here, clients),
        )
    paths = legacy_paths(report)
    graph = Graph()
    _guarded(report, "iam", "iam", clients.iam, lambda c: read_iam(c, graph, paths))
    for here in regions:
        _read_region(report, here, _section_in(here, clients), graph, paths, logs_price=logs_price)
    _read_role_users(report, clients, {r.region for r in regions}, graph, paths)
    for role, jobs in report.job_roles.items():  # a role that training jobs run as serves more than the Profiler
        graph.add(Node(kind="training-job", arn=f"training-jobs-of:{role}", name=", ".join(jobs), roles=[role]))
    resolve(graph, paths)
    report.findings += graph_findings(graph)
    for here in regions:
        _read_watchers(report, here, _section_in(here, clients), graph, paths, logs_price=logs_price)
    return report


def _section_in(here: AccountClients, home: AccountClients) -> Callable[[str], str]:
    """A section's name: plain in the audit's own region, `name [region]` in another."""
    if here is home or not here.region:
        return str
    return lambda name: f"{name} [{here.region}]"


def _read_region(
    report: AuditReport,
    here: AccountClients,
    section: Callable[[str], str],
    graph: Graph,
    paths: LegacyPaths,
    *,
    logs_price: float,
) -> None:
    region = here.region
    reads: list[tuple[str, str, Any, Callable[[Any], None]]] = [
        ("log streams", "logs", here.logs, lambda c: _log_streams(c, report, logs_price, region)),
        ("sagemaker apps", "sagemaker", here.sagemaker, lambda c: _apps(c, report, region)),
        ("eventbridge rules", "events", here.events, lambda c: read_rules(c, graph, paths, region)),
        ("step functions", "states", here.stepfunctions, lambda c: read_state_machines(c, graph, paths, region)),
        ("lambda functions", "lambda", here.lambda_, lambda c: read_functions(c, graph, paths, region)),
    ]
    if here.cloudwatch is not None:  # a full client set (the CLI's): pipelines too
        reads.append(
            ("sagemaker pipelines", "sagemaker", here.sagemaker, lambda c: read_pipelines(c, graph, paths, region))
        )
    for name, service, client, read in reads:
        before = len(report.failed_sections)
        _guarded(report, section(name), service, client, read)
        if name in RUNNER_SECTIONS and len(report.failed_sections) > before:
            graph.users_complete = False  # a role's users there are unknown: none is Profiler-only by its users


def _read_watchers(
    report: AuditReport,
    here: AccountClients,
    section: Callable[[str], str],
    graph: Graph,
    paths: LegacyPaths,
    *,
    logs_price: float,
) -> None:
    """After the graph is decided: the region's alarms and dashboards, and the log groups of its Profiler functions."""
    watched, watchers = Watched.of(graph, paths, here.region), Watchers()
    _guarded(
        report, section("cloudwatch alarms"), "cloudwatch", here.cloudwatch, lambda c: read_alarms(c, watched, watchers)
    )
    _guarded(
        report,
        section("cloudwatch dashboards"),
        "cloudwatch",
        here.cloudwatch,
        lambda c: read_dashboards(c, watched, watchers),
    )
    report.findings += monitoring_findings(watchers, here.region)
    _guarded(
        report, section("log groups"), "logs", here.logs, lambda c: _log_groups(c, report, logs_price, here.region)
    )


def _read_role_users(
    report: AuditReport, clients: AccountClients, audited: set[str], graph: Graph, paths: LegacyPaths
) -> None:
    """IAM is global: a role may run a function in any region. The functions, state machines, rules and pipelines of
    every other enabled region are read too; when a region cannot be read, no role is Profiler-only by its users."""
    from botocore.exceptions import BotoCoreError, ClientError

    if clients.ec2 is None:
        return
    try:
        enabled = sorted(r["RegionName"] for r in clients.ec2.describe_regions().get("Regions", []))
    except (ClientError, BotoCoreError) as exc:
        report.fail("regions", "ec2", exc)
        graph.users_complete = False
        return
    for region in [r for r in enabled if r not in audited]:
        here = clients.regional(region) if clients.regional else None
        if here is None:
            graph.users_complete = False
            continue
        before = len(report.failed_sections)
        readers: list[tuple[str, str, Any, Callable[[Any, Graph, LegacyPaths, str], None]]] = [
            ("lambda functions", "lambda", here.lambda_, read_functions),
            ("step functions", "states", here.stepfunctions, read_state_machines),
            ("eventbridge rules", "events", here.events, read_rules),
            ("sagemaker pipelines", "sagemaker", here.sagemaker, read_pipelines),
        ]
        for name, service, client, read in readers:
            _guarded(report, f"role users: {name} [{region}]", service, client, _reader(read, graph, paths, region))
        if len(report.failed_sections) > before:
            graph.users_complete = False


def _reader(
    read: Callable[[Any, Graph, LegacyPaths, str], None], graph: Graph, paths: LegacyPaths, region: str
) -> Callable[[Any], None]:
    return lambda client: read(client, graph, paths, region)


def _guarded(report: AuditReport, section: str, service: str, client: Any, read: Callable[[Any], None]) -> None:
    """Run one service's scan; a denial or a failure is one line in the report, and the audit goes on."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    if client is None:
        return
    try:
        read(client)
    except (NoCredentialsError, NoRegionError):
        raise  # nothing can be read at all: the CLI says so in one line
    except (ClientError, BotoCoreError) as exc:
        report.fail(section, service, exc)


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


def expires_tag(rules: Sequence[dict[str, Any]]) -> bool:
    """An enabled rule expires objects carrying the legacy tag (ProfStack's own, or the StorageStack's bucket rule)."""
    key, value = LEGACY_RULE_OUTPUT_TAG
    wanted = {"Key": key, "Value": value}
    for rule in rules:
        selector = rule.get("Filter") or {}
        tags = [selector.get("Tag"), *list((selector.get("And") or {}).get("Tags") or [])]
        if rule.get("Status") == "Enabled" and rule.get("Expiration") and wanted in tags:
            return True
    return False


def current_lifecycle_rules(s3: S3Client, bucket: str, *, expected_owner: str) -> list[dict[str, Any]]:
    return _current_lifecycle(s3, bucket, expected_owner=expected_owner)[0]


def _current_lifecycle(s3: S3Client, bucket: str, *, expected_owner: str) -> tuple[list[dict[str, Any]], str | None]:
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
    s3: S3Client, bucket: str, *, days: int, apply: bool, expected_owner: str
) -> tuple[list[dict[str, Any]], bool]:
    """Returns (merged rules, changed). Writes only with apply=True and only when something changes; both calls
    name expected_owner (the caller's account): another account's bucket answers 403 and is never written.

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
    tag_failures: list[str] = field(default_factory=list)  # objects that could not be tagged, one line each
    expiry_rules: list[str] = field(default_factory=list)  # buckets whose lifecycle got (or would get) the rule
    apps: list[str] = field(default_factory=list)
    log_streams: list[str] = field(default_factory=list)
    left_alone: list[Finding] = field(default_factory=list)  # IAM, rules, state machines, functions, review
    versions_tagged: int = 0  # older versions (versioned buckets) tagged beside the current ones
    skipped: list[str] = field(default_factory=list)  # sections read incompletely: not acted on
    failures: list[str] = field(default_factory=list)  # a write that was refused (a bucket, an app, a stream)

    @property
    def failed(self) -> list[str]:
        """Every failure, in the order met: cleanup went on past each (a re-run is safe and finishes the job)."""
        return [*self.failures, *self.tag_failures]


def _refused(what: str, service: str, exc: Exception, owner: str | None = None) -> str:
    """One line for a write that failed: the permission it needs when denied (an S3 denial may also be
    another account's bucket, which the expected-owner check refuses)."""
    response = getattr(exc, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", "") or type(exc).__name__)
    operation = str(getattr(exc, "operation_name", "") or "")
    if code in {"AccessDenied", "AccessDeniedException"} and operation:
        mine = f" (or not account {owner}'s bucket)" if owner and service == "s3" else ""
        return f"{what}: {code}: missing permission {iam_action(service, operation)}{mine}"
    return f"{what}: {code or exc}" + (f" ({operation})" if operation else "")


def _tag_prefix(
    s3: Any,
    location: S3Prefix,
    *,
    versioned: bool,
    result: CleanupResult,
    apply: bool,
    owner: str,
    on_object: Callable[[str, int], None] | None,
) -> None:
    """Tag every object under a verified prefix; in a versioned bucket every version, since lifecycle reads each
    version's own tags: an untagged older version would never expire (the rule's NoncurrentVersionExpiration).
    A refused object is one line in result.tag_failures and the others are still tagged."""
    from botocore.exceptions import ClientError

    from profstack.migrate.rule_output import TaggingError, iter_prefix_keys, merge_object_tag

    tag_key, tag_value = LEGACY_RULE_OUTPUT_TAG
    prefix = location.prefix.rstrip("/") + "/"
    entries: Iterable[tuple[str, int, str | None]]
    if versioned:
        entries = (
            (key, size, version)
            for key, size, version in iter_prefix_versions(s3, location.bucket, prefix, expected_owner=owner)
        )
    else:
        entries = (
            (key, size, None) for key, size in iter_prefix_keys(s3, location.bucket, [prefix], expected_owner=owner)
        )
    for key, size, version in entries:
        if on_object is not None:  # the exact listing: s3://bucket/key and its size
            on_object(f"s3://{location.bucket}/{key}" + (f"?versionId={version}" if version else ""), size)
        if not apply:
            result.tagged += 1
            continue
        try:
            if merge_object_tag(s3, location.bucket, key, tag_key, tag_value, expected_owner=owner, version_id=version):
                result.tagged += 1
            else:
                result.already_tagged += 1
        except TaggingError as exc:
            result.tag_failures.append(str(exc))
        except ClientError as exc:
            result.tag_failures.append(_refused(f"tagging s3://{location.bucket}/{key}", "s3", exc, owner))


def iter_prefix_versions(s3: Any, bucket: str, prefix: str, *, expected_owner: str) -> Iterator[tuple[str, int, str]]:
    """(key, size, version id) of every object version under the prefix (delete markers have no tags)."""
    from profstack.migrate.rule_output import owner_kwargs

    pages = s3.get_paginator("list_object_versions").paginate(
        Bucket=bucket, Prefix=prefix, **owner_kwargs(expected_owner)
    )
    for page in pages:
        for version in page.get("Versions", []):
            if version["Key"].startswith(prefix):
                yield version["Key"], int(version.get("Size", 0)), str(version["VersionId"])


def _in_region(clients: AccountClients, region: str) -> AccountClients:
    """The client set of a finding's region (the audit's own when it names none)."""
    if not region or region == clients.region or clients.regional is None:
        return clients
    return clients.regional(region) or clients


def _expire_then_tag(
    clients: AccountClients,
    report: AuditReport,
    prefixes: dict[str, list[S3Prefix]],
    result: CleanupResult,
    *,
    apply: bool,
    expire_days: int,
    on_object: Callable[[str, int], None] | None,
) -> None:
    """Per bucket: the expiry rule first (merged with the bucket's own rules), then the tags. A bucket whose rule
    cannot be written gets no tag, so no object is ever tagged without the rule that expires it."""
    from botocore.exceptions import BotoCoreError, ClientError

    owner = str(clients.account_id)
    for bucket, locations in sorted(prefixes.items()):
        try:
            _, changed = apply_expiry_rule(clients.s3, bucket, days=expire_days, apply=apply, expected_owner=owner)
        except (ClientError, BotoCoreError, LegacyProfilerError) as exc:
            reason = _refused(f"s3://{bucket}: lifecycle rule", "s3", exc, owner)
            result.failures.append(f"{reason}; its {len(locations)} verified prefixes were not tagged")
            continue
        if changed:
            result.expiry_rules.append(bucket)
        for location in locations:
            try:
                _tag_prefix(
                    clients.s3,
                    location,
                    versioned=report.versioned.get(bucket, False),
                    result=result,
                    apply=apply,
                    owner=owner,
                    on_object=on_object,
                )
            except (ClientError, BotoCoreError) as exc:  # the listing itself was refused
                result.failures.append(_refused(f"listing {location}", "s3", exc, owner))


def cleanup(
    report: AuditReport,
    clients: AccountClients,
    *,
    apply: bool,
    expire_days: int = 30,
    delete_log_streams: bool = False,
    on_object: Callable[[str, int], None] | None = None,
) -> CleanupResult:
    """Act on the verified findings only; with apply=False count what would be done and change nothing.

    A refused write (a denied tag, lifecycle rule, app or log stream) is one line in result.failures and cleanup
    goes on; a re-run redoes only what is left (each step is idempotent)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if not clients.account_id:
        raise LegacyProfilerError("cleanup needs the caller's account: every S3 call names it as the bucket owner")
    result = CleanupResult()
    prefixes: dict[str, list[S3Prefix]] = {}
    # act only on what was read completely: a section that was denied or failed may hide what decides a verdict
    act = {
        "s3": report.complete("training jobs") and report.complete("s3 output"),
        "app": report.complete("sagemaker apps"),
        "log-stream": report.complete("log streams"),
    }
    result.skipped = sorted(
        {"s3": "s3 output", "app": "sagemaker apps", "log-stream": "log streams"}[k] for k, ok in act.items() if not ok
    )
    for finding in report.found:
        if finding.kind in LEGACY_FOLDERS and act["s3"]:
            location = S3Prefix.parse(finding.resource)
            prefixes.setdefault(location.bucket, []).append(location)
        elif finding.kind == "app" and act["app"]:
            extra = dict(finding.extra)
            result.apps.append(finding.resource)
            kwargs = {"DomainId": extra["DomainId"], "AppType": "DetailedProfiler", "AppName": extra["AppName"]}
            if "UserProfileName" in extra:
                kwargs["UserProfileName"] = extra["UserProfileName"]
            else:
                kwargs["SpaceName"] = extra["SpaceName"]
            try:
                if apply:
                    _in_region(clients, finding.region).sagemaker.delete_app(**kwargs)
            except (ClientError, BotoCoreError) as exc:
                result.failures.append(_refused(f"deleting app {finding.resource}", "sagemaker", exc))
        elif finding.kind == "log-stream" and delete_log_streams and act["log-stream"]:
            group, _, stream = finding.resource.partition(":")
            result.log_streams.append(finding.resource)
            try:
                if apply:
                    _in_region(clients, finding.region).logs.delete_log_stream(logGroupName=group, logStreamName=stream)
            except (ClientError, BotoCoreError) as exc:
                result.failures.append(_refused(f"deleting log stream {finding.resource}", "logs", exc))
        else:
            result.left_alone.append(finding)
    result.left_alone += report.review
    _expire_then_tag(clients, report, prefixes, result, apply=apply, expire_days=expire_days, on_object=on_object)
    return result
