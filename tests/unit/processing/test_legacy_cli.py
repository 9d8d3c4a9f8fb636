"""`profstack legacy tag-rule-output`: verified job prefixes only (SageMaker by Stubber), object-by-object
tagging (moto), dry run by default, and the Batch Operations job (Stubber)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from profstack.cli import legacy as legacy_cli
from profstack.cli import main
from profstack.layout import LEGACY_RULE_OUTPUT_TAG
from profstack.migrate.rule_output import is_rule_output_key, manifest_csv
from tests.training_jobs import describe_training_job

BUCKET = "ml-output"
RULE_KEYS = [
    "output/job-a/rule-output/ProfilerReport-1700000000/profiler-output/profiler-report.html",
    "output/job-a/rule-output/ProfilerReport-1700000000/profiler-output/profiler-reports/Dataloader.json",
    "team/x/job-b/rule-output/LowGPUUtilization/report.json",
]
PROFILER_OUTPUT_KEY = "output/job-a/profiler-output/system/x.json"
OTHER_KEYS = [
    "output/job-a/debug-output/events.json",
    "output/job-a/output/model.tar.gz",
    "rule-output/top-level.json",
    "datasets/rule-output/labels.csv",  # a rule-output folder that belongs to no job: never tagged
    "output/job-z/rule-output/x.json",  # a job that never used the Profiler
    PROFILER_OUTPUT_KEY,  # tagged only with --with-profiler-output
]
JOB_PREFIXES = ["output/job-a/rule-output/", "team/x/job-b/rule-output/"]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (RULE_KEYS[0], True),
        (RULE_KEYS[2], True),
        ("output/job-a/profiler-output/system/x.json", False),
        ("rule-output/top-level.json", False),
        ("datasets/rule-output/labels.csv", False),  # the segment alone proves nothing
        ("output/job-z/rule-output/x.json", False),  # not a verified job
        ("output/job-a/rule-output/", False),  # the folder marker itself is not a file under it
        ("output/job-a/rule-outputs/x.json", False),
    ],
)
def test_rule_output_keys_are_recognised(key: str, expected: bool) -> None:
    assert is_rule_output_key(key, JOB_PREFIXES) is expected


def test_manifest_is_bucket_key_csv_with_url_encoded_keys() -> None:
    data, rows = manifest_csv("b", ["a/rule-output/x y.json", "a/rule-output/ü,1.json"])
    assert rows == 2
    assert data.decode().splitlines() == ["b,a/rule-output/x%20y.json", "b,a/rule-output/%C3%BC%2C1.json"]


def _describe(name: str, root: str, *, profiled: bool) -> dict[str, Any]:
    return describe_training_job(
        name,
        output=root,
        created=datetime(2026, 11, 1, tzinfo=UTC),
        instance_type="ml.g5.xlarge",
        profiler={"S3OutputPath": root} if profiled else None,
    )


JOBS = [
    _describe("job-a", f"s3://{BUCKET}/output", profiled=True),
    _describe("job-b", f"s3://{BUCKET}/team/x", profiled=True),
    _describe("job-z", f"s3://{BUCKET}/output", profiled=False),
]


class _Clients:
    """make_client for the CLI: moto S3, a Stubber'd SageMaker answering one listing per call."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3
        self.sagemaker = boto3.client("sagemaker", region_name="us-east-1")
        self.stubber = Stubber(self.sagemaker)
        self.stubber.activate()
        # STS (moto) tells the CLI its account, the expected owner of the bucket
        self.extra: dict[str, Any] = {"sts": boto3.client("sts", region_name="us-east-1")}

    def __call__(self, service: str, region: str | None) -> Any:
        if service == "sagemaker":
            self.stubber.add_response(
                "list_training_jobs",
                {
                    "TrainingJobSummaries": [
                        {
                            "TrainingJobName": j["TrainingJobName"],
                            "TrainingJobArn": j["TrainingJobArn"],
                            "CreationTime": j["CreationTime"],
                            "TrainingJobStatus": "Completed",
                        }
                        for j in JOBS
                    ]
                },
                {"CreationTimeAfter": ANY, "SortBy": "CreationTime", "SortOrder": "Descending"},
            )
            for job in JOBS:
                self.stubber.add_response("describe_training_job", job, {"TrainingJobName": job["TrainingJobName"]})
            return self.sagemaker
        if service == "s3":
            return self.s3
        return self.extra[service]


@pytest.fixture
def s3(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        for key in RULE_KEYS + OTHER_KEYS:
            client.put_object(Bucket=BUCKET, Key=key, Body=b"{}")
        client.put_object_tagging(
            Bucket=BUCKET, Key=RULE_KEYS[0], Tagging={"TagSet": [{"Key": "owner", "Value": "ml-platform"}]}
        )
        clients = _Clients(client)
        monkeypatch.setattr(legacy_cli, "make_client", clients)
        yield client


def _tags(s3: Any, key: str) -> set[tuple[str, str]]:
    return {(t["Key"], t["Value"]) for t in s3.get_object_tagging(Bucket=BUCKET, Key=key)["TagSet"]}


def test_tags_every_rule_output_object_and_keeps_existing_tags(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a bucket with legacy rule output (one object already tagged by its owner), other output and
    # decoys: a rule-output folder of no job, and one of a job that never used the Profiler
    # WHEN the backfill runs with --apply
    code = main(["legacy", "tag-rule-output", "--bucket", BUCKET, "--apply"])
    out = capsys.readouterr()
    # THEN every rule-output object of the verified jobs carries the expiry tag, merged; nothing else
    assert code == 0
    assert _tags(s3, RULE_KEYS[0]) == {("owner", "ml-platform"), LEGACY_RULE_OUTPUT_TAG}
    assert all(LEGACY_RULE_OUTPUT_TAG in _tags(s3, k) for k in RULE_KEYS)
    assert all(not _tags(s3, k) for k in OTHER_KEYS)
    assert "tagged 3 objects" in out.out
    assert "tagging:" in out.err  # progress on stderr
    # AND the progress line ends with the real count (it said "1 ... found" when there were more)
    found_lines = [line for line in out.err.splitlines() if "legacy objects found" in line]
    assert found_lines[-1].rstrip().endswith("3 legacy objects found")
    # AND a second run changes nothing
    assert main(["legacy", "tag-rule-output", "--bucket", BUCKET, "--apply"]) == 0
    assert "tagged 0 objects" in capsys.readouterr().out


def test_dry_run_is_the_default(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN no --apply (with or without the old --dry-run) WHEN run THEN it counts, lists, and tags nothing
    for extra in ([], ["--dry-run"]):
        code = main(["legacy", "tag-rule-output", "--bucket", BUCKET, "--prefix", "team/", *extra])
        out = capsys.readouterr().out
        assert code == 0
        assert "would tag 1 legacy objects under 1 verified job prefixes" in out
        assert f"s3://{BUCKET}/team/x/job-b/rule-output/" in out
        assert all(LEGACY_RULE_OUTPUT_TAG not in _tags(s3, k) for k in RULE_KEYS)


def test_profiler_output_on_request(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["legacy", "tag-rule-output", "--bucket", BUCKET, "--with-profiler-output", "--apply"]) == 0
    assert "tagged 4 objects" in capsys.readouterr().out
    assert LEGACY_RULE_OUTPUT_TAG in _tags(s3, PROFILER_OUTPUT_KEY)
    assert not _tags(s3, "datasets/rule-output/labels.csv")


def test_object_with_ten_tags_is_reported_not_fatal(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    full = [{"Key": f"k{i}", "Value": "v"} for i in range(10)]
    s3.put_object_tagging(Bucket=BUCKET, Key=RULE_KEYS[1], Tagging={"TagSet": full})
    code = main(["legacy", "tag-rule-output", "--bucket", BUCKET, "--apply"])
    out = capsys.readouterr()
    assert code == 1
    assert "tagged 2 objects" in out.out
    assert "1 failed" in out.out
    assert "already has 10 tags" in out.err


def test_batch_mode_creates_one_s3_batch_operations_job(
    s3: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN batch mode (threshold 1) and S3 Control / STS answered by Stubber: requests are checked
    # against botocore's real service models before the stub replies
    s3control = boto3.client("s3control", region_name="us-east-1")
    sts = boto3.client("sts", region_name="us-east-1")
    control_stub, sts_stub = Stubber(s3control), Stubber(sts)
    sts_stub.add_response(
        "get_caller_identity", {"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/a", "UserId": "A"}
    )
    tag_key, tag_value = LEGACY_RULE_OUTPUT_TAG
    control_stub.add_response(
        "create_job",
        {"JobId": "0a1b2c3d-0000-4000-8000-000000000001"},
        {
            "AccountId": "123456789012",
            "ConfirmationRequired": False,
            "Operation": {"S3PutObjectTagging": {"TagSet": [{"Key": tag_key, "Value": tag_value}]}},
            "Report": {
                "Bucket": f"arn:aws:s3:::{BUCKET}",
                "Format": "Report_CSV_20180820",
                "Enabled": True,
                "Prefix": "profstack/batch-operations/reports",
                "ReportScope": "FailedTasksOnly",
            },
            "ClientRequestToken": ANY,
            "Manifest": {
                "Spec": {"Format": "S3BatchOperations_CSV_20180820", "Fields": ["Bucket", "Key"]},
                "Location": {"ObjectArn": ANY, "ETag": ANY},
            },
            "Description": ANY,
            "Priority": 10,
            "RoleArn": "arn:aws:iam::123456789012:role/batch-tagging",
            "Tags": [{"Key": "profstack:component", "Value": "legacy-tagging"}],
        },
    )
    legacy_cli.make_client.extra.update({"s3control": s3control, "sts": sts})  # type: ignore[attr-defined]
    args = ["legacy", "tag-rule-output", "--bucket", BUCKET, "--batch-threshold", "1", "--apply"]
    # WHEN it runs without the confirmations THEN it refuses with one line
    assert main(args) == 2
    assert "--role-arn" in capsys.readouterr().err
    assert main([*args, "--role-arn", "arn:aws:iam::123456789012:role/batch-tagging"]) == 2
    assert "--replace-existing-tags" in capsys.readouterr().err
    # WHEN confirmed
    with control_stub, sts_stub:
        code = main([*args, "--role-arn", "arn:aws:iam::123456789012:role/batch-tagging", "--replace-existing-tags"])
        control_stub.assert_no_pending_responses()
    out = capsys.readouterr().out
    # THEN one job was created from a manifest of exactly the rule-output keys, uploaded to the bucket
    assert code == 0
    assert "created S3 Batch Operations job 0a1b2c3d-0000-4000-8000-000000000001" in out
    manifest_key = next(
        o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="profstack/batch-operations/")["Contents"]
    )
    rows = s3.get_object(Bucket=BUCKET, Key=manifest_key)["Body"].read().decode().splitlines()
    assert sorted(rows) == sorted(f"{BUCKET},{k}" for k in RULE_KEYS)
    # AND no object was tagged by the CLI itself (the batch job does that)
    assert all(LEGACY_RULE_OUTPUT_TAG not in _tags(s3, k) for k in RULE_KEYS)


def test_aws_errors_are_one_line(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in RULE_KEYS + OTHER_KEYS]})
    s3.delete_bucket(Bucket=BUCKET)
    code = main(["legacy", "tag-rule-output", "--bucket", BUCKET])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith(f"profstack: error: listing s3://{BUCKET}/: NoSuchBucket")


def test_the_expiry_rule_is_written_before_any_tag(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.functional.aws_serving import refuse

    # GIVEN a bucket whose lifecycle cannot be written (s3:PutLifecycleConfiguration denied)
    refuse(s3, "PutBucketLifecycleConfiguration")
    # WHEN tagging is applied THEN it stops before the first tag, in one line: no object is left tagged with
    # nothing to expire it (before: the tags were written and the rule left to a separate command)
    assert main(["legacy", "tag-rule-output", "--bucket", BUCKET, "--apply"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # progress lines aside
    assert errors == [
        "profstack: error: writing the lifecycle of ml-output: AccessDenied: not authorized to perform "
        "PutBucketLifecycleConfiguration"
    ]
    assert all(LEGACY_RULE_OUTPUT_TAG not in _tags(s3, k) for k in RULE_KEYS)


def test_a_bucket_that_already_expires_the_tag_keeps_its_own_rule(s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from profstack.migrate.legacy_profiler import EXPIRY_RULE_ID

    # GIVEN the StorageStack's bucket, whose own rule already expires the tag
    own = {
        "ID": "storage-stack-legacy",
        "Status": "Enabled",
        "Filter": {"Tag": {"Key": LEGACY_RULE_OUTPUT_TAG[0], "Value": LEGACY_RULE_OUTPUT_TAG[1]}},
        "Expiration": {"Days": 14},
    }
    s3.put_bucket_lifecycle_configuration(Bucket=BUCKET, LifecycleConfiguration={"Rules": [own]})
    assert main(["legacy", "tag-rule-output", "--bucket", BUCKET, "--apply"]) == 0
    assert "added lifecycle rule" not in capsys.readouterr().out
    rules = s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]
    assert [r["ID"] for r in rules] == ["storage-stack-legacy"]
    # AND a bucket without one gets ProfStack's rule first, merged with its other rules
    s3.put_bucket_lifecycle_configuration(
        Bucket=BUCKET,
        LifecycleConfiguration={
            "Rules": [{"ID": "archive", "Status": "Enabled", "Filter": {"Prefix": "a/"}, "Expiration": {"Days": 400}}]
        },
    )
    assert main(["legacy", "tag-rule-output", "--bucket", BUCKET, "--apply", "--expire-after-days", "7"]) == 0
    assert (
        f"added lifecycle rule {EXPIRY_RULE_ID} to {BUCKET} (expire tagged objects after 7 days)"
        in capsys.readouterr().out
    )
    rules = {r["ID"]: r for r in s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]}
    assert set(rules) == {"archive", EXPIRY_RULE_ID}
    assert rules[EXPIRY_RULE_ID]["Expiration"] == {"Days": 7}
