"""Legacy Profiler audit, tag-expiry rule merge and disable-profiler: moto S3, Stubber SageMaker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from profstack.cli import main
from profstack.migrate.legacy_profiler import (
    EXPIRY_RULE_ID,
    LegacyProfilerError,
    apply_expiry_rule,
    audit,
    current_lifecycle_rules,
    disable_profiler,
    merge_expiry_rule,
)

NOW = datetime(2026, 11, 29, tzinfo=UTC)
REGION = "us-east-1"


def _job(name: str, status: str, *, profiler: dict[str, Any] | None, rules: list[str]) -> dict[str, Any]:
    """A DescribeTrainingJob response shaped by the real service model (Stubber validates it)."""
    job: dict[str, Any] = {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}",
        "ModelArtifacts": {"S3ModelArtifacts": f"s3://legacy-out/jobs/{name}/output/model.tar.gz"},
        "TrainingJobStatus": status,
        "SecondaryStatus": "Completed" if status == "Completed" else "Training",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": NOW,
        "OutputDataConfig": {"S3OutputPath": "s3://legacy-out/jobs"},
    }
    if profiler is not None:
        job["ProfilerConfig"] = profiler
    if rules:
        job["ProfilerRuleConfigurations"] = [
            {"RuleConfigurationName": r, "RuleEvaluatorImage": "rules-image"} for r in rules
        ]
        job["ProfilerRuleEvaluationStatuses"] = [
            {"RuleConfigurationName": r, "RuleEvaluationStatus": "NoIssuesFound"} for r in rules
        ]
    return job


@pytest.fixture
def s3(aws_credentials: None) -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket="legacy-out")
        for key, size in (
            ("jobs/job-a/rule-output/ProfilerReport-1/profiler-output/profiler-report.html", 1000),
            ("jobs/job-a/rule-output/ProfilerReport-1/profiler-output/profiler-reports/Dataloader.json", 200),
            ("jobs/job-a/profiler-output/system/incremental/1.json", 300),
            ("jobs/job-a/output/model.tar.gz", 5000),  # not legacy output
        ):
            client.put_object(Bucket="legacy-out", Key=key, Body=b"x" * size)
        yield client


@pytest.fixture
def sagemaker() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _stub_listing(stubber: Stubber, jobs: list[dict[str, Any]]) -> None:
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


def test_audit_finds_profiler_jobs_and_measures_their_legacy_output(s3: Any, sagemaker: Any) -> None:
    client, stubber = sagemaker
    # GIVEN a job with the Profiler and rules, one with the Profiler disabled, one with neither
    jobs = [
        _job("job-a", "Completed", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=["ProfilerReport"]),
        _job("job-b", "InProgress", profiler={"DisableProfiler": True}, rules=[]),
        _job("job-c", "InProgress", profiler=None, rules=[]),
    ]
    _stub_listing(stubber, jobs)
    # WHEN audited
    report = audit(client, s3, since_days=30, now=NOW)
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


def test_disable_profiler_touches_only_running_profiled_jobs(s3: Any, sagemaker: Any) -> None:
    client, stubber = sagemaker
    jobs = [
        _job("run-1", "InProgress", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=[]),
        _job("done-1", "Completed", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=[]),
    ]
    _stub_listing(stubber, jobs)
    report = audit(client, s3, since_days=30, now=NOW, measure_output=False)
    # WHEN a dry run THEN nothing is called, but the target is named
    assert disable_profiler(client, report.jobs, apply=False) == ["run-1"]
    # WHEN applied THEN UpdateTrainingJob turns the Profiler off for that job only
    stubber.add_response(
        "update_training_job",
        {"TrainingJobArn": jobs[0]["TrainingJobArn"]},
        {"TrainingJobName": "run-1", "ProfilerConfig": {"DisableProfiler": True}},
    )
    assert disable_profiler(client, report.jobs, apply=True) == ["run-1"]


def test_expiry_rule_merges_with_existing_rules(s3: Any) -> None:
    # GIVEN a bucket with a rule of its own
    own = {"ID": "team-archive", "Status": "Enabled", "Filter": {"Prefix": "archive/"}, "Expiration": {"Days": 400}}
    s3.put_bucket_lifecycle_configuration(Bucket="legacy-out", LifecycleConfiguration={"Rules": [own]})
    # WHEN a dry run THEN nothing is written
    _, changed = apply_expiry_rule(s3, "legacy-out", days=30, apply=False)
    assert changed
    assert [r["ID"] for r in current_lifecycle_rules(s3, "legacy-out")] == ["team-archive"]
    # WHEN applied THEN both rules are there, ours expiring by tag
    apply_expiry_rule(s3, "legacy-out", days=30, apply=True)
    rules = {r["ID"]: r for r in current_lifecycle_rules(s3, "legacy-out")}
    assert set(rules) == {"team-archive", EXPIRY_RULE_ID}
    assert rules["team-archive"]["Expiration"] == {"Days": 400}
    assert rules[EXPIRY_RULE_ID]["Filter"] == {"Tag": {"Key": "profstack:class", "Value": "legacy-rule-output"}}
    assert rules[EXPIRY_RULE_ID]["Expiration"] == {"Days": 30}
    # WHEN applied again THEN nothing changes; WHEN the days change THEN our rule is updated, not duplicated
    assert apply_expiry_rule(s3, "legacy-out", days=30, apply=True)[1] is False
    apply_expiry_rule(s3, "legacy-out", days=60, apply=True)
    rules_after = current_lifecycle_rules(s3, "legacy-out")
    assert [r["ID"] for r in rules_after].count(EXPIRY_RULE_ID) == 1
    assert {r["ID"]: r for r in rules_after}[EXPIRY_RULE_ID]["Expiration"] == {"Days": 60}


def test_expiry_rule_on_a_bucket_without_lifecycle(s3: Any) -> None:
    assert current_lifecycle_rules(s3, "legacy-out") == []
    apply_expiry_rule(s3, "legacy-out", days=7, apply=True)
    assert [r["ID"] for r in current_lifecycle_rules(s3, "legacy-out")] == [EXPIRY_RULE_ID]


def test_merge_refuses_bad_days_and_full_buckets() -> None:
    with pytest.raises(LegacyProfilerError, match="positive"):
        merge_expiry_rule([], days=0)
    full = [{"ID": f"r{i}", "Status": "Enabled", "Filter": {"Prefix": f"{i}/"}} for i in range(1000)]
    with pytest.raises(LegacyProfilerError, match="limit is 1000"):
        merge_expiry_rule(full, days=30)


def test_cli_expire_rule_output_dry_run_and_apply(
    s3: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import profstack.cli._aws as aws

    monkeypatch.setattr(aws, "make_client", lambda service, region: s3)
    assert main(["legacy", "expire-rule-output", "--bucket", "legacy-out", "--days", "14"]) == 0
    assert "dry run" in capsys.readouterr().out
    assert current_lifecycle_rules(s3, "legacy-out") == []
    assert main(["legacy", "expire-rule-output", "--bucket", "legacy-out", "--days", "14", "--apply"]) == 0
    assert "set (expire after 14 days); 0 existing rule(s) kept" in capsys.readouterr().out
    assert main(["legacy", "expire-rule-output", "--bucket", "legacy-out", "--days", "-1"]) == 2
    assert capsys.readouterr().err.strip() == "profstack: error: --days must be a positive number, got -1"


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


def test_cli_audit_prints_jobs_and_next_steps(
    s3: Any, sagemaker: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import profstack.cli._aws as aws

    client, stubber = sagemaker
    _stub_listing(
        stubber,
        [_job("job-a", "InProgress", profiler={"S3OutputPath": "s3://legacy-out/jobs"}, rules=["ProfilerReport"])],
    )
    monkeypatch.setattr(aws, "make_client", lambda service, region: {"sagemaker": client, "s3": s3}[service])
    # WHEN the audit runs THEN the job, its size and the commands to run next are printed
    assert main(["legacy", "audit", "--days", "30"]) == 0
    out = capsys.readouterr().out
    assert "Scanned 1 training jobs" in out
    assert "job-a" in out
    assert "1.5 KiB" in out
    assert "profstack legacy disable-profiler --apply" in out
    assert "profstack legacy expire-rule-output --bucket legacy-out --apply" in out
