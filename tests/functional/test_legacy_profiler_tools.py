"""Legacy Profiler audit and cleanup on a seeded account: moto for S3, Logs, IAM, EventBridge, Step
Functions and Lambda; botocore's Stubber (requests and responses validated against the SageMaker
service model) for what moto lacks: ProfilerConfig / ProfilerRuleConfigurations /
ProfilerRuleEvaluationStatuses in DescribeTrainingJob, and DetailedProfiler apps in ListApps/DeleteApp.

The account holds 13 legacy resources and decoys that must be neither found nor touched.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from profstack.cli import main
from profstack.layout import LEGACY_RULE_OUTPUT_TAG
from profstack.migrate.legacy_profiler import (
    EXPIRY_RULE_ID,
    PROCESSING_LOG_GROUP,
    AccountClients,
    LegacyProfilerError,
    apply_expiry_rule,
    audit,
    audit_account,
    cleanup,
    current_lifecycle_rules,
    disable_profiler,
    merge_expiry_rule,
)
from tests.training_jobs import ACCOUNT, REGION, describe_training_job

NOW = datetime(2026, 11, 29, tzinfo=UTC)
RULE_JOB = "job-a-profilerreport-1a2b3c4d"
RULE_STREAM = f"{RULE_JOB}/algo-1-1764000000"
OTHER_STREAM = "data-prep-2026-11-01/algo-1-1764000000"  # decoy: a processing job that is not a rule job
LEGACY_KEYS = {
    "jobs/job-a/rule-output/ProfilerReport-1764000000/profiler-output/profiler-report.html": 1000,
    "jobs/job-a/rule-output/ProfilerReport-1764000000/profiler-output/profiler-reports/Dataloader.json": 200,
    "jobs/job-a/profiler-output/system/incremental/1.json": 300,
}
#: the running job-b's: Profiler output too, but its rules may still write there, so it is listed for review and
#: never tagged (cleanup acts on finished jobs only)
RUNNING_KEYS = {
    "jobs/job-b/profiler-output/system/incremental/2.json": 400,
}
DECOY_KEYS = {
    "datasets/rule-output/labels.csv": 50,  # a rule-output folder that belongs to no job
    "jobs/job-c/rule-output/notes.json": 60,  # job-c exists but never used the Profiler
    "rule-output/top-level.json": 70,
    "jobs/job-a/output/model.tar.gz": 5000,
}


def _job(
    name: str, status: str, *, profiler: dict[str, Any] | None, rules: list[str], rule_job: bool = False
) -> dict[str, Any]:
    """A DescribeTrainingJob response shaped by the real service model (Stubber validates it)."""
    job = describe_training_job(name, output="s3://legacy-out/jobs", created=NOW, status=status, profiler=profiler)
    if rules:
        job["ProfilerRuleConfigurations"] = [
            {"RuleConfigurationName": r, "RuleEvaluatorImage": "rules-image"} for r in rules
        ]
        job["ProfilerRuleEvaluationStatuses"] = [
            {
                "RuleConfigurationName": r,
                "RuleEvaluationStatus": "NoIssuesFound",
                **(
                    {"RuleEvaluationJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:processing-job/{RULE_JOB}"}
                    if rule_job
                    else {}
                ),
            }
            for r in rules
        ]
    return job


SEEDED_JOBS = [
    _job(
        "job-a", "Completed", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=["ProfilerReport"], rule_job=True
    ),
    _job("job-b", "InProgress", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=[]),
    _job("job-c", "Completed", profiler=None, rules=[]),  # decoy: no Profiler
    _job("job-d", "Completed", profiler={"DisableProfiler": True}, rules=[]),  # decoy: Profiler off
]
APPS = [
    {
        "DomainId": "d-abc123",
        "UserProfileName": "alice",
        "AppType": "DetailedProfiler",
        "AppName": "default",
        "Status": "InService",
        "CreationTime": NOW,
    },
    {
        "DomainId": "d-abc123",
        "UserProfileName": "alice",
        "AppType": "TensorBoard",
        "AppName": "default",
        "Status": "InService",
        "CreationTime": NOW,
    },
    {
        "DomainId": "d-abc123",
        "UserProfileName": "bob",
        "AppType": "DetailedProfiler",
        "AppName": "old",
        "Status": "Deleted",
        "CreationTime": NOW,
    },
]


def _stub_jobs(stubber: Stubber, jobs: list[dict[str, Any]]) -> None:
    stubber.add_response(
        "list_training_jobs",
        {
            "TrainingJobSummaries": [
                {
                    "TrainingJobName": j["TrainingJobName"],
                    "TrainingJobArn": j["TrainingJobArn"],
                    "CreationTime": NOW,
                    "TrainingJobStatus": j["TrainingJobStatus"],
                }
                for j in jobs
            ]
        },
        {"CreationTimeAfter": ANY, "SortBy": "CreationTime", "SortOrder": "Descending"},
    )
    for job in jobs:
        stubber.add_response("describe_training_job", job, {"TrainingJobName": job["TrainingJobName"]})


def _stub_account(stubber: Stubber, *, cli: bool = False) -> None:
    _stub_jobs(stubber, SEEDED_JOBS)
    stubber.add_response("list_apps", {"Apps": APPS}, {})
    if cli:  # the CLI also reads SageMaker pipelines (their training steps may still profile)
        stubber.add_response("list_pipelines", {"PipelineSummaries": []}, {"MaxResults": 50})


@dataclass
class Seeded:
    clients: AccountClients
    stubber: Stubber
    legacy: set[tuple[str, str]]  # (kind, resource) of the 13 seeded legacy resources
    decoys: set[tuple[str, str]]


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


def _policy(statements: list[dict[str, Any]]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


@pytest.fixture
def seeded(aws_credentials: None) -> Iterator[Seeded]:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        for bucket in ("legacy-out", "datasets"):
            s3.create_bucket(Bucket=bucket)
        for key, size in {**LEGACY_KEYS, **RUNNING_KEYS, **DECOY_KEYS}.items():
            s3.put_object(Bucket="legacy-out", Key=key, Body=b"x" * size)
        s3.put_object(Bucket="datasets", Key="rule-output/labels.csv", Body=b"y" * 10)
        logs = boto3.client("logs", region_name=REGION)
        logs.create_log_group(logGroupName=PROCESSING_LOG_GROUP)
        for stream, text in ((RULE_STREAM, "rule ProfilerReport: " + "z" * 79), (OTHER_STREAM, "resize images")):
            logs.create_log_stream(logGroupName=PROCESSING_LOG_GROUP, logStreamName=stream)
            logs.put_log_events(
                logGroupName=PROCESSING_LOG_GROUP,
                logStreamName=stream,
                logEvents=[{"timestamp": int(time.time() * 1000), "message": text}],
            )
        iam = boto3.client("iam", region_name=REGION)
        trust = _policy(
            [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]
        )
        reader = iam.create_policy(
            PolicyName="profiler-report-reader",
            PolicyDocument=_policy(
                [
                    {
                        "Effect": "Allow",
                        "Action": "s3:GetObject",
                        "Resource": "arn:aws:s3:::legacy-out/jobs/*/rule-output/*",
                    }
                ]
            ),
        )["Policy"]["Arn"]
        training_read = iam.create_policy(
            PolicyName="training-data-read",
            PolicyDocument=_policy(
                [
                    {
                        "Effect": "Allow",
                        "Action": "s3:GetObject",
                        "Resource": ["arn:aws:s3:::legacy-out/jobs/*/output/*", "arn:aws:s3:::datasets/*"],
                    }
                ]
            ),
        )["Policy"]["Arn"]
        labels = iam.create_policy(
            PolicyName="labels-reader",
            PolicyDocument=_policy(
                [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::datasets/rule-output/*"}]
            ),
        )["Policy"]["Arn"]
        profiler_role = iam.create_role(RoleName="profiler-rules-role", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
        iam.attach_role_policy(RoleName="profiler-rules-role", PolicyArn=reader)
        training_role = iam.create_role(RoleName="training-role", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
        iam.attach_role_policy(RoleName="training-role", PolicyArn=training_read)
        iam.put_role_policy(
            RoleName="training-role",
            PolicyName="logs",
            PolicyDocument=_policy([{"Effect": "Allow", "Action": "logs:PutLogEvents", "Resource": "*"}]),
        )
        lam = boto3.client("lambda", region_name=REGION)
        functions = {}
        for name, env in (
            ("notify-profiler-report", {}),
            ("report-archiver", {"REPORT_PREFIX": "s3://legacy-out/jobs/job-a/rule-output/"}),
            ("thumbnailer", {"BUCKET": "datasets", "PREFIX": "images/"}),
        ):
            functions[name] = lam.create_function(
                FunctionName=name,
                Runtime="python3.12",
                Role=training_role,
                Handler="handler.handler",
                Code={"ZipFile": _zip()},
                Environment={"Variables": env},
            )["FunctionArn"]
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machines = {}
        for name, definition in (
            (
                "collect-profiler-report",
                {
                    "StartAt": "Get",
                    "States": {
                        "Get": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                            "Parameters": {
                                "Bucket": "legacy-out",
                                "Key.$": "States.Format('jobs/{}/rule-output/ProfilerReport/report.html', $.job)",
                            },
                            "End": True,
                        }
                    },
                },
            ),
            (
                "label-pipeline",
                {
                    "StartAt": "Get",
                    "States": {
                        "Get": {
                            "Type": "Task",
                            "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                            "Parameters": {"Bucket": "datasets", "Key": "rule-output/labels.csv"},
                            "End": True,
                        }
                    },
                },
            ),
            (
                "train-and-evaluate",
                {"StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 5, "End": True}}},
            ),
        ):
            machines[name] = sfn.create_state_machine(
                name=name, definition=json.dumps(definition), roleArn=training_role
            )["stateMachineArn"]
        events = boto3.client("events", region_name=REGION)
        rules = {}
        for name, pattern, target in (
            (
                "profiler-report-ready",
                {
                    "source": ["aws.sagemaker"],
                    "detail-type": ["SageMaker Processing Job State Change"],
                    "detail": {"ProcessingJobName": [{"wildcard": "*-profilerreport-*"}]},
                },
                functions["notify-profiler-report"],
            ),
            (
                "profstack-training-jobs",
                {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"]},
                functions["thumbnailer"],
            ),
            (
                "all-processing-jobs",
                {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Processing Job State Change"]},
                machines["train-and-evaluate"],
            ),
        ):
            rules[name] = events.put_rule(Name=name, EventPattern=json.dumps(pattern))["RuleArn"]
            events.put_targets(Rule=name, Targets=[{"Id": "1", "Arn": target}])
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        with Stubber(sagemaker) as stubber:
            legacy = {
                ("rule-output", "s3://legacy-out/jobs/job-a/rule-output/"),
                ("profiler-output", "s3://legacy-out/jobs/job-a/profiler-output/"),
                ("log-stream", f"{PROCESSING_LOG_GROUP}:{RULE_STREAM}"),
                ("iam-policy", reader),
                ("iam-role", profiler_role),
                ("app", "d-abc123/alice/DetailedProfiler/default"),
                ("rule", rules["profiler-report-ready"]),
                ("state-machine", machines["collect-profiler-report"]),
                ("lambda", functions["notify-profiler-report"]),
                ("lambda", functions["report-archiver"]),
                ("job", "job-a"),
                ("job", "job-b"),
            }
            decoys = {
                ("iam-policy", training_read),
                ("iam-policy", labels),
                ("iam-role", training_role),
                ("log-stream", f"{PROCESSING_LOG_GROUP}:{OTHER_STREAM}"),
                ("app", "d-abc123/alice/TensorBoard/default"),
                ("app", "d-abc123/bob/DetailedProfiler/old"),
                ("rule", rules["profstack-training-jobs"]),
                ("rule", rules["all-processing-jobs"]),
                ("state-machine", machines["label-pipeline"]),
                ("state-machine", machines["train-and-evaluate"]),
                ("lambda", functions["thumbnailer"]),
                ("job", "job-c"),
                ("job", "job-d"),
            }
            yield Seeded(
                AccountClients(
                    sagemaker=sagemaker,
                    s3=s3,
                    logs=logs,
                    iam=iam,
                    events=events,
                    stepfunctions=sfn,
                    lambda_=lam,
                    account_id=ACCOUNT,
                ),
                stubber,
                legacy,
                decoys,
            )


def _found(report: Any) -> set[tuple[str, str]]:
    return {(f.kind, f.resource) for f in report.found} | {("job", j.name) for j in report.jobs}


def _snapshot(seeded: Seeded) -> dict[str, Any]:
    """Everything cleanup must never change: IAM, rules and targets, state machines, functions, decoy data."""
    c = seeded.clients
    return {
        "policies": sorted((p["Arn"], p["DefaultVersionId"]) for p in c.iam.list_policies(Scope="Local")["Policies"]),
        "roles": sorted(
            (
                r["RoleName"],
                tuple(
                    a["PolicyArn"]
                    for a in c.iam.list_attached_role_policies(RoleName=r["RoleName"])["AttachedPolicies"]
                ),
            )
            for r in c.iam.list_roles()["Roles"]
        ),
        "rules": sorted((r["Name"], r["State"], r["EventPattern"]) for r in c.events.list_rules()["Rules"]),
        "targets": sorted(
            t["Arn"]
            for r in c.events.list_rules()["Rules"]
            for t in c.events.list_targets_by_rule(Rule=r["Name"])["Targets"]
        ),
        "machines": sorted(
            (m["name"], c.stepfunctions.describe_state_machine(stateMachineArn=m["stateMachineArn"])["definition"])
            for m in c.stepfunctions.list_state_machines()["stateMachines"]
        ),
        "functions": sorted(
            (f["FunctionName"], json.dumps(f.get("Environment"))) for f in c.lambda_.list_functions()["Functions"]
        ),
        "decoy_tags": {
            k: c.s3.get_object_tagging(Bucket="legacy-out", Key=k)["TagSet"] for k in {**DECOY_KEYS, **RUNNING_KEYS}
        },
        "datasets_tags": c.s3.get_object_tagging(Bucket="datasets", Key="rule-output/labels.csv")["TagSet"],
        "datasets_lifecycle": current_lifecycle_rules(c.s3, "datasets", expected_owner=ACCOUNT),
        "other_stream": [
            s["logStreamName"]
            for s in c.logs.describe_log_streams(logGroupName=PROCESSING_LOG_GROUP, logStreamNamePrefix="data-prep")[
                "logStreams"
            ]
        ],
    }


def test_audit_finds_every_seeded_resource_and_no_decoy(seeded: Seeded, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the seeded account WHEN audited
    _stub_account(seeded.stubber)
    report = audit_account(seeded.clients, since_days=30, now=NOW)
    seeded.stubber.assert_no_pending_responses()
    found = _found(report)
    # THEN recall and precision on the 12 seeded resources are both 1.0, and no decoy is found
    hits = found & seeded.legacy
    recall = len(hits) / len(seeded.legacy)
    precision = len(hits) / len(found)
    with capsys.disabled():
        print(
            f"\nlegacy audit on the seeded account: recall {recall:.2f} ({len(hits)}/{len(seeded.legacy)}), "
            f"precision {precision:.2f} ({len(hits)}/{len(found)}), {len(report.review)} for review"
        )
    assert not found & seeded.decoys
    assert found == seeded.legacy, (seeded.legacy - found, found - seeded.legacy)
    assert recall == precision == 1.0
    # AND what mentions rule-output/ without a verified job is listed for review, never as found
    assert {
        (f.kind, f.resource.rsplit(":", 1)[-1].rsplit("/", 1)[-1]) for f in report.review if f.kind != "profiler-output"
    } == {
        ("iam-policy", "labels-reader"),
        ("state-machine", "label-pipeline"),
    }
    # AND so is the still-running job-b's profiler output, with its size and why (never as found: not cleaned up)
    (running,) = [f for f in report.review if f.kind == "profiler-output"]
    assert running.resource == "s3://legacy-out/jobs/job-b/profiler-output/"
    assert running.bytes == 400
    assert "the job is InProgress" in running.why
    # AND sizes and costs are those of the seeded objects and logs
    by = {(f.kind, f.resource): f for f in report.found}
    assert by[("rule-output", "s3://legacy-out/jobs/job-a/rule-output/")].bytes == 1200
    assert by[("log-stream", f"{PROCESSING_LOG_GROUP}:{RULE_STREAM}")].bytes == 100
    role = next(f for f in report.found if f.kind == "iam-role")
    assert role.profiler_only is True
    assert report.buckets == {"legacy-out": 1900}  # every profiled job's output, the running one's included
    assert report.monthly_usd == pytest.approx(1500 / 1024**3 * 0.023 + 100 / 1024**3 * 0.03)  # what cleanup frees
    as_json = json.loads(json.dumps(report.to_dict()))
    assert len(as_json["findings"]) == 10
    assert len(as_json["review"]) == 3
    assert as_json["estimated_monthly_usd"] >= 0
    assert as_json["incomplete"] == []


def test_cleanup_dry_run_changes_nothing_and_apply_touches_only_verified(seeded: Seeded) -> None:
    c = seeded.clients
    _stub_account(seeded.stubber)
    report = audit_account(c, since_days=30, now=NOW)
    before = _snapshot(seeded)
    # WHEN a dry run THEN it counts and changes nothing
    dry = cleanup(report, c, apply=False)
    assert dry.tagged == len(LEGACY_KEYS)
    assert dry.apps == ["d-abc123/alice/DetailedProfiler/default"]
    assert dry.expiry_rules == ["legacy-out"]
    assert current_lifecycle_rules(c.s3, "legacy-out", expected_owner=ACCOUNT) == []
    assert all(not c.s3.get_object_tagging(Bucket="legacy-out", Key=k)["TagSet"] for k in LEGACY_KEYS)
    assert {f.kind for f in dry.left_alone} >= {
        "iam-policy",
        "iam-role",
        "rule",
        "state-machine",
        "lambda",
        "log-stream",
    }
    # WHEN applied (DeleteApp validated by Stubber: only the DetailedProfiler app, with its exact keys)
    seeded.stubber.add_response(
        "delete_app",
        {},
        {"DomainId": "d-abc123", "UserProfileName": "alice", "AppType": "DetailedProfiler", "AppName": "default"},
    )
    done = cleanup(report, c, apply=True, expire_days=14)
    seeded.stubber.assert_no_pending_responses()
    # THEN every verified legacy object carries the expiry tag and the bucket expires it
    assert done.tagged == len(LEGACY_KEYS)
    for key in LEGACY_KEYS:
        tags = {(t["Key"], t["Value"]) for t in c.s3.get_object_tagging(Bucket="legacy-out", Key=key)["TagSet"]}
        assert LEGACY_RULE_OUTPUT_TAG in tags
    rules = {r["ID"]: r for r in current_lifecycle_rules(c.s3, "legacy-out", expected_owner=ACCOUNT)}
    assert rules[EXPIRY_RULE_ID]["Expiration"] == {"Days": 14}
    # AND no decoy, IAM, rule, state machine, function or other log stream changed; logs kept without the flag
    assert _snapshot(seeded) == before
    streams = [s["logStreamName"] for s in c.logs.describe_log_streams(logGroupName=PROCESSING_LOG_GROUP)["logStreams"]]
    assert RULE_STREAM in streams
    # WHEN log streams are asked for THEN only the rule job's stream goes (the same report: the app again)
    seeded.stubber.add_response(
        "delete_app",
        {},
        {"DomainId": "d-abc123", "UserProfileName": "alice", "AppType": "DetailedProfiler", "AppName": "default"},
    )
    assert cleanup(report, c, apply=True, delete_log_streams=True).log_streams == [
        f"{PROCESSING_LOG_GROUP}:{RULE_STREAM}"
    ]
    streams = [s["logStreamName"] for s in c.logs.describe_log_streams(logGroupName=PROCESSING_LOG_GROUP)["logStreams"]]
    assert streams == [OTHER_STREAM]
    assert _snapshot(seeded) == before


def one_region(ec2: Any) -> Any:
    """An EC2 client whose DescribeRegions names only REGION (moto's names every region it knows)."""
    from botocore.awsrequest import AWSResponse

    def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        regions = [
            {"RegionName": REGION, "Endpoint": f"ec2.{REGION}.amazonaws.com", "OptInStatus": "opt-in-not-required"}
        ]
        return AWSResponse("", 200, {}, None), {"Regions": regions, "ResponseMetadata": {"HTTPStatusCode": 200}}

    ec2.meta.events.register("before-call.ec2.DescribeRegions", answer)
    return ec2


def cli_clients(c: AccountClients, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's AWS clients are the seeded account's (sts: the caller's account, the expected bucket owner), in one
    region (ec2: the regions enabled for the account)."""
    import profstack.cli._aws as aws

    services = {
        "sagemaker": c.sagemaker,
        "s3": c.s3,
        "logs": c.logs,
        "iam": c.iam,
        "events": c.events,
        "stepfunctions": c.stepfunctions,
        "lambda": c.lambda_,
        "cloudwatch": c.cloudwatch or boto3.client("cloudwatch", region_name=REGION),
        "ec2": one_region(boto3.client("ec2", region_name=REGION)),
        "sts": boto3.client("sts", region_name=REGION),
    }
    monkeypatch.setattr(aws, "make_client", lambda service, region: services[service])


def test_cli_audit_table_json_and_cleanup(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    c = seeded.clients
    cli_clients(c, monkeypatch)
    # WHEN the audit prints its table THEN each finding has its size, cost and the command to act on it
    _stub_account(seeded.stubber, cli=True)
    assert main(["legacy", "audit", "--days", "30"]) == 0
    out = capsys.readouterr().out
    assert "Scanned 4 training jobs" in out
    assert "10 legacy resources:" in out
    assert "s3://legacy-out/jobs/job-a/rule-output/" in out
    assert "[Profiler-only]" in out
    assert "3 to review" in out
    assert "USD/month" in out
    assert "profstack legacy disable-profiler --apply" in out
    assert "profstack legacy cleanup " in out
    # WHEN as JSON THEN the same findings
    _stub_account(seeded.stubber, cli=True)
    assert main(["legacy", "audit", "--days", "30", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["findings"]) == 10
    # WHEN cleanup runs without --apply THEN it prints what it would do and the commands for the rest
    _stub_account(seeded.stubber, cli=True)
    assert main(["legacy", "cleanup", "--days", "30"]) == 0
    out = capsys.readouterr().out
    assert "would tag 3 objects under 2 verified job prefixes" in out  # job-a's; the running job-b's are reviewed
    assert "would delete DetailedProfiler app d-abc123/alice/DetailedProfiler/default" in out
    assert "Left alone (cleanup never edits these)" in out
    assert "$ aws iam delete-policy --policy-arn arn:aws:iam::123456789012:policy/profiler-report-reader" in out
    assert "$ aws events disable-rule --name profiler-report-ready" in out
    assert "dry run: nothing changed" in out
    assert all(not c.s3.get_object_tagging(Bucket="legacy-out", Key=k)["TagSet"] for k in LEGACY_KEYS)


def test_audit_finds_profiler_jobs_and_measures_their_legacy_output(seeded: Seeded) -> None:
    # GIVEN a job with the Profiler and rules, one with the Profiler disabled, one with neither
    client, stubber = seeded.clients.sagemaker, seeded.stubber
    jobs = [
        _job("job-a", "Completed", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=["ProfilerReport"]),
        _job("job-d", "InProgress", profiler={"DisableProfiler": True}, rules=[]),
        _job("job-c", "InProgress", profiler=None, rules=[]),
    ]
    _stub_jobs(stubber, jobs)
    report = audit(client, seeded.clients.s3, since_days=30, now=NOW, expected_owner=ACCOUNT)
    # THEN only job-a is reported, with its rule and the bytes under rule-output/ and profiler-output/
    assert report.scanned == 3
    assert [j.name for j in report.jobs] == ["job-a"]
    job = report.jobs[0]
    assert job.profiler_enabled
    assert job.profiler_rules == [("ProfilerReport", "NoIssuesFound")]
    assert {str(u.location): (u.objects, u.bytes) for u in job.usage} == {
        "s3://legacy-out/jobs/job-a/rule-output/": (2, 1200),
        "s3://legacy-out/jobs/job-a/profiler-output/": (1, 300),
    }
    assert report.buckets == {"legacy-out": 1500}
    assert json.loads(json.dumps(report.to_dict()))["legacy_bytes_by_bucket"] == {"legacy-out": 1500}


def test_disable_profiler_touches_only_running_profiled_jobs(seeded: Seeded) -> None:
    client, stubber = seeded.clients.sagemaker, seeded.stubber
    jobs = [
        _job("run-1", "InProgress", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=[]),
        _job("done-1", "Completed", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=[]),
    ]
    _stub_jobs(stubber, jobs)
    report = audit(client, seeded.clients.s3, since_days=30, now=NOW, measure_output=False)
    # WHEN a dry run THEN nothing is called, but the target is named
    assert disable_profiler(client, report.jobs, apply=False) == ["run-1"]
    # WHEN applied THEN UpdateTrainingJob turns the Profiler off for that job only
    stubber.add_response(
        "update_training_job",
        {"TrainingJobArn": jobs[0]["TrainingJobArn"]},
        {"TrainingJobName": "run-1", "ProfilerConfig": {"DisableProfiler": True}},
    )
    assert disable_profiler(client, report.jobs, apply=True) == ["run-1"]


def test_expiry_rule_merges_with_existing_rules(seeded: Seeded) -> None:
    s3 = seeded.clients.s3
    # GIVEN a bucket with a rule of its own
    own = {"ID": "team-archive", "Status": "Enabled", "Filter": {"Prefix": "archive/"}, "Expiration": {"Days": 400}}
    s3.put_bucket_lifecycle_configuration(Bucket="legacy-out", LifecycleConfiguration={"Rules": [own]})
    # WHEN a dry run THEN nothing is written
    _, changed = apply_expiry_rule(s3, "legacy-out", days=30, apply=False, expected_owner=ACCOUNT)
    assert changed
    assert [r["ID"] for r in current_lifecycle_rules(s3, "legacy-out", expected_owner=ACCOUNT)] == ["team-archive"]
    # WHEN applied THEN both rules are there, ours expiring by tag
    apply_expiry_rule(s3, "legacy-out", days=30, apply=True, expected_owner=ACCOUNT)
    rules = {r["ID"]: r for r in current_lifecycle_rules(s3, "legacy-out", expected_owner=ACCOUNT)}
    assert set(rules) == {"team-archive", EXPIRY_RULE_ID}
    assert rules["team-archive"]["Expiration"] == {"Days": 400}
    assert rules[EXPIRY_RULE_ID]["Filter"] == {"Tag": {"Key": "profstack:class", "Value": "legacy-rule-output"}}
    assert rules[EXPIRY_RULE_ID]["Expiration"] == {"Days": 30}
    # WHEN applied again THEN nothing changes; WHEN the days change THEN our rule is updated, not duplicated
    assert apply_expiry_rule(s3, "legacy-out", days=30, apply=True, expected_owner=ACCOUNT)[1] is False
    apply_expiry_rule(s3, "legacy-out", days=60, apply=True, expected_owner=ACCOUNT)
    rules_after = current_lifecycle_rules(s3, "legacy-out", expected_owner=ACCOUNT)
    assert [r["ID"] for r in rules_after].count(EXPIRY_RULE_ID) == 1
    assert {r["ID"]: r for r in rules_after}[EXPIRY_RULE_ID]["Expiration"] == {"Days": 60}


def test_expiry_rule_on_a_bucket_without_lifecycle(seeded: Seeded) -> None:
    s3 = seeded.clients.s3
    assert current_lifecycle_rules(s3, "legacy-out", expected_owner=ACCOUNT) == []
    apply_expiry_rule(s3, "legacy-out", days=7, apply=True, expected_owner=ACCOUNT)
    assert [r["ID"] for r in current_lifecycle_rules(s3, "legacy-out", expected_owner=ACCOUNT)] == [EXPIRY_RULE_ID]


def test_merge_refuses_bad_days_and_full_buckets() -> None:
    with pytest.raises(LegacyProfilerError, match="positive"):
        merge_expiry_rule([], days=0)
    full = [{"ID": f"r{i}", "Status": "Enabled", "Filter": {"Prefix": f"{i}/"}} for i in range(1000)]
    with pytest.raises(LegacyProfilerError, match="limit is 1000"):
        merge_expiry_rule(full, days=30)


def test_cli_expire_rule_output_dry_run_and_apply(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import profstack.cli._aws as aws

    services = {"s3": seeded.clients.s3, "sts": boto3.client("sts", region_name=REGION)}
    s3 = seeded.clients.s3
    monkeypatch.setattr(aws, "make_client", lambda service, region: services[service])
    expire = ["legacy", "expire-rule-output", "--bucket", "legacy-out", "--expire-after-days"]
    assert main([*expire, "14"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert current_lifecycle_rules(s3, "legacy-out", expected_owner=ACCOUNT) == []
    assert main([*expire, "14", "--apply"]) == 0
    assert "set (expire after 14 days); 0 existing rule(s) kept" in capsys.readouterr().out
    assert main([*expire, "-1"]) == 2
    assert capsys.readouterr().err.strip() == "profstack: error: --expire-after-days must be a positive number, got -1"
    # the old spelling, --days, means a lookback window in every other legacy command: refused here, with a hint
    with pytest.raises(SystemExit):
        main(["legacy", "expire-rule-output", "--bucket", "legacy-out", "--days", "14", "--apply"])
    assert "--expire-after-days" in capsys.readouterr().err
    assert current_lifecycle_rules(s3, "legacy-out", expected_owner=ACCOUNT) != []  # the --apply above


def test_cli_audit_without_credentials_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["legacy", "audit", "--region", REGION]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no AWS credentials found" in err[0]


def test_every_legacy_option_has_help() -> None:
    import argparse

    from profstack.cli import build_parser

    parser = build_parser()
    legacy = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["legacy"]
    tools = next(a for a in legacy._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"audit", "cleanup", "tag-rule-output", "expire-rule-output", "disable-profiler"} <= set(tools)
    for name, tool in tools.items():
        for action in tool._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"legacy {name} {action.option_strings[0]} has no help"


def test_cli_cleanup_dry_run_lists_every_object_it_would_tag(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    c = seeded.clients
    cli_clients(c, monkeypatch)
    _stub_account(seeded.stubber, cli=True)
    # WHEN a dry run asks for the objects (before: only the prefixes and a count were printed)
    assert main(["legacy", "cleanup", "--days", "30", "--list-objects"]) == 0
    out = capsys.readouterr().out
    # THEN each verified legacy object is listed by URI, exactly once, and no decoy is
    listed = [line.strip().split("  (")[0] for line in out.splitlines() if line.startswith("  s3://legacy-out/")]
    objects = [u for u in listed if not u.endswith("/")]
    assert sorted(objects) == sorted(f"s3://legacy-out/{k}" for k in LEGACY_KEYS)
    assert f"would tag for expiry ({len(LEGACY_KEYS)} objects):" in out
    assert not any(k in out for k in DECOY_KEYS)
    assert all(not c.s3.get_object_tagging(Bucket="legacy-out", Key=k)["TagSet"] for k in LEGACY_KEYS)


@pytest.mark.parametrize("regions", ["eu-west", "us-east-1,../x", ","])
def test_cli_refuses_a_region_list_with_a_wrong_name_before_any_aws_call(
    regions: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import profstack.cli._aws as aws

    def no_aws(service: str, region: str | None) -> Any:
        raise AssertionError(f"{service} client made before --regions was checked")

    monkeypatch.setattr(aws, "make_client", no_aws)
    assert main(["legacy", "audit", "--regions", regions]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("profstack: error: --regions: not a region name")
