"""A third seeded account for the legacy audit, built to the AWS guide rather than to the code: two regions, more than
one page of everything that pages (1,250 training jobs, functions, rules, roles, pipelines), custom event buses, a
bucket owned by another account, CloudWatch alarms and dashboards, SageMaker pipelines, jobs whose Profiler was turned
off after it ran, and a decoy for every kind: a resource that only looks like Profiler's, or that ProfStack's own
migration leaves behind (`DisableProfiler: true` in a launcher), or that is Debugger's (a Debugger rule called
`ProfilerReportCustom`).

moto holds the account; tests/functional/aws_serving.py serves what moto lacks (ProfilerConfig and rule statuses in
DescribeTrainingJob, DetailedProfiler apps, composite alarms, S3's bucket owner condition), validated against the
service models. `build()` returns the account with its expectations; `scoreboard()` runs the audit and cleanup and
counts, per kind, what was found, missed, flagged and touched. docs/migration.md publishes that table
(scripts/legacy_scoreboard.py writes it; tests/functional/test_legacy_audit_third_account.py checks it).
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3

from profstack.migrate.legacy_profiler import PROCESSING_LOG_GROUP, AccountClients
from tests.functional.aws_serving import BucketOwners, add_to, serve
from tests.training_jobs import ACCOUNT, describe_training_job

HOME, OTHER = "us-east-1", "eu-west-1"
PARTNER = "210987654321"  # another account: its bucket holds one of our jobs' output
NOW = datetime(2026, 11, 29, tzinfo=UTC)
PLAIN_JOBS = {HOME: 1100, OTHER: 150}  # ListTrainingJobs answers 10 a page by default: many pages
FILLER_ROLES, FILLER_FUNCTIONS, FILLER_RULES, FILLER_PIPELINES = 20, 55, 55, 55

KINDS = {  # the table's rows: finding kinds, as the audit names them
    "S3 output folders": ("rule-output", "profiler-output"),
    "rule-job log streams": ("log-stream",),
    "log groups": ("log-group",),
    "DetailedProfiler apps": ("app",),
    "IAM roles": ("iam-role",),
    "IAM policies": ("iam-policy",),
    "Lambda functions": ("lambda",),
    "state machines": ("state-machine",),
    "EventBridge rules": ("rule",),
    "SageMaker pipelines": ("pipeline",),
    "CloudWatch alarms": ("alarm",),
    "CloudWatch dashboards": ("dashboard",),
}


def kind_of(finding_kind: str) -> str:
    return next(k for k, kinds in KINDS.items() if finding_kind in kinds)


def _arn(service: str, region: str, resource: str) -> str:
    return f"arn:aws:{service}:{region}:{ACCOUNT}:{resource}"


def _rule_job_arn(region: str, name: str) -> str:
    return _arn("sagemaker", region, f"processing-job/{name.lower()}")


@dataclass
class Expect:
    legacy: set[tuple[str, str]] = field(default_factory=set)  # (finding kind, resource)
    decoys: set[tuple[str, str]] = field(default_factory=set)
    #: S3 decoys: folder URI -> the (bucket, key) objects under it that must stay untagged
    decoy_objects: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    padding: set[tuple[str, str]] = field(default_factory=set)  # fillers for pagination: never flagged


@dataclass
class Region:
    name: str
    sagemaker: Any
    logs: Any
    events: Any
    stepfunctions: Any
    lambda_: Any
    cloudwatch: Any
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)  # DescribeTrainingJob answers
    apps: list[dict[str, Any]] = field(default_factory=list)
    composites: list[dict[str, Any]] = field(default_factory=list)
    deleted_apps: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Account:
    s3: Any
    iam: Any
    ec2: Any
    regions: dict[str, Region]
    owners: BucketOwners
    expect: Expect

    def clients(self, *, regions: tuple[str, ...] = (OTHER,)) -> AccountClients:
        """The audit's clients: HOME, with OTHER audited whole and every enabled region read for role users."""

        def in_region(name: str) -> AccountClients | None:
            region = self.regions.get(name)
            if region is None:
                return None
            return AccountClients(
                sagemaker=region.sagemaker,
                s3=self.s3,
                logs=region.logs,
                iam=self.iam,
                events=region.events,
                stepfunctions=region.stepfunctions,
                lambda_=region.lambda_,
                cloudwatch=region.cloudwatch,
                account_id=ACCOUNT,
                region=name,
            )

        home = in_region(HOME)
        assert home is not None
        home.ec2, home.regional, home.audit_regions = self.ec2, in_region, regions
        return home


# --- training jobs and apps (served: moto keeps no ProfilerConfig or rule statuses) ------------------------------


def _job(region: str, name: str, *, output: str, status: str = "Completed", **extra: Any) -> dict[str, Any]:
    profiler = extra.pop("profiler", None)
    job = describe_training_job(name, output=output, created=NOW - timedelta(hours=1), status=status, profiler=profiler)
    job["TrainingJobArn"] = _arn("sagemaker", region, f"training-job/{name}")
    job["RoleArn"] = extra.pop("role", f"arn:aws:iam::{ACCOUNT}:role/sagemaker-training")
    job.update(extra)
    return job


def _rules(kind: str, region: str, rules: dict[str, str | None]) -> dict[str, Any]:
    """{rule configuration name: rule job name or None} as DescribeTrainingJob spells them."""
    configurations = [{"RuleConfigurationName": r, "RuleEvaluatorImage": f"{kind.lower()}-rules"} for r in rules]
    statuses = [
        {"RuleConfigurationName": r, "RuleEvaluationStatus": "NoIssuesFound"}
        | ({"RuleEvaluationJobArn": _rule_job_arn(region, job)} if job else {})
        for r, job in rules.items()
    ]
    return {f"{kind}RuleConfigurations": configurations, f"{kind}RuleEvaluationStatuses": statuses}


def _serve_sagemaker(region: Region) -> None:
    def listing(params: dict[str, Any]) -> dict[str, Any]:
        after = params.get("CreationTimeAfter") or datetime.min.replace(tzinfo=UTC)
        jobs = sorted(
            (j for j in region.jobs.values() if j["CreationTime"] > after),
            key=lambda j: (j["CreationTime"], j["TrainingJobName"]),
            reverse=params.get("SortOrder", "Descending") == "Descending",
        )
        start, size = int(params.get("NextToken") or 0), int(params.get("MaxResults") or 10)
        page = jobs[start : start + size]
        answer: dict[str, Any] = {
            "TrainingJobSummaries": [
                {k: j[k] for k in ("TrainingJobName", "TrainingJobArn", "CreationTime", "TrainingJobStatus")}
                for j in page
            ]
        }
        if start + size < len(jobs):
            answer["NextToken"] = str(start + size)
        return answer

    def delete_app(params: dict[str, Any]) -> dict[str, Any]:
        region.deleted_apps.append(params)
        return {}

    serve(region.sagemaker, "ListTrainingJobs", listing)
    serve(region.sagemaker, "DescribeTrainingJob", lambda p: region.jobs[p["TrainingJobName"]])
    serve(region.sagemaker, "ListApps", lambda p: {"Apps": region.apps})
    serve(region.sagemaker, "DeleteApp", delete_app)

    def composites(parsed: dict[str, Any], params: dict[str, Any]) -> None:  # moto has no composite alarms
        if "CompositeAlarm" in params.get("AlarmTypes", []):
            parsed["CompositeAlarms"] = list(region.composites)

    add_to(region.cloudwatch, "DescribeAlarms", composites)


def _app(domain: str, user: str, kind: str, name: str = "default", status: str = "InService") -> dict[str, Any]:
    return {
        "DomainId": domain,
        "UserProfileName": user,
        "AppType": kind,
        "AppName": name,
        "Status": status,
        "CreationTime": NOW,
    }


# --- the account ------------------------------------------------------------------------------------------------


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


def _doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _trust(*services: str) -> str:
    return _doc(*({"Effect": "Allow", "Principal": {"Service": s}, "Action": "sts:AssumeRole"} for s in services))


class Builder:
    """Seeds one account; `legacy()` and `decoy()` record what the audit must find and must leave alone."""

    def __init__(self) -> None:
        self.expect = Expect()
        self.s3 = boto3.client("s3", region_name=HOME)
        self.iam = boto3.client("iam", region_name=HOME)
        self.regions = {
            name: Region(
                name,
                sagemaker=boto3.client("sagemaker", region_name=name),
                logs=boto3.client("logs", region_name=name),
                events=boto3.client("events", region_name=name),
                stepfunctions=boto3.client("stepfunctions", region_name=name),
                lambda_=boto3.client("lambda", region_name=name),
                cloudwatch=boto3.client("cloudwatch", region_name=name),
            )
            for name in (HOME, OTHER)
        }
        self.roles: dict[str, str] = {}
        self.functions: dict[str, str] = {}
        self.machines: dict[str, str] = {}

    def legacy(self, kind: str, resource: str) -> str:
        self.expect.legacy.add((kind, resource))
        return resource

    def decoy(self, kind: str, resource: str) -> str:
        self.expect.decoys.add((kind, resource))
        return resource

    # S3 ---------------------------------------------------------------------------------------------------------

    def buckets(self) -> None:
        self.s3.create_bucket(Bucket="ml-artifacts-east")
        eu = boto3.client("s3", region_name=OTHER)
        eu.create_bucket(Bucket="ml-artifacts-eu", CreateBucketConfiguration={"LocationConstraint": OTHER})
        credentials = boto3.client("sts", region_name=HOME).assume_role(
            RoleArn=f"arn:aws:iam::{PARTNER}:role/data-share", RoleSessionName="seed"
        )["Credentials"]
        partner = boto3.client(
            "s3",
            region_name=HOME,
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
        )
        partner.create_bucket(Bucket="partner-ml-out")
        partner.put_object(
            Bucket="partner-ml-out", Key="runs/partner-run-0006/profiler-output/system/1.json", Body=b"p"
        )
        partner.put_object(
            Bucket="partner-ml-out", Key="runs/partner-run-0006/rule-output/ProfilerReport-1/report.html", Body=b"p"
        )
        self.expect.decoy_objects["s3://partner-ml-out/runs/partner-run-0006/"] = [
            ("partner-ml-out", "runs/partner-run-0006/profiler-output/system/1.json"),
            ("partner-ml-out", "runs/partner-run-0006/rule-output/ProfilerReport-1/report.html"),
        ]
        self.decoy("profiler-output", "s3://partner-ml-out/runs/partner-run-0006/profiler-output/")
        self.decoy("rule-output", "s3://partner-ml-out/runs/partner-run-0006/rule-output/")

    def objects(self, bucket: str, folder: str, names: list[str], *, legacy: bool, kind: str = "") -> None:
        client = self.s3
        for name in names:
            client.put_object(Bucket=bucket, Key=f"{folder}{name}", Body=b"x" * 100)
        uri = f"s3://{bucket}/{folder}"
        finding_kind = kind or ("profiler-output" if "/profiler-output/" in folder else "rule-output")
        if legacy:
            self.legacy(finding_kind, uri)
        else:
            self.decoy(finding_kind, uri)
            self.expect.decoy_objects[uri] = [(bucket, f"{folder}{n}") for n in names]

    # jobs -------------------------------------------------------------------------------------------------------

    def jobs(self) -> None:
        home, eu = self.regions[HOME], self.regions[OTHER]
        east = "s3://ml-artifacts-east"
        # a profiled job with the ProfilerReport rule: its output and its rule job's log
        home.jobs["llama-pt-0001"] = _job(
            HOME,
            "llama-pt-0001",
            output=f"{east}/jobs",
            profiler={"S3OutputPath": f"{east}/profiler", "ProfilingIntervalInMilliseconds": 500},
            **_rules("Profiler", HOME, {"ProfilerReport-1764000000": "llama-pt-0001-ProfilerReport-1a2b3c4d"}),
        )
        self.objects("ml-artifacts-east", "profiler/llama-pt-0001/profiler-output/", ["system/1.json"], legacy=True)
        self.objects(
            "ml-artifacts-east",
            "jobs/llama-pt-0001/rule-output/",
            ["ProfilerReport-1764000000/profiler-output/profiler-report.html"],
            legacy=True,
        )
        # turned off after it ran (UpdateTrainingJob with DisableProfiler: true, what `legacy disable-profiler` does):
        # the path stays in ProfilerConfig, and so does what the Profiler wrote before
        home.jobs["vit-ft-0007"] = _job(
            HOME,
            "vit-ft-0007",
            output=f"{east}/jobs",
            profiler={"S3OutputPath": f"{east}/jobs", "DisableProfiler": True},
        )
        self.objects("ml-artifacts-east", "jobs/vit-ft-0007/profiler-output/", ["system/1.json"], legacy=True)
        home.jobs["vit-ft-0008"] = _job(
            HOME, "vit-ft-0008", output=f"{east}/jobs", status="Stopped", profiler={"DisableProfiler": True}
        )
        self.objects("ml-artifacts-east", "jobs/vit-ft-0008/profiler-output/", ["framework/trace.json"], legacy=True)
        # a migrated launcher's job: DisableProfiler from the start, nothing of the Profiler's
        home.jobs["resnet-mig-0003"] = _job(
            HOME, "resnet-mig-0003", output=f"{east}/jobs", profiler={"DisableProfiler": True}
        )
        self.objects("ml-artifacts-east", "jobs/resnet-mig-0003/output/", ["model.tar.gz"], legacy=False)
        # a Debugger rule whose name starts like the Profiler's report, beside a Profiler rule
        home.jobs["bert-dbg-0004"] = _job(
            HOME,
            "bert-dbg-0004",
            output=f"{east}/jobs",
            profiler={"S3OutputPath": f"{east}/jobs"},
            **_rules("Profiler", HOME, {"ProfilerReport-1764000100": "bert-dbg-0004-ProfilerReport-5e6f7a8b"}),
            **_rules(
                "Debug",
                HOME,
                {
                    "ProfilerReportCustom": "bert-dbg-0004-ProfilerReportCustom-9a8b7c6d",
                    "LossNotDecreasing": "bert-dbg-0004-LossNotDecreasing-0d1e2f3a",
                },
            ),
        )
        base = "jobs/bert-dbg-0004/"
        self.objects("ml-artifacts-east", f"{base}rule-output/ProfilerReport-1764000100/", ["r.html"], legacy=True)
        self.objects("ml-artifacts-east", f"{base}profiler-output/", ["system/1.json"], legacy=True)
        self.objects("ml-artifacts-east", f"{base}rule-output/ProfilerReportCustom/", ["state.json"], legacy=False)
        self.objects("ml-artifacts-east", f"{base}rule-output/LossNotDecreasing/", ["state.json"], legacy=False)
        # Debugger only, with a rule named ProfilerReportV2
        home.jobs["gpt-dbg-0005"] = _job(
            HOME,
            "gpt-dbg-0005",
            output=f"{east}/jobs",
            **_rules("Debug", HOME, {"ProfilerReportV2": "gpt-dbg-0005-ProfilerReportV2-4b5c6d7e"}),
        )
        self.objects("ml-artifacts-east", "jobs/gpt-dbg-0005/rule-output/ProfilerReportV2/", ["s.json"], legacy=False)
        # profiled, with its output in another account's bucket: not ours to list, tag or expire
        home.jobs["partner-run-0006"] = _job(
            HOME,
            "partner-run-0006",
            output="s3://partner-ml-out/runs",
            profiler={"S3OutputPath": "s3://partner-ml-out/runs"},
            **_rules("Profiler", HOME, {"ProfilerReport-1": None}),
        )
        # the other region: a profiled job, its output in that region's bucket
        eu.jobs["eu-llm-0100"] = _job(
            OTHER,
            "eu-llm-0100",
            output="s3://ml-artifacts-eu/jobs",
            profiler={"S3OutputPath": "s3://ml-artifacts-eu/jobs"},
            **_rules("Profiler", OTHER, {"ProfilerReport-1764000200": "eu-llm-0100-ProfilerReport-7c8d9e0f"}),
        )
        eu_s3 = boto3.client("s3", region_name=OTHER)
        for key in (
            "jobs/eu-llm-0100/profiler-output/system/1.json",
            "jobs/eu-llm-0100/rule-output/ProfilerReport-1764000200/r.html",
        ):
            eu_s3.put_object(Bucket="ml-artifacts-eu", Key=key, Body=b"e" * 100)
        self.legacy("profiler-output", "s3://ml-artifacts-eu/jobs/eu-llm-0100/profiler-output/")
        self.legacy("rule-output", "s3://ml-artifacts-eu/jobs/eu-llm-0100/rule-output/")
        for region in (home, eu):
            for i in range(PLAIN_JOBS[region.name]):
                name = f"etl-{region.name[:2]}-{i:04d}"
                region.jobs[name] = _job(region.name, name, output="s3://ml-artifacts-east/etl")
                region.jobs[name]["CreationTime"] = NOW - timedelta(minutes=2 + i)

    def logs(self) -> None:
        streams = {
            HOME: [
                ("llama-pt-0001-ProfilerReport-1a2b3c4d/algo-1-1764000000", True),
                ("bert-dbg-0004-ProfilerReport-5e6f7a8b/algo-1-1764000000", True),
                ("bert-dbg-0004-ProfilerReportCustom-9a8b7c6d/algo-1-1764000000", False),  # Debugger's
                ("bert-dbg-0004-LossNotDecreasing-0d1e2f3a/algo-1-1764000000", False),
                ("gpt-dbg-0005-ProfilerReportV2-4b5c6d7e/algo-1-1764000000", False),
                ("llama-pt-0001-preprocess/algo-1-1764000000", False),  # a processing job named like the job
            ],
            OTHER: [("eu-llm-0100-ProfilerReport-7c8d9e0f/algo-1-1764000000", True)],
        }
        for region, named in streams.items():
            logs = self.regions[region].logs
            logs.create_log_group(logGroupName=PROCESSING_LOG_GROUP)
            for stream, legacy in named:
                logs.create_log_stream(logGroupName=PROCESSING_LOG_GROUP, logStreamName=stream)
                logs.put_log_events(
                    logGroupName=PROCESSING_LOG_GROUP,
                    logStreamName=stream,
                    logEvents=[{"timestamp": int(time.time() * 1000), "message": "evaluating " + "z" * 30}],
                )
                (self.legacy if legacy else self.decoy)("log-stream", f"{PROCESSING_LOG_GROUP}:{stream}")

    def apps(self) -> None:
        home, eu = self.regions[HOME], self.regions[OTHER]
        home.apps = [_app("d-home1", "alice", "DetailedProfiler"), _app("d-home1", "alice", "TensorBoard")]
        eu.apps = [_app("d-eu0001", "bob", "DetailedProfiler", "bob-profiler")]
        self.legacy("app", "d-home1/alice/DetailedProfiler/default")
        self.decoy("app", "d-home1/alice/TensorBoard/default")
        self.legacy("app", "d-eu0001/bob/DetailedProfiler/bob-profiler")

    # IAM --------------------------------------------------------------------------------------------------------

    def role(self, name: str, trust: str, *, managed: tuple[str, ...] = (), attached: tuple[str, ...] = ()) -> str:
        arn = str(self.iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust)["Role"]["Arn"])
        for policy in managed:
            self.iam.attach_role_policy(RoleName=name, PolicyArn=f"arn:aws:iam::aws:policy/service-role/{policy}")
        for policy in attached:
            self.iam.attach_role_policy(RoleName=name, PolicyArn=policy)
        self.roles[name] = arn
        return arn

    def policy(self, name: str, *statements: dict[str, Any]) -> str:
        return str(self.iam.create_policy(PolicyName=name, PolicyDocument=_doc(*statements))["Policy"]["Arn"])

    def function(self, region: str, name: str, role: str, env: dict[str, str]) -> str:
        arn = self.regions[region].lambda_.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=self.roles[role],
            Handler="handler.handler",
            Code={"ZipFile": _zip()},
            Environment={"Variables": env},
        )["FunctionArn"]
        self.functions[name] = str(arn)
        return str(arn)

    def log_group(self, region: str, function: str, *, legacy: bool) -> None:
        group = f"/aws/lambda/{function}"
        self.regions[region].logs.create_log_group(logGroupName=group)
        (self.legacy if legacy else self.decoy)("log-group", group)

    def iam_and_functions(self) -> None:
        lambda_trust, basic = _trust("lambda.amazonaws.com"), ("AWSLambdaBasicExecutionRole",)
        for i in range(FILLER_ROLES):
            self.expect.padding.add(("iam-role", self.role(f"svc-role-{i:03d}", lambda_trust)))
        # a role whose only permission reads a verified job's Profiler report: the two functions it runs are Profiler's
        report_read = self.legacy(
            "iam-policy",
            self.policy(
                "llama-report-read",
                {
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": "arn:aws:s3:::ml-artifacts-east/jobs/llama-pt-0001/rule-output/*",
                },
            ),
        )
        alerts = self.legacy(  # neutral (sns:Publish) and held only by a Profiler-only role
            "iam-policy",
            self.policy(
                "rulejob-alerts-publish",
                {"Effect": "Allow", "Action": "sns:Publish", "Resource": _arn("sns", HOME, "ml-profiler-alerts")},
            ),
        )
        self.legacy(
            "iam-role", self.role("rulejob-notifier-role", lambda_trust, managed=basic, attached=(report_read, alerts))
        )
        self.legacy(
            "lambda",
            self.function(
                HOME, "rulejob-notifier", "rulejob-notifier-role", {"METRIC_NAMESPACE": "MLOps/ProfilerRules"}
            ),
        )
        self.legacy("lambda", self.function(HOME, "rulejob-notifier-b", "rulejob-notifier-role", {}))  # only its role
        self.log_group(HOME, "rulejob-notifier", legacy=True)
        self.log_group(HOME, "rulejob-notifier-b", legacy=True)
        # a Profiler function (its configuration names verified output) whose role a SageMaker pipeline also runs as
        self.decoy(
            "iam-role",
            self.role("pipeline-exec-role", _trust("lambda.amazonaws.com", "sagemaker.amazonaws.com"), managed=basic),
        )
        self.legacy(
            "lambda",
            self.function(
                HOME,
                "rulejob-archiver",
                "pipeline-exec-role",
                {"REPORTS": "s3://ml-artifacts-east/jobs/llama-pt-0001/rule-output/"},
            ),
        )
        self.log_group(HOME, "rulejob-archiver", legacy=True)
        # a Profiler function whose role a function in the other region also runs as (IAM is global)
        self.decoy("iam-role", self.role("shared-fn-role", lambda_trust, managed=basic))
        self.legacy(
            "lambda",
            self.function(HOME, "profiler-digest-home", "shared-fn-role", {"WATCH": "ProfilerRuleEvaluationStatuses"}),
        )
        self.log_group(HOME, "profiler-digest-home", legacy=True)
        self.decoy(
            "lambda", self.function(OTHER, "eu-etl-loader", "shared-fn-role", {"SOURCE": "s3://ml-artifacts-eu/etl/"})
        )
        self.log_group(OTHER, "eu-etl-loader", legacy=False)
        # functions found only through their rules (on a custom bus, in the other region); each role serves only
        # its function, so it goes with it
        self.legacy("iam-role", self.role("bus-digest-role", lambda_trust, managed=basic))
        self.legacy("lambda", self.function(HOME, "bus-digest", "bus-digest-role", {}))
        self.log_group(HOME, "bus-digest", legacy=True)
        self.legacy("iam-role", self.role("eu-digest-role", lambda_trust, managed=basic))
        self.legacy("lambda", self.function(OTHER, "eu-report-digest", "eu-digest-role", {}))
        self.log_group(OTHER, "eu-report-digest", legacy=True)
        # look-alikes: a name, and a function publishing training metrics
        self.decoy("lambda", self.function(HOME, "profiler-cleanup", "svc-role-001", {"MODE": "nightly"}))
        self.decoy(
            "lambda", self.function(HOME, "metrics-shipper", "svc-role-002", {"METRIC_NAMESPACE": "MLOps/Training"})
        )
        self.log_group(HOME, "metrics-shipper", legacy=False)
        # a launcher function whose environment holds a migrated training request (JSON in a variable)
        request = json.dumps(
            {"ProfilerConfig": {"DisableProfiler": True}, "RoleArn": "arn:aws:iam::123456789012:role/x"}
        )
        self.decoy("lambda", self.function(HOME, "train-launcher", "svc-role-006", {"TRAINING_REQUEST": request}))
        # a neutral policy held by a Profiler-only role and by a person: not the Profiler's to delete
        alerts_shared = self.decoy(
            "iam-policy",
            self.policy(
                "alerts-publish-shared",
                {"Effect": "Allow", "Action": "sns:Publish", "Resource": _arn("sns", HOME, "ml-alerts")},
            ),
        )
        self.iam.attach_role_policy(RoleName="rulejob-notifier-role", PolicyArn=alerts_shared)
        self.iam.create_user(UserName="oncall")
        self.iam.attach_user_policy(UserName="oncall", PolicyArn=alerts_shared)
        for i in range(FILLER_FUNCTIONS):
            self.expect.padding.add(
                ("lambda", self.function(HOME, f"svc-fn-{i:03d}", f"svc-role-{10 + i % 10:03d}", {"N": str(i)}))
            )
        self.decoy("iam-role", self.role("profiler-named-role", lambda_trust))  # a name only
        self.decoy(
            "iam-policy",
            self.policy(
                "etl-data", {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::ml-artifacts-east/etl/*"}
            ),
        )
        self.decoy(
            "iam-policy",
            self.policy(  # Debugger's rule folder only: kept
                "bert-debugger-read",
                {
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": "arn:aws:s3:::ml-artifacts-east/jobs/bert-dbg-0004/rule-output/ProfilerReportCustom/*",
                },
            ),
        )

    def state_machines(self) -> None:
        sfn = self.regions[HOME].stepfunctions
        # a Profiler-only role that serves a state machine: its only statement invokes a Profiler function
        self.legacy(
            "iam-role",
            self.role(
                "profiler-sfn-role",
                _trust("states.amazonaws.com"),
                attached=(
                    self.legacy(
                        "iam-policy",
                        self.policy(
                            "invoke-rulejob-notifier",
                            {
                                "Effect": "Allow",
                                "Action": "lambda:InvokeFunction",
                                "Resource": [
                                    self.functions["rulejob-notifier"],
                                    self.functions["rulejob-notifier"] + ":*",
                                ],
                            },
                        ),
                    ),
                ),
            ),
        )
        # a wildcard over Profiler and Debugger rule output (review on its own), held only by that Profiler-only role
        wildcard = self.legacy(
            "iam-policy",
            self.policy(
                "rule-output-wildcard",
                {
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": "arn:aws:s3:::ml-artifacts-east/jobs/*/rule-output/*",
                },
            ),
        )
        self.iam.attach_role_policy(RoleName="profiler-sfn-role", PolicyArn=wildcard)
        collector = {
            "StartAt": "Notify",
            "States": {
                "Notify": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": self.functions["rulejob-notifier"], "Payload.$": "$"},
                    "Next": "Issues",
                },
                "Issues": {
                    "Type": "Choice",
                    "Choices": [
                        {
                            "Variable": "$.detail.ProfilerRuleEvaluationStatuses[0].RuleEvaluationStatus",
                            "StringEquals": "IssuesFound",
                            "Next": "Done",
                        }
                    ],
                    "Default": "Done",
                },
                "Done": {"Type": "Succeed"},
            },
        }
        self.machines["collector"] = self.legacy(
            "state-machine",
            sfn.create_state_machine(
                name="profiler-report-collector",
                definition=json.dumps(collector),
                roleArn=self.roles["profiler-sfn-role"],
            )["stateMachineArn"],
        )

        def train(profiler: dict[str, Any]) -> str:
            return json.dumps(
                {
                    "StartAt": "Train",
                    "States": {
                        "Train": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::sagemaker:createTrainingJob.sync",
                            "Parameters": {
                                "TrainingJobName.$": "$.name",
                                "RoleArn": "arn:aws:iam::123456789012:role/sagemaker-training",
                                "ProfilerConfig": profiler,
                            },
                            "End": True,
                        }
                    },
                }
            )

        # a migrated launcher: DisableProfiler: true is not the Profiler's
        self.decoy(
            "state-machine",
            sfn.create_state_machine(
                name="train-migrated", definition=train({"DisableProfiler": True}), roleArn=self.roles["svc-role-004"]
            )["stateMachineArn"],
        )
        # a launcher whose Profiler setting comes from the execution's input: for review, never found
        dynamic = json.loads(train({}))
        dynamic["States"]["Train"]["Parameters"].pop("ProfilerConfig")
        dynamic["States"]["Train"]["Parameters"]["ProfilerConfig.$"] = "$.profiler"
        self.decoy(
            "state-machine",
            sfn.create_state_machine(
                name="train-dynamic", definition=json.dumps(dynamic), roleArn=self.roles["svc-role-007"]
            )["stateMachineArn"],
        )
        # a launcher that still profiles: an edit
        self.legacy(
            "state-machine",
            sfn.create_state_machine(
                name="train-profiled",
                definition=train(
                    {"S3OutputPath": "s3://ml-artifacts-east/profiler", "ProfilingIntervalInMilliseconds": 500}
                ),
                roleArn=self.roles["svc-role-005"],
            )["stateMachineArn"],
        )

    def rules(self) -> None:
        home, eu = self.regions[HOME].events, self.regions[OTHER].events

        def processing(prefix: str) -> str:
            return json.dumps(
                {
                    "source": ["aws.sagemaker"],
                    "detail-type": ["SageMaker Processing Job State Change"],
                    "detail": {"ProcessingJobName": [{"prefix": prefix}]},
                }
            )

        def rule(events: Any, name: str, pattern: str, targets: list[dict[str, Any]], bus: str = "default") -> str:
            arn = str(events.put_rule(Name=name, EventPattern=pattern, EventBusName=bus)["RuleArn"])
            events.put_targets(Rule=name, EventBusName=bus, Targets=targets)
            return arn

        self.legacy(
            "rule",
            rule(
                home,
                "rulejob-done",
                processing("llama-pt-0001-profilerreport"),
                [{"Id": "1", "Arn": self.functions["rulejob-notifier"]}],
            ),
        )
        # an events rule that starts the Profiler state machine through a Profiler-only role
        invoke = self.legacy(
            "iam-policy",
            self.policy(
                "start-report-collector",
                {"Effect": "Allow", "Action": "states:StartExecution", "Resource": self.machines["collector"]},
            ),
        )
        self.legacy("iam-role", self.role("profiler-events-invoke", _trust("events.amazonaws.com"), attached=(invoke,)))
        wildcard = json.dumps(
            {
                "source": ["aws.sagemaker"],
                "detail-type": ["SageMaker Processing Job State Change"],
                "detail": {"ProcessingJobName": [{"wildcard": "*-profilerreport-*"}]},
            }
        )
        self.legacy(
            "rule",
            rule(
                home,
                "rulejob-to-collector",
                wildcard,
                [{"Id": "c", "Arn": self.machines["collector"], "RoleArn": self.roles["profiler-events-invoke"]}],
            ),
        )
        # custom buses: rules there are read only when every bus is listed
        home.create_event_bus(Name="ml-events")
        self.legacy(
            "rule",
            rule(
                home,
                "bus-profiler-digest",
                processing("llama-pt-0001-profilerreport"),
                [{"Id": "1", "Arn": self.functions["bus-digest"]}],
                "ml-events",
            ),
        )
        training = json.dumps({"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"]})
        self.decoy(
            "rule",
            rule(
                home,
                "profiler-training-done",
                training,
                [{"Id": "1", "Arn": self.functions["metrics-shipper"]}],
                "ml-events",
            ),
        )
        self.decoy(
            "rule",
            rule(
                home,
                "debugger-custom-done",
                processing("bert-dbg-0004-profilerreportcustom"),
                [{"Id": "1", "Arn": self.functions["metrics-shipper"]}],
            ),
        )
        eu.create_event_bus(Name="eu-ml-events")
        self.legacy(
            "rule",
            rule(
                eu,
                "eu-rulejob-digest",
                processing("eu-llm-0100-profilerreport"),
                [{"Id": "1", "Arn": self.functions["eu-report-digest"]}],
                "eu-ml-events",
            ),
        )
        for i in range(FILLER_RULES):
            arn = home.put_rule(Name=f"sched-{i:03d}", ScheduleExpression="rate(1 day)")["RuleArn"]
            home.put_targets(Rule=f"sched-{i:03d}", Targets=[{"Id": "1", "Arn": self.functions[f"svc-fn-{i:03d}"]}])
            self.expect.padding.add(("rule", str(arn)))

    def pipelines(self) -> None:
        sm = self.regions[HOME].sagemaker

        def step(name: str, **arguments: Any) -> dict[str, Any]:
            return {
                "Name": name,
                "Type": "Training",
                "Arguments": {
                    "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
                    "OutputDataConfig": {"S3OutputPath": "s3://ml-artifacts-east/pipelines"},
                    "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.g5.xlarge", "VolumeSizeInGB": 30},
                    "RoleArn": self.roles["pipeline-exec-role"],
                    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
                    **arguments,
                },
            }

        def pipeline(name: str, steps: list[dict[str, Any]], parameters: list[dict[str, Any]] | None = None) -> str:
            definition = {"Version": "2020-12-01", "Parameters": parameters or [], "Steps": steps}
            sm.create_pipeline(
                PipelineName=name, PipelineDefinition=json.dumps(definition), RoleArn=self.roles["pipeline-exec-role"]
            )
            return _arn("sagemaker", HOME, f"pipeline/{name}")

        report = [
            {
                "RuleConfigurationName": "ProfilerReport-1764000300",
                "RuleEvaluatorImage": "rules",
                "RuleParameters": {"rule_to_invoke": "ProfilerReport"},
            }
        ]
        self.legacy(
            "pipeline",
            pipeline(
                "train-with-profiler",
                [
                    step(
                        "Train",
                        ProfilerConfig={"S3OutputPath": "s3://ml-artifacts-east/profiler", "DisableProfiler": False},
                        ProfilerRuleConfigurations=report,
                    )
                ],
            ),
        )
        condition = {
            "Name": "IfGood",
            "Type": "Condition",
            "Arguments": {
                "Conditions": [{"Type": "GreaterThan", "LeftValue": 1, "RightValue": 0}],
                "IfSteps": [step("Retrain", ProfilerConfig={"DisableProfiler": {"Get": "Parameters.NoProfiler"}})],
                "ElseSteps": [],
            },
        }
        self.legacy(
            "pipeline",
            pipeline("cond-retrain", [condition], [{"Name": "NoProfiler", "Type": "Boolean", "DefaultValue": False}]),
        )
        self.decoy(
            "pipeline", pipeline("train-migrated-pipe", [step("Train", ProfilerConfig={"DisableProfiler": True})])
        )
        self.decoy(
            "pipeline",
            pipeline(
                "train-param-off",
                [step("Train", ProfilerConfig={"DisableProfiler": {"Get": "Parameters.Off"}})],
                [{"Name": "Off", "Type": "Boolean", "DefaultValue": True}],
            ),
        )
        debug = [{"RuleConfigurationName": "ProfilerReportCustom", "RuleEvaluatorImage": "debugger-rules"}]
        self.decoy(
            "pipeline",
            pipeline(
                "train-debugger-only",
                [step("Train", ProfilerConfig={"DisableProfiler": True}, DebugRuleConfigurations=debug)],
            ),
        )
        for i in range(FILLER_PIPELINES):
            processing = {
                "Name": "Prep",
                "Type": "Processing",
                "Arguments": {
                    "ProcessingResources": {
                        "ClusterConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}
                    }
                },
            }
            self.expect.padding.add(("pipeline", pipeline(f"etl-pipe-{i:03d}", [processing])))

    def watchers(self) -> None:
        cw = self.regions[HOME].cloudwatch

        def alarm(name: str, namespace: str, metric: str, dimensions: dict[str, str]) -> str:
            cw.put_metric_alarm(
                AlarmName=name,
                Namespace=namespace,
                MetricName=metric,
                Dimensions=[{"Name": k, "Value": v} for k, v in dimensions.items()],
                Statistic="Sum",
                Period=300,
                EvaluationPeriods=1,
                Threshold=1,
                ComparisonOperator="GreaterThanOrEqualToThreshold",
            )
            return _arn("cloudwatch", HOME, f"alarm:{name}")

        self.legacy(
            "alarm", alarm("rulejob-notifier-errors", "AWS/Lambda", "Errors", {"FunctionName": "rulejob-notifier"})
        )
        self.legacy("alarm", alarm("profiler-issues-found", "MLOps/ProfilerRules", "IssuesFound", {}))
        self.legacy(
            "alarm",
            alarm(
                "rulejob-cpu",
                "/aws/sagemaker/ProcessingJobs",
                "CPUUtilization",
                {"Host": "llama-pt-0001-ProfilerReport-1a2b3c4d/algo-1"},
            ),
        )
        self.decoy(
            "alarm",
            alarm(
                "training-gpu-low", "/aws/sagemaker/TrainingJobs", "GPUUtilization", {"Host": "llama-pt-0001/algo-1"}
            ),
        )
        self.decoy(
            "alarm", alarm("profiler-ec2-cpu", "AWS/EC2", "CPUUtilization", {"InstanceId": "i-0123456789abcdef0"})
        )
        self.decoy("alarm", alarm("training-metrics", "MLOps/Training", "Loss", {}))
        cw.put_metric_alarm(
            AlarmName="profiler-issue-rate",
            Metrics=[
                {
                    "Id": "m1",
                    "MetricStat": {
                        "Metric": {"Namespace": "MLOps/ProfilerRules", "MetricName": "IssuesFound"},
                        "Period": 300,
                        "Stat": "Sum",
                    },
                    "ReturnData": False,
                },
                {"Id": "e1", "Expression": "m1 / 12", "ReturnData": True},
            ],
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="GreaterThanThreshold",
        )
        self.legacy("alarm", _arn("cloudwatch", HOME, "alarm:profiler-issue-rate"))

        def composite(name: str, rule: str) -> str:
            arn = _arn("cloudwatch", HOME, f"alarm:{name}")
            self.regions[HOME].composites.append(
                {"AlarmName": name, "AlarmArn": arn, "AlarmRule": rule, "StateValue": "OK", "ActionsEnabled": True}
            )
            return arn

        self.legacy("alarm", composite("profiler-any", 'ALARM("profiler-issues-found") OR ALARM("rulejob-cpu")'))
        self.decoy("alarm", composite("ml-any", 'ALARM("profiler-issues-found") OR ALARM("training-gpu-low")'))
        self.legacy("alarm", self._eu_alarm())

        def dashboard(name: str, widgets: list[dict[str, Any]]) -> str:
            cw.put_dashboard(DashboardName=name, DashboardBody=json.dumps({"widgets": widgets}))
            return _arn("cloudwatch", "", f"dashboard/{name}")

        metric = lambda *row: {"type": "metric", "properties": {"metrics": [list(row)], "region": HOME}}  # noqa: E731
        text = {"type": "text", "properties": {"markdown": "Profiler rules moved to ProfStack; see the runbook"}}
        self.legacy(
            "dashboard",
            dashboard(
                "profiler-rules",
                [
                    metric("MLOps/ProfilerRules", "IssuesFound"),
                    {"type": "alarm", "properties": {"alarms": [_arn("cloudwatch", HOME, "alarm:profiler-any")]}},
                    {
                        "type": "log",
                        "properties": {
                            "query": "SOURCE '/aws/lambda/rulejob-notifier' | fields @message",
                            "region": HOME,
                        },
                    },
                    text,
                ],
            ),
        )
        self.legacy(
            "dashboard",
            dashboard(
                "ml-overview",
                [
                    metric("/aws/sagemaker/TrainingJobs", "GPUUtilization", "Host", "llama-pt-0001/algo-1"),
                    {
                        "type": "metric",
                        "properties": {
                            "metrics": [
                                ["AWS/Lambda", "Errors", "FunctionName", "metrics-shipper"],
                                [".", ".", ".", "rulejob-notifier"],
                            ]
                        },
                    },
                    metric("AWS/Lambda", "Errors", "FunctionName", "rulejob-notifier"),
                ],
            ),
        )
        self.decoy(
            "dashboard",
            dashboard(
                "training",
                [metric("/aws/sagemaker/TrainingJobs", "GPUUtilization", "Host", "llama-pt-0001/algo-1"), text],
            ),
        )

    def _eu_alarm(self) -> str:
        self.regions[OTHER].cloudwatch.put_metric_alarm(
            AlarmName="eu-digest-errors",
            Namespace="AWS/Lambda",
            MetricName="Errors",
            Dimensions=[{"Name": "FunctionName", "Value": "eu-report-digest"}],
            Statistic="Sum",
            Period=300,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
        )
        return _arn("cloudwatch", OTHER, "alarm:eu-digest-errors")


def build() -> Account:
    """Seed the account (inside mock_aws, with fake credentials) and serve what moto lacks."""
    builder = Builder()
    builder.buckets()
    builder.jobs()
    builder.logs()
    builder.apps()
    builder.iam_and_functions()
    builder.state_machines()
    builder.rules()
    builder.pipelines()
    builder.watchers()
    for region in builder.regions.values():
        _serve_sagemaker(region)
    from moto.s3.models import s3_backends

    owners = BucketOwners(lambda bucket: (s3_backends.bucket_accounts.get(bucket) or (None, None))[1])
    owners.watch(builder.s3)
    ec2 = boto3.client("ec2", region_name=HOME)
    serve(
        ec2,
        "DescribeRegions",
        lambda p: {
            "Regions": [
                {"RegionName": r, "Endpoint": f"ec2.{r}.amazonaws.com", "OptInStatus": "opt-in-not-required"}
                for r in (HOME, OTHER)
            ]
        },
    )
    return Account(builder.s3, builder.iam, ec2, builder.regions, owners, builder.expect)


# --- the scoreboard ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    legacy: int = 0
    found: int = 0
    decoys: int = 0
    flagged: int = 0
    touched: int = 0

    @property
    def missed(self) -> int:
        return self.legacy - self.found


def _covers(found: set[tuple[str, str]], kind: str, resource: str) -> bool:
    """A finding names the resource, or (S3) a parent folder of it, which cleanup would tag whole."""
    if (kind, resource) in found:
        return True
    if kind in KINDS["S3 output folders"]:
        return any(k in KINDS["S3 output folders"] and resource.startswith(r) for k, r in found)
    return False


def snapshot(account: Account) -> dict[str, Any]:
    """What cleanup must never change, per resource: tags of the decoy objects, lifecycles, streams, apps, IAM,
    rules, state machines, functions, pipelines, alarms and dashboards."""
    account.owners.recording = False  # the test's own reads are not the tools' calls
    try:
        return _snapshot(account)
    finally:
        account.owners.recording = True


def _snapshot(account: Account) -> dict[str, Any]:
    s3, state = account.s3, {}
    for uri, objects in account.expect.decoy_objects.items():
        state[uri] = [
            s3.get_object_tagging(Bucket=b, Key=k, ExpectedBucketOwner=_owner(account, b))["TagSet"] for b, k in objects
        ]
    for region in account.regions.values():
        state[f"streams:{region.name}"] = sorted(
            s["logStreamName"]
            for s in region.logs.describe_log_streams(logGroupName=PROCESSING_LOG_GROUP)["logStreams"]
        )
        state[f"apps:{region.name}"] = list(region.deleted_apps)
        state[f"functions:{region.name}"] = sorted(
            (f["FunctionArn"], f["Role"], json.dumps(f.get("Environment")))
            for p in region.lambda_.get_paginator("list_functions").paginate()
            for f in p["Functions"]
        )
        state[f"machines:{region.name}"] = sorted(
            m["stateMachineArn"] for m in region.stepfunctions.list_state_machines()["stateMachines"]
        )
        state[f"alarms:{region.name}"] = sorted(
            a["AlarmArn"] for a in region.cloudwatch.describe_alarms()["MetricAlarms"]
        )
        state[f"dashboards:{region.name}"] = sorted(
            (d["DashboardName"], region.cloudwatch.get_dashboard(DashboardName=d["DashboardName"])["DashboardBody"])
            for d in region.cloudwatch.list_dashboards()["DashboardEntries"]
        )
        buses = [b["Name"] for b in region.events.list_event_buses()["EventBuses"]]
        state[f"rules:{region.name}"] = sorted(
            (
                r["Arn"],
                r.get("State"),
                tuple(
                    t["Arn"] for t in region.events.list_targets_by_rule(Rule=r["Name"], EventBusName=bus)["Targets"]
                ),
            )
            for bus in buses
            for p in region.events.get_paginator("list_rules").paginate(EventBusName=bus)
            for r in p["Rules"]
        )
    pipelines = account.regions[HOME].sagemaker.get_paginator("list_pipelines")
    state["pipelines"] = sorted(
        (p["PipelineName"], str(p.get("LastModifiedTime")))
        for page in pipelines.paginate()
        for p in page["PipelineSummaries"]
    )
    decoy_roles = [r.rsplit("/", 1)[-1] for k, r in account.expect.decoys if k == "iam-role"]
    state["roles"] = sorted(
        (
            name,
            tuple(
                sorted(
                    a["PolicyArn"] for a in account.iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]
                )
            ),
        )
        for name in decoy_roles
    )
    state["policies"] = sorted(
        (p["Arn"], p["DefaultVersionId"])
        for page in account.iam.get_paginator("list_policies").paginate(Scope="Local")
        for p in page["Policies"]
    )
    state["partner-lifecycle"] = _lifecycle(account, "partner-ml-out")
    return state


def _owner(account: Account, bucket: str) -> str:
    return PARTNER if bucket.startswith("partner-") else ACCOUNT


def _lifecycle(account: Account, bucket: str) -> Any:
    from botocore.exceptions import ClientError

    try:
        return account.s3.get_bucket_lifecycle_configuration(
            Bucket=bucket, ExpectedBucketOwner=_owner(account, bucket)
        )["Rules"]
    except ClientError:
        return None


def _touched(before: dict[str, Any], after: dict[str, Any], kind: str, resource: str) -> bool:
    """Did cleanup change this decoy?"""
    if kind in KINDS["S3 output folders"]:
        keys = [k for k in before if k.startswith("s3://") and (k.startswith(resource) or resource.startswith(k))]
        changed = any(before[k] != after[k] for k in keys)
        return changed or (
            resource.startswith("s3://partner-") and before["partner-lifecycle"] != after["partner-lifecycle"]
        )
    if kind == "log-stream":
        stream = resource.partition(":")[2]
        return any(stream in before[k] and stream not in after[k] for k in before if k.startswith("streams:"))
    if kind == "app":
        deleted = [p for k in after if k.startswith("apps:") for p in after[k]]
        names = {
            f"{p['DomainId']}/{p.get('UserProfileName') or p.get('SpaceName')}/{p['AppType']}/{p['AppName']}"
            for p in deleted
        }
        return resource in names
    return any(
        before[k] != after[k] and resource.rsplit("/", 1)[-1].rsplit(":", 1)[-1] in json.dumps(after[k], default=str)
        for k in before
        if not k.startswith(("s3://", "streams:", "apps:"))
    )


@dataclass
class Scored:
    rows: dict[str, Row]
    account: Account
    report: Any
    cleaned: Any


def audit(account: Account) -> Any:
    """The audit as the CLI runs it with `--regions all`: both regions whole, every region's role users."""
    from profstack.migrate.legacy_profiler import audit_account

    return audit_account(account.clients(), since_days=30, max_jobs=5000, now=NOW)


def clean(account: Account, report: Any) -> Any:
    from profstack.migrate.legacy_profiler import cleanup

    return cleanup(report, account.clients(), apply=True, delete_log_streams=True)


def scoreboard(
    audit: Callable[[Account], Any] = audit,
    clean: Callable[[Account, Any], Any] = clean,
    account: Account | None = None,
) -> Scored:
    """Build the account (or take one built), audit it, clean it up (applied, log streams too), and count per kind.
    The callables let an older ProfStack be measured on the same account."""
    account = account or build()
    report = audit(account)
    found = {(f.kind, f.resource) for f in report.found}
    before = snapshot(account)
    cleaned = clean(account, report)
    after = snapshot(account)
    rows = {kind: Row() for kind in KINDS}
    for kind, resource in account.expect.legacy:
        row = rows[kind_of(kind)]
        row.legacy += 1
        row.found += _covers(found, kind, resource)
    for kind, resource in account.expect.decoys:
        row = rows[kind_of(kind)]
        row.decoys += 1
        row.flagged += _covers(found, kind, resource)
        row.touched += _touched(before, after, kind, resource)
    return Scored(rows, account, report, cleaned)


def table(rows: dict[str, Row]) -> str:
    lines = [
        "| kind | legacy items | found | missed | decoys | decoys flagged | decoys touched by cleanup |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    total = Row()
    for kind, row in rows.items():
        lines.append(
            f"| {kind} | {row.legacy} | {row.found} | {row.missed} | {row.decoys} | {row.flagged} | {row.touched} |"
        )
        for name in ("legacy", "found", "decoys", "flagged", "touched"):
            setattr(total, name, getattr(total, name) + getattr(row, name))
    lines.append(
        f"| **all** | **{total.legacy}** | **{total.found}** | **{total.missed}** | **{total.decoys}** | "
        f"**{total.flagged}** | **{total.touched}** |"
    )
    return "\n".join(lines)


def iter_padding_flagged(report: Any, account: Account) -> Iterator[tuple[str, str]]:
    found = {(f.kind, f.resource) for f in report.found}
    yield from sorted(account.expect.padding & found)
