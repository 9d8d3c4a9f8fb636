"""The legacy audit on a second account, shaped unlike the first (tests/functional/test_legacy_profiler_tools.py):
mixed-case job names, a custom Profiler output path, a versioned bucket with older versions, a job that ran
Debugger rules beside the Profiler, a Debugger-only job, Profiler automation found only through its role or its
rule's targets, roles with AWS-managed execution policies, shared roles and policies, rules with several targets,
and resources that only look like Profiler's by name.

moto serves S3 (versioning), Logs, IAM, EventBridge, Step Functions and Lambda; botocore's Stubber serves what moto
lacks (ProfilerConfig / Profiler and Debugger rule statuses in DescribeTrainingJob, ListApps). Recall, decoys
flagged and decoys touched are printed and published in docs/migration.md.
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
from profstack.migrate.legacy_evidence import DEBUGGER_CLOSED_TO_NEW_CUSTOMERS
from profstack.migrate.legacy_profiler import PROCESSING_LOG_GROUP, AccountClients, audit_account, cleanup
from tests.functional.test_legacy_profiler_tools import cli_clients
from tests.training_jobs import ACCOUNT, REGION, describe_training_job, list_training_jobs_response

NOW = datetime(2026, 11, 29, tzinfo=UTC)
TAG = {"Key": LEGACY_RULE_OUTPUT_TAG[0], "Value": LEGACY_RULE_OUTPUT_TAG[1]}
ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:processing-job"

# Rule-evaluation jobs as SageMaker names them (mixed case); their ARNs spell them in lower case
BERT_RULE_JOBS = ["BERT-Pretrain-Run7-ProfilerReport-9f8e7d6c", "BERT-Pretrain-Run7-LowGPUUtilization-1a2b3c4d"]
RESNET_RULE_JOBS = ["ResNet50-Sweep-03-ProfilerReport-5e6f7a8b", "ResNet50-Sweep-03-CPUBottleneck-0c1d2e3f"]
DEBUG_RULE_JOB = "LLM-FT-42-LossNotDecreasing-77aa88bb"  # a Debugger rule job: kept
PROFILER_KEYS = {  # bert (versioned bucket, custom profiler path) and resnet (Debugger rules beside Profiler's)
    ("ml-versioned", "profiling/BERT-Pretrain-Run7/profiler-output/system/incremental/1.json"): 300,
    ("ml-versioned", "training/BERT-Pretrain-Run7/rule-output/ProfilerReport-1764000000/profiler-report.html"): 900,
    ("ml-out", "sweeps/ResNet50-Sweep-03/rule-output/ProfilerReport-1764000001/profiler-report.html"): 800,
    ("ml-out", "sweeps/ResNet50-Sweep-03/profiler-output/framework/trace.json"): 400,
}
DEBUGGER_KEYS = {  # Debugger's rule output: named, kept, never tagged
    ("ml-out", "sweeps/ResNet50-Sweep-03/rule-output/LossNotDecreasing/rule-state.json"): 70,
    ("ml-out", "ft/LLM-FT-42/rule-output/LossNotDecreasing/rule-state.json"): 60,
    ("ml-out", "ft/LLM-FT-42/rule-output/VanishingGradient/rule-state.json"): 50,
}
DECOY_KEYS = {
    ("ml-out", "sweeps/ResNet50-Sweep-03/rule-output/notes/readme.txt"): 10,  # in a mixed folder, no rule's: review
    ("ml-out", "datasets/rule-output/labels.csv"): 20,
    ("ml-out", "sweeps/ResNet50-Sweep-03/output/model.tar.gz"): 5000,
    ("ml-versioned", "training/BERT-Pretrain-Run7/output/model.tar.gz"): 5000,
}


def _statuses(names: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "RuleConfigurationName": n.split("-")[-2],
            "RuleEvaluationJobArn": f"{ARN}/{n.lower()}",
            "RuleEvaluationStatus": "NoIssuesFound",
        }
        for n in names
    ]


def _jobs() -> list[dict[str, Any]]:
    bert = describe_training_job(
        "BERT-Pretrain-Run7",
        output="s3://ml-versioned/training",
        created=NOW,
        profiler={"S3OutputPath": "s3://ml-versioned/profiling"},
    )
    bert["ProfilerRuleConfigurations"] = [
        {"RuleConfigurationName": n.split("-")[-2], "RuleEvaluatorImage": "img"} for n in BERT_RULE_JOBS
    ]
    bert["ProfilerRuleEvaluationStatuses"] = _statuses(BERT_RULE_JOBS)
    resnet = describe_training_job(
        "ResNet50-Sweep-03", output="s3://ml-out/sweeps", created=NOW, profiler={"S3OutputPath": "s3://ml-out/sweeps"}
    )
    resnet["ProfilerRuleEvaluationStatuses"] = _statuses(RESNET_RULE_JOBS)
    resnet["DebugRuleConfigurations"] = [{"RuleConfigurationName": "LossNotDecreasing", "RuleEvaluatorImage": "img"}]
    llm = describe_training_job(
        "LLM-FT-42", output="s3://ml-out/ft", created=NOW, profiler={"DisableProfiler": True}
    )  # Debugger only
    llm["DebugRuleConfigurations"] = [
        {"RuleConfigurationName": r, "RuleEvaluatorImage": "img"} for r in ("LossNotDecreasing", "VanishingGradient")
    ]
    llm["DebugRuleEvaluationStatuses"] = [
        {
            "RuleConfigurationName": "LossNotDecreasing",
            "RuleEvaluationJobArn": f"{ARN}/{DEBUG_RULE_JOB.lower()}",
            "RuleEvaluationStatus": "IssuesFound",
        }
    ]
    plain = describe_training_job("etl-nightly-7", output="s3://ml-out/etl", created=NOW)
    return [bert, resnet, llm, plain]


def _stub(stubber: Stubber, *, apps: bool = True, pipelines: bool = False) -> None:
    jobs = _jobs()
    stubber.add_response(
        "list_training_jobs",
        list_training_jobs_response(jobs, NOW),
        {"CreationTimeAfter": ANY, "SortBy": "CreationTime", "SortOrder": "Descending"},
    )
    for job in jobs:
        stubber.add_response("describe_training_job", job, {"TrainingJobName": job["TrainingJobName"]})
    if apps:
        stubber.add_response("list_apps", {"Apps": []}, {})
    if pipelines:  # the CLI reads SageMaker pipelines too (their training steps may still profile)
        stubber.add_response("list_pipelines", {"PipelineSummaries": []}, {"MaxResults": 50})


def _policy(statements: list[dict[str, Any]]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


@dataclass
class Account:
    clients: AccountClients
    stubber: Stubber
    legacy: set[tuple[str, str]]
    decoys: set[tuple[str, str]]
    debugger: set[tuple[str, str]]


def _seed_s3(s3: Any) -> None:
    for bucket in ("ml-out", "ml-versioned"):
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket="ml-versioned", VersioningConfiguration={"Status": "Enabled"})
    for (bucket, key), size in {**PROFILER_KEYS, **DEBUGGER_KEYS, **DECOY_KEYS}.items():
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * size)
    # older versions under the versioned bucket's legacy prefixes: billed, and they must expire too
    for (bucket, key), size in PROFILER_KEYS.items():
        if bucket == "ml-versioned":
            s3.put_object(Bucket=bucket, Key=key, Body=b"y" * (size + 1))
            s3.put_object(Bucket=bucket, Key=key, Body=b"z" * (size + 2))


def _seed_logs(logs: Any) -> list[str]:
    logs.create_log_group(logGroupName=PROCESSING_LOG_GROUP)
    streams = [f"{job}/algo-1-1764000000" for job in [*BERT_RULE_JOBS, *RESNET_RULE_JOBS, DEBUG_RULE_JOB]]
    streams.append("Data-Prep-2026-11-01/algo-1-1764000000")  # not a rule job
    for stream in streams:
        logs.create_log_stream(logGroupName=PROCESSING_LOG_GROUP, logStreamName=stream)
        logs.put_log_events(
            logGroupName=PROCESSING_LOG_GROUP,
            logStreamName=stream,
            logEvents=[{"timestamp": int(time.time() * 1000), "message": "rule evaluation " + "z" * 40}],
        )
    return streams


@pytest.fixture
def account(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        _seed_s3(s3)
        logs = boto3.client("logs", region_name=REGION)
        streams = _seed_logs(logs)
        iam = boto3.client("iam", region_name=REGION)
        lambda_trust = _policy(
            [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]
        )

        def role(name: str, *, managed: tuple[str, ...] = (), attached: tuple[str, ...] = ()) -> str:
            arn = str(iam.create_role(RoleName=name, AssumeRolePolicyDocument=lambda_trust)["Role"]["Arn"])
            for policy in managed:  # AWS-managed: moto needs them created under the aws account path
                iam.attach_role_policy(RoleName=name, PolicyArn=f"arn:aws:iam::aws:policy/service-role/{policy}")
            for policy in attached:
                iam.attach_role_policy(RoleName=name, PolicyArn=policy)
            return arn

        def policy(name: str, statements: list[dict[str, Any]]) -> str:
            return str(iam.create_policy(PolicyName=name, PolicyDocument=_policy(statements))["Policy"]["Arn"])

        managed_ok = ("AWSLambdaBasicExecutionRole",)  # AWS-managed (moto loads them: MOTO_IAM_LOAD_MANAGED_POLICIES)
        digest_policy = policy(
            "profiler-digest-access",
            [
                {
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": "arn:aws:s3:::ml-out/sweeps/*/rule-output/ProfilerReport-*",
                },
                {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"},
            ],
        )
        shared_policy = policy(  # shared: a Profiler statement among others (its statement is the finding)
            "ml-shared-access",
            [
                {
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": "arn:aws:s3:::ml-versioned/profiling/*/profiler-output/*",
                },
                {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::ml-out/etl/*"},
            ],
        )
        notifier_policy = policy(  # names nothing: Profiler-only because only Profiler-only roles hold it
            "digest-notifier-publish",
            [{"Effect": "Allow", "Action": "sns:Publish", "Resource": f"arn:aws:sns:{REGION}:{ACCOUNT}:ml-alerts"}],
        )
        debugger_policy = policy(
            "debugger-digest-access",
            [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::ml-out/ft/*/rule-output/*"}],
        )
        mixed_reader = policy(  # one wildcard over both Profiler and Debugger rule output of ResNet: review
            "sweep-rule-output-reader",
            [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::ml-out/sweeps/*/rule-output/*"}],
        )
        digest_role = role("profiler-digest-role", managed=managed_ok, attached=(digest_policy, notifier_policy))
        archiver_role = role("report-archiver-role", managed=managed_ok)  # no path of its own: used by Profiler only
        etl_role = role("etl-role", attached=(shared_policy,))
        debugger_role = role("debugger-digest-role", managed=managed_ok, attached=(debugger_policy,))
        lam = boto3.client("lambda", region_name=REGION)
        functions = {}
        for name, run_as, env in (
            ("profiler-digest", digest_role, {"CHANNEL": "ml-alerts"}),  # Profiler's through its role only
            ("report-archiver", archiver_role, {"WATCH": "ProfilerRuleEvaluationStatuses"}),  # Profiler API field
            ("profiler-dashboard-sync", etl_role, {"TABLE": "dashboards"}),  # a name, nothing else: not Profiler's
            ("etl-loader", etl_role, {"SOURCE": "s3://ml-out/etl/"}),
            ("debugger-digest", debugger_role, {"RULES": "s3://ml-out/ft/LLM-FT-42/rule-output/"}),
        ):
            functions[name] = lam.create_function(
                FunctionName=name,
                Runtime="python3.12",
                Role=run_as,
                Handler="handler.handler",
                Code={"ZipFile": _zip()},
                Environment={"Variables": env},
            )["FunctionArn"]
        for name in ("profiler-digest", "report-archiver", "etl-loader"):
            logs.create_log_group(logGroupName=f"/aws/lambda/{name}")
        sfn = boto3.client("stepfunctions", region_name=REGION)
        machine = sfn.create_state_machine(
            name="nightly-etl",
            definition=json.dumps({"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "End": True}}}),
            roleArn=etl_role,
        )["stateMachineArn"]
        events = boto3.client("events", region_name=REGION)
        rules = {}
        for name, pattern, targets in (
            (  # training-job completion starting the Profiler digest: Profiler's through its only target
                "training-done-digest",
                {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"]},
                [functions["profiler-digest"]],
            ),
            (  # several targets, one of them Profiler's: a partial edit (remove that target), not the rule
                "training-done-fanout",
                {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"]},
                [functions["report-archiver"], functions["etl-loader"], machine],
            ),
            (
                "debugger-rule-done",
                {
                    "source": ["aws.sagemaker"],
                    "detail-type": ["SageMaker Processing Job State Change"],
                    "detail": {"ProcessingJobName": [{"prefix": "llm-ft-42-lossnotdecreasing"}]},
                },
                [functions["debugger-digest"]],
            ),
            (
                "nightly-etl-schedule",
                {"source": ["aws.events"], "detail-type": ["Scheduled Event"]},
                [machine],
            ),
        ):
            rules[name] = events.put_rule(Name=name, EventPattern=json.dumps(pattern))["RuleArn"]
            events.put_targets(Rule=name, Targets=[{"Id": str(i), "Arn": a} for i, a in enumerate(targets)])
        sagemaker = boto3.client("sagemaker", region_name=REGION)
        with Stubber(sagemaker) as stubber:
            legacy = {
                ("profiler-output", "s3://ml-versioned/profiling/BERT-Pretrain-Run7/profiler-output/"),
                ("rule-output", "s3://ml-versioned/training/BERT-Pretrain-Run7/rule-output/"),
                ("rule-output", "s3://ml-out/sweeps/ResNet50-Sweep-03/rule-output/ProfilerReport-1764000001/"),
                ("profiler-output", "s3://ml-out/sweeps/ResNet50-Sweep-03/profiler-output/"),
                *{("log-stream", f"{PROCESSING_LOG_GROUP}:{s}") for s in streams[:4]},
                ("lambda", functions["profiler-digest"]),
                ("lambda", functions["report-archiver"]),
                ("log-group", "/aws/lambda/profiler-digest"),
                ("log-group", "/aws/lambda/report-archiver"),
                ("rule", rules["training-done-digest"]),
                ("rule", rules["training-done-fanout"]),
                ("iam-policy", digest_policy),
                ("iam-policy", notifier_policy),
                ("iam-policy", shared_policy),
                ("iam-role", digest_role),
                ("iam-role", archiver_role),
            }
            decoys = {
                ("lambda", functions["profiler-dashboard-sync"]),
                ("lambda", functions["etl-loader"]),
                ("lambda", functions["debugger-digest"]),
                ("state-machine", machine),
                ("rule", rules["nightly-etl-schedule"]),
                ("rule", rules["debugger-rule-done"]),
                ("iam-role", etl_role),
                ("iam-role", debugger_role),
                ("iam-policy", debugger_policy),
                ("iam-policy", mixed_reader),
                ("log-group", "/aws/lambda/etl-loader"),
                ("log-stream", f"{PROCESSING_LOG_GROUP}:{streams[5]}"),
                ("log-stream", f"{PROCESSING_LOG_GROUP}:{streams[4]}"),
                ("rule-output", "s3://ml-out/sweeps/ResNet50-Sweep-03/rule-output/"),
                ("rule-output", "s3://ml-out/sweeps/ResNet50-Sweep-03/rule-output/LossNotDecreasing/"),
                ("rule-output", "s3://ml-out/sweeps/ResNet50-Sweep-03/rule-output/notes/"),
                ("rule-output", "s3://ml-out/ft/LLM-FT-42/rule-output/"),
                ("rule-output", "s3://ml-out/ft/LLM-FT-42/rule-output/LossNotDecreasing/"),
                ("rule-output", "s3://ml-out/ft/LLM-FT-42/rule-output/VanishingGradient/"),
                ("rule-output", "s3://ml-out/datasets/rule-output/"),
            }
            debugger = {
                ("rule-output", "s3://ml-out/sweeps/ResNet50-Sweep-03/rule-output/LossNotDecreasing/"),
                ("rule-output", "s3://ml-out/ft/LLM-FT-42/rule-output/LossNotDecreasing/"),
                ("rule-output", "s3://ml-out/ft/LLM-FT-42/rule-output/VanishingGradient/"),
                ("log-stream", f"{PROCESSING_LOG_GROUP}:{streams[4]}"),
                ("lambda", functions["debugger-digest"]),
                ("rule", rules["debugger-rule-done"]),
                ("iam-policy", debugger_policy),
                ("iam-role", debugger_role),
            }
            clients = AccountClients(
                sagemaker=sagemaker,
                s3=s3,
                logs=logs,
                iam=iam,
                events=events,
                stepfunctions=sfn,
                lambda_=lam,
                account_id=ACCOUNT,
            )
            yield Account(clients, stubber, legacy, decoys, debugger)


def _found(report: Any) -> set[tuple[str, str]]:
    return {(f.kind, f.resource) for f in report.found}


def test_second_account_recall_and_no_decoy(account: Account, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the second account WHEN audited
    _stub(account.stubber)
    report = audit_account(account.clients, since_days=30, now=NOW)
    found = _found(report)
    hits = found & account.legacy
    flagged = found & account.decoys
    with capsys.disabled():
        print(
            f"\nlegacy audit, second account: recall {len(hits)}/{len(account.legacy)}, "
            f"decoys flagged {len(flagged)}/{len(account.decoys)}, {len(report.review)} for review, "
            f"{len(report.debugger)} Debugger resources kept"
        )
    # THEN every legacy item is found (the missed ones before: mixed-case rule-job log streams, a Lambda known only
    # by its role, log groups, a rule known only by its target, Profiler-only roles with AWS-managed execution
    # policies) and no decoy is (before: Debugger's digest, role, policy, and rule output)
    assert account.legacy - found == set()
    assert flagged == set()
    assert report.incomplete == []
    # AND Debugger's parts are named as Debugger's, with the date it closed to new customers
    debugger = {(f.kind, f.resource) for f in report.debugger}
    assert account.debugger <= debugger, account.debugger - debugger
    as_json = report.to_dict()
    assert as_json["debugger"]["closed_to_new_customers"] == DEBUGGER_CLOSED_TO_NEW_CUSTOMERS == "2026-07-30"
    assert {j["name"] for j in as_json["debugger"]["jobs"]} == {"LLM-FT-42"}
    # AND the folder in ResNet's rule-output/ that belongs to no rule, and the wildcard over both, are for review
    review = {(f.kind, f.resource) for f in report.review}
    assert ("rule-output", "s3://ml-out/sweeps/ResNet50-Sweep-03/rule-output/notes/") in review
    assert any(k == "iam-policy" and r.endswith("sweep-rule-output-reader") for k, r in review)
    # AND the versioned bucket's older versions count in its bytes
    versioned = next(f for f in report.found if f.resource.endswith("BERT-Pretrain-Run7/rule-output/"))
    assert versioned.bytes == 900 + 901 + 902
    assert "2 older versions" in versioned.why
    # AND the rule with several targets says to remove only the Profiler one
    fanout = next(f for f in report.found if f.resource.endswith("rule/training-done-fanout"))
    assert "remove-targets --rule training-done-fanout --ids 0" in fanout.command
    roles = {f.resource.rsplit("/", 1)[-1]: f for f in report.found if f.kind == "iam-role"}
    assert all(f.profiler_only for f in roles.values())


def test_second_account_cleanup_tags_every_version_and_touches_no_decoy(account: Account) -> None:
    c = account.clients
    _stub(account.stubber)
    report = audit_account(c, since_days=30, now=NOW)
    # WHEN cleanup is applied
    result = cleanup(report, c, apply=True)
    # THEN every version of every Profiler object carries the expiry tag (lifecycle reads each version's tags;
    # before, only the current version was tagged and 2 of 3 versions stayed forever)
    for bucket, key in PROFILER_KEYS:
        versions = [v for v in c.s3.list_object_versions(Bucket=bucket, Prefix=key)["Versions"] if v["Key"] == key]
        for version in versions:
            tags = c.s3.get_object_tagging(Bucket=bucket, Key=key, VersionId=version["VersionId"])["TagSet"]
            assert TAG in tags, (bucket, key, version["VersionId"])
    assert result.tagged == 2 * 3 + 2  # 2 keys x 3 versions in the versioned bucket, 2 keys in the other
    # AND the expiry rule expires older versions too
    rules = {r["ID"]: r for r in c.s3.get_bucket_lifecycle_configuration(Bucket="ml-versioned")["Rules"]}
    assert rules["profstack-legacy-rule-output"]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1}
    # AND no Debugger output, look-alike or model is tagged
    for bucket, key in {**DEBUGGER_KEYS, **DECOY_KEYS}:
        assert c.s3.get_object_tagging(Bucket=bucket, Key=key)["TagSet"] == [], key


def _deny(client: Any, operation: str, code: str = "AccessDeniedException", status: int = 400) -> None:
    """Make one API answer with an error, as IAM (or a failing service) would."""

    class Http:
        status_code = status
        headers: dict[str, str] = {}  # noqa: RUF012 - a stand-in response
        text = ""

    def refuse(**_: Any) -> tuple[Any, dict[str, Any]]:
        return Http(), {
            "Error": {"Code": code, "Message": f"not authorized to perform {operation}"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }

    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(f"before-call.{service}.{operation}", refuse)


def test_partial_permissions_degrade_and_cleanup_skips_what_was_not_read(
    account: Account, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    c = account.clients
    # GIVEN an auditor without events:ListRules and iam:ListPolicies, and a SageMaker ListApps that fails (500)
    _deny(c.events, "ListRules")
    _deny(c.iam, "ListPolicies", code="AccessDenied", status=403)
    account.stubber.add_response(
        "list_training_jobs",
        {"TrainingJobSummaries": []},
        {"CreationTimeAfter": ANY, "SortBy": "CreationTime", "SortOrder": "Descending"},
    )
    account.stubber.add_client_error("list_apps", service_error_code="InternalFailure", http_status_code=500)
    report = audit_account(c, since_days=30, now=NOW)
    # THEN each is one line naming the missing permission (or the failure), and every other section was read
    lines = report.incomplete
    assert (
        "eventbridge rules: missing permission events:ListRules (AccessDeniedException); this section is incomplete"
        in lines
    )
    assert "iam: missing permission iam:ListPolicies (AccessDenied); this section is incomplete" in lines
    assert any(line.startswith("sagemaker apps: ListApps answered InternalFailure (HTTP 500)") for line in lines)
    assert len(lines) == 3
    assert report.failed_sections == {"eventbridge rules", "iam", "sagemaker apps"}
    # AND the sections it could read were read: the function that reads the Profiler API is still found
    assert any(f.kind == "lambda" and f.resource.endswith(":report-archiver") for f in report.found)
    # AND cleanup acts on no section that was read incompletely
    result = cleanup(report, c, apply=True)
    assert result.skipped == ["sagemaker apps"]
    assert result.apps == []


def test_cli_names_the_missing_permission_in_one_line(
    account: Account, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    c = account.clients
    cli_clients(c, monkeypatch)
    _deny(c.events, "ListRules")
    _stub(account.stubber, pipelines=True)
    # WHEN the audit runs without events:ListRules THEN it still prints the report, with one warning line
    assert main(["legacy", "audit", "--days", "30"]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("warning: incomplete")]
    assert warnings == [
        "warning: incomplete: eventbridge rules: missing permission events:ListRules (AccessDeniedException); "
        "this section is incomplete"
    ]
    assert "<?xml" not in out
    assert "Debugger (kept; closed to new customers on 2026-07-30)" in out
    assert "s3://ml-versioned/training/BERT-Pretrain-Run7/rule-output/" in out
