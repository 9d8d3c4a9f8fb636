"""Legacy audit and cleanup at the account boundary: another account's bucket, and more jobs than
--max-jobs. botocore's Stubber validates every request and response against the service models; an
S3 call the test did not expect fails the test, so "cleanup made no call" is checked, not assumed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from profstack.layout import LEGACY_RULE_OUTPUT_TAG
from profstack.migrate.legacy_profiler import AccountClients, audit_account, cleanup
from tests.training_jobs import ACCOUNT, REGION, describe_training_job

NOW = datetime(2026, 11, 29, tzinfo=UTC)
LIST_PARAMS = {"CreationTimeAfter": ANY, "SortBy": ANY, "SortOrder": ANY}


def _job(name: str, output: str) -> dict[str, Any]:
    return describe_training_job(name, output=output, created=NOW, profiler={"S3OutputPath": output})


def _list(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "TrainingJobSummaries": [
            {
                "TrainingJobName": j["TrainingJobName"],
                "TrainingJobArn": j["TrainingJobArn"],
                "CreationTime": NOW,
                "TrainingJobStatus": "Completed",
            }
            for j in jobs
        ]
    }


@pytest.fixture
def stubbed(aws_credentials: None) -> Iterator[tuple[AccountClients, Stubber, Stubber]]:
    sm = boto3.client("sagemaker", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    with Stubber(sm) as sm_stub, Stubber(s3) as s3_stub:
        yield AccountClients(sagemaker=sm, s3=s3, account_id=ACCOUNT), sm_stub, s3_stub


def _listing(stub: Stubber, bucket: str, prefix: str, keys: list[str]) -> None:
    stub.add_response(
        "list_objects_v2",
        {"Contents": [{"Key": k, "Size": 10} for k in keys], "KeyCount": len(keys), "IsTruncated": False},
        {"Bucket": bucket, "Prefix": prefix, "ExpectedBucketOwner": ACCOUNT},
    )


def _unversioned(stub: Stubber, bucket: str) -> None:
    """The audit asks once per bucket whether it keeps older versions (they are billed and must expire too)."""
    stub.add_response("get_bucket_versioning", {}, {"Bucket": bucket, "ExpectedBucketOwner": ACCOUNT})


def test_output_in_another_accounts_bucket_is_never_tagged_nor_given_a_lifecycle(
    stubbed: tuple[AccountClients, Stubber, Stubber],
) -> None:
    clients, sm_stub, s3_stub = stubbed
    # GIVEN a profiled job whose output path is a bucket of another account (S3 answers 403 when the
    # request names this account as the expected owner)
    job = _job("job-x", "s3://partner-bucket/jobs")
    sm_stub.add_response("list_training_jobs", _list([job]), LIST_PARAMS)
    sm_stub.add_response("describe_training_job", job, {"TrainingJobName": "job-x"})
    for folder in ("rule-output", "profiler-output"):
        s3_stub.add_client_error(
            "list_objects_v2",
            service_error_code="AccessDenied",
            http_status_code=403,
            expected_params={
                "Bucket": "partner-bucket",
                "Prefix": f"jobs/job-x/{folder}/",
                "ExpectedBucketOwner": ACCOUNT,
            },
        )
    sm_stub.add_response("list_apps", {"Apps": []}, {})
    # WHEN audited
    report = audit_account(clients, since_days=30, now=NOW)
    # THEN nothing in that bucket is a finding, and the report says why it is incomplete (before: no
    # owner was named, so the other account's objects were listed, tagged for expiry and its bucket
    # lifecycle rewritten)
    assert [f for f in report.found if f.kind in {"rule-output", "profiler-output"}] == []
    assert any("partner-bucket" in w and f"not account {ACCOUNT}'s bucket" in w for w in report.incomplete)
    # WHEN cleanup is applied THEN it makes no S3 call at all (Stubber: any call would be unexpected)
    result = cleanup(report, clients, apply=True)
    assert result.tagged == 0
    assert result.expiry_rules == []
    s3_stub.assert_no_pending_responses()


def test_cleanup_names_this_account_as_owner_on_every_s3_call(
    stubbed: tuple[AccountClients, Stubber, Stubber],
) -> None:
    clients, sm_stub, s3_stub = stubbed
    # GIVEN a profiled job with one rule-output object in this account's bucket
    job = _job("job-a", "s3://own-bucket/jobs")
    sm_stub.add_response("list_training_jobs", _list([job]), LIST_PARAMS)
    sm_stub.add_response("describe_training_job", job, {"TrainingJobName": "job-a"})
    key = "jobs/job-a/rule-output/ProfilerReport/profiler-report.html"
    _listing(s3_stub, "own-bucket", "jobs/job-a/rule-output/", [key])
    _unversioned(s3_stub, "own-bucket")
    _listing(s3_stub, "own-bucket", "jobs/job-a/profiler-output/", [])
    sm_stub.add_response("list_apps", {"Apps": []}, {})
    report = audit_account(clients, since_days=30, now=NOW)
    # WHEN cleanup is applied THEN the lifecycle rule comes first, then listing and tagging, and every call carries
    # ExpectedBucketOwner (Stubber compares the exact parameters and the order: a call without it fails the test)
    owner = {"ExpectedBucketOwner": ACCOUNT}
    s3_stub.add_client_error(
        "get_bucket_lifecycle_configuration",
        service_error_code="NoSuchLifecycleConfiguration",
        http_status_code=404,
        expected_params={"Bucket": "own-bucket", **owner},
    )
    s3_stub.add_response(
        "put_bucket_lifecycle_configuration",
        {},
        {"Bucket": "own-bucket", "LifecycleConfiguration": {"Rules": ANY}, **owner},
    )
    _listing(s3_stub, "own-bucket", "jobs/job-a/rule-output/", [key])
    s3_stub.add_response("get_object_tagging", {"TagSet": []}, {"Bucket": "own-bucket", "Key": key, **owner})
    tag = {"Key": LEGACY_RULE_OUTPUT_TAG[0], "Value": LEGACY_RULE_OUTPUT_TAG[1]}
    s3_stub.add_response(
        "put_object_tagging", {}, {"Bucket": "own-bucket", "Key": key, "Tagging": {"TagSet": [tag]}, **owner}
    )
    result = cleanup(report, clients, apply=True)
    s3_stub.assert_no_pending_responses()
    assert result.tagged == 1
    assert result.expiry_rules == ["own-bucket"]


def test_more_jobs_than_max_jobs_marks_the_audit_incomplete(
    stubbed: tuple[AccountClients, Stubber, Stubber],
) -> None:
    clients, sm_stub, _ = stubbed
    # GIVEN three training jobs and --max-jobs 2 (none profiled: only the count matters)
    jobs = [_job(f"job-{i}", "s3://own-bucket/jobs") for i in range(3)]
    for job in jobs:
        del job["ProfilerConfig"]
    sm_stub.add_response("list_training_jobs", _list(jobs), LIST_PARAMS)
    for job in jobs[:2]:
        sm_stub.add_response("describe_training_job", job, {"TrainingJobName": job["TrainingJobName"]})
    sm_stub.add_response("list_apps", {"Apps": []}, {})
    # WHEN audited
    report = audit_account(clients, since_days=30, now=NOW, max_jobs=2)
    # THEN two were read and the report says it stopped (before: it stopped silently, a confident
    # "no job uses the Profiler" about an account it had not finished reading)
    sm_stub.assert_no_pending_responses()
    assert report.scanned == 2
    assert any("more than 2 training jobs" in w for w in report.incomplete), report.incomplete


def test_exactly_max_jobs_is_complete(stubbed: tuple[AccountClients, Stubber, Stubber]) -> None:
    clients, sm_stub, _ = stubbed
    jobs = [_job(f"job-{i}", "s3://own-bucket/jobs") for i in range(2)]
    for job in jobs:
        del job["ProfilerConfig"]
    sm_stub.add_response("list_training_jobs", _list(jobs), LIST_PARAMS)
    for job in jobs:
        sm_stub.add_response("describe_training_job", job, {"TrainingJobName": job["TrainingJobName"]})
    sm_stub.add_response("list_apps", {"Apps": []}, {})
    report = audit_account(clients, since_days=30, now=NOW, max_jobs=2)
    assert report.scanned == 2
    assert report.incomplete == []


def test_expiry_rule_frees_the_versions_a_versioned_bucket_keeps(aws_credentials: None) -> None:
    from moto import mock_aws

    from profstack.migrate.legacy_profiler import EXPIRY_RULE_ID, apply_expiry_rule, current_lifecycle_rules

    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        # GIVEN a versioned bucket (Expiration there only adds a delete marker; the version stays)
        s3.create_bucket(Bucket="versioned-out")
        s3.put_bucket_versioning(Bucket="versioned-out", VersioningConfiguration={"Status": "Enabled"})
        # WHEN the expiry rule is applied
        apply_expiry_rule(s3, "versioned-out", days=30, apply=True, expected_owner=ACCOUNT)
        rule = {r["ID"]: r for r in current_lifecycle_rules(s3, "versioned-out", expected_owner=ACCOUNT)}[
            EXPIRY_RULE_ID
        ]
        # THEN the tagged versions left behind the marker expire too, by the same tag (before: no
        # NoncurrentVersionExpiration, so the legacy bytes and their cost stayed forever)
        assert rule["Expiration"] == {"Days": 30}
        assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == 1
        assert rule["Filter"] == {"Tag": {"Key": LEGACY_RULE_OUTPUT_TAG[0], "Value": LEGACY_RULE_OUTPUT_TAG[1]}}
        # AND applying it again changes nothing
        assert apply_expiry_rule(s3, "versioned-out", days=30, apply=True, expected_owner=ACCOUNT)[1] is False


def test_expiry_rule_keeps_the_buckets_transition_minimum_size(aws_credentials: None) -> None:
    from profstack.migrate.legacy_profiler import apply_expiry_rule

    s3 = boto3.client("s3", region_name=REGION)
    own = {
        "ID": "archive",
        "Status": "Enabled",
        "Filter": {"Prefix": "a/"},
        "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}],
    }
    with Stubber(s3) as stub:
        # GIVEN a bucket whose lifecycle lets small objects transition (varies_by_storage_class)
        stub.add_response(
            "get_bucket_lifecycle_configuration",
            {"Rules": [own], "TransitionDefaultMinimumObjectSize": "varies_by_storage_class"},
            {"Bucket": "own-bucket", "ExpectedBucketOwner": ACCOUNT},
        )
        # WHEN the expiry rule is merged in THEN the put writes that setting back with both rules
        # (before: it was omitted, and S3 reset it to all_storage_classes_128K, silently changing
        # how the bucket's own Glacier rule treats small objects)
        stub.add_response(
            "put_bucket_lifecycle_configuration",
            {},
            {
                "Bucket": "own-bucket",
                "LifecycleConfiguration": {"Rules": ANY},
                "ExpectedBucketOwner": ACCOUNT,
                "TransitionDefaultMinimumObjectSize": "varies_by_storage_class",
            },
        )
        rules, changed = apply_expiry_rule(s3, "own-bucket", days=30, apply=True, expected_owner=ACCOUNT)
        stub.assert_no_pending_responses()
    assert changed
    assert rules[0] == own


def test_cleanup_tags_exactly_the_jobs_keys_and_no_look_alike(aws_credentials: None) -> None:
    from moto import mock_aws

    from profstack.migrate.legacy_profiler import audit

    # GIVEN job-a's legacy output with keys holding unicode, spaces and `..`, and look-alikes beside
    # it that are not job-a's Profiler output (a guard: the prefixes are exact, this passed before)
    legacy = [
        "jobs/job-a/rule-output/ProfilerReport/profiler-report.html",
        "jobs/job-a/rule-output/ProfilerReport/ümlaut report.html",
        "jobs/job-a/rule-output/../escape.json",  # a literal key under the prefix: S3 does not resolve `..`
        "jobs/job-a/profiler-output/framework/trace 1.json",
    ]
    look_alikes = [
        "jobs/job-a/rule-output-backup/keep.json",
        "jobs/job-a/profiler-output-other-tool/keep.json",
        "jobs/job-a/rule-output",  # an object named like the folder, not inside it
        "jobs/job-a-2/rule-output/keep.json",  # another job (not profiled) whose name starts the same
        "jobs/escape.json",
        "datasets/jobs/job-a/rule-output/keep.json",
    ]
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="own-bucket")
        for key in legacy + look_alikes:
            s3.put_object(Bucket="own-bucket", Key=key, Body=b"x")
        sm = boto3.client("sagemaker", region_name=REGION)
        with Stubber(sm) as sm_stub:
            job = _job("job-a", "s3://own-bucket/jobs")
            sm_stub.add_response("list_training_jobs", _list([job]), LIST_PARAMS)
            sm_stub.add_response("describe_training_job", job, {"TrainingJobName": "job-a"})
            report = audit(sm, s3, since_days=30, now=NOW, expected_owner=ACCOUNT)
        clients = AccountClients(sagemaker=sm, s3=s3, account_id=ACCOUNT)
        # WHEN a dry run lists what it would tag THEN exactly job-a's objects, each once
        listed: list[str] = []
        cleanup(report, clients, apply=False, on_object=lambda uri, size: listed.append(uri))
        assert sorted(listed) == sorted(f"s3://own-bucket/{k}" for k in legacy)
        # WHEN applied THEN those carry the tag and no look-alike does
        assert cleanup(report, clients, apply=True).tagged == len(legacy)
        tag = {"Key": LEGACY_RULE_OUTPUT_TAG[0], "Value": LEGACY_RULE_OUTPUT_TAG[1]}
        for key in legacy:
            assert tag in s3.get_object_tagging(Bucket="own-bucket", Key=key)["TagSet"], key
        for key in look_alikes:
            assert s3.get_object_tagging(Bucket="own-bucket", Key=key)["TagSet"] == [], key


def test_cleanup_follows_the_listing_past_its_first_page(stubbed: tuple[AccountClients, Stubber, Stubber]) -> None:
    clients, sm_stub, s3_stub = stubbed
    # GIVEN a prefix whose listing comes in two pages (S3 returns 1,000 keys a page)
    job = _job("job-a", "s3://own-bucket/jobs")
    sm_stub.add_response("list_training_jobs", _list([job]), LIST_PARAMS)
    sm_stub.add_response("describe_training_job", job, {"TrainingJobName": "job-a"})
    sm_stub.add_response("list_apps", {"Apps": []}, {})
    prefix = "jobs/job-a/rule-output/"
    first = [f"{prefix}a-{i:04d}" for i in range(1000)]
    second = [f"{prefix}b-{i}" for i in range(3)]

    def pages() -> None:
        base = {"Bucket": "own-bucket", "Prefix": prefix, "ExpectedBucketOwner": ACCOUNT}
        s3_stub.add_response(
            "list_objects_v2",
            {"Contents": [{"Key": k, "Size": 1} for k in first], "IsTruncated": True, "NextContinuationToken": "t1"},
            base,
        )
        s3_stub.add_response(
            "list_objects_v2",
            {"Contents": [{"Key": k, "Size": 1} for k in second], "IsTruncated": False},
            {**base, "ContinuationToken": "t1"},
        )

    pages()
    _unversioned(s3_stub, "own-bucket")
    _listing(s3_stub, "own-bucket", "jobs/job-a/profiler-output/", [])
    report = audit_account(clients, since_days=30, now=NOW)
    # WHEN a dry run counts what it would tag THEN both pages, 1,003 objects, are there
    assert sum(f.bytes or 0 for f in report.found) == 1003
    s3_stub.add_client_error(
        "get_bucket_lifecycle_configuration",
        service_error_code="NoSuchLifecycleConfiguration",
        http_status_code=404,
        expected_params={"Bucket": "own-bucket", "ExpectedBucketOwner": ACCOUNT},
    )
    pages()
    listed: list[str] = []
    result = cleanup(report, clients, apply=False, on_object=lambda uri, size: listed.append(uri))
    s3_stub.assert_no_pending_responses()
    assert result.tagged == 1003
    assert len(set(listed)) == 1003


def test_tag_rule_output_refuses_another_accounts_bucket(
    stubbed: tuple[AccountClients, Stubber, Stubber],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import profstack.cli.legacy as legacy_cli
    from profstack.cli import main

    clients, sm_stub, s3_stub = stubbed
    # GIVEN `legacy tag-rule-output --bucket partner-bucket`, a bucket of another account that holds
    # a profiled job's output (S3 answers 403 when this account is named as the owner)
    job = _job("job-x", "s3://partner-bucket/jobs")
    sm_stub.add_response("list_training_jobs", _list([job]), LIST_PARAMS)
    sm_stub.add_response("describe_training_job", job, {"TrainingJobName": "job-x"})
    sts = boto3.client("sts", region_name=REGION)
    services = {"sagemaker": clients.sagemaker, "s3": clients.s3, "sts": sts}
    monkeypatch.setattr(legacy_cli, "make_client", lambda service, region: services[service])
    s3_stub.add_client_error(
        "list_objects_v2",
        service_error_code="AccessDenied",
        http_status_code=403,
        expected_params={
            "Bucket": "partner-bucket",
            "Prefix": "jobs/job-x/rule-output/",
            "ExpectedBucketOwner": ACCOUNT,
        },
    )
    with Stubber(sts) as sts_stub:
        sts_stub.add_response(
            "get_caller_identity", {"Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/a", "UserId": "A"}
        )
        # WHEN applied THEN one line, exit 2, and no tagging call was made (before: the listing named no
        # owner, and the other account's objects were tagged for expiry)
        assert main(["legacy", "tag-rule-output", "--bucket", "partner-bucket", "--apply"]) == 2
    assert "AccessDenied" in capsys.readouterr().err
    s3_stub.assert_no_pending_responses()


@pytest.mark.parametrize("status", ["InProgress", "Stopping"])
def test_a_running_jobs_legacy_output_is_listed_for_review_never_tagged(aws_credentials: None, status: str) -> None:
    from moto import mock_aws

    from profstack.migrate.legacy_profiler import audit

    # GIVEN a profiled job that is still running, with rule output its Debugger rules are still writing, and a
    # finished job beside it
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="own-bucket")
        for job_name in ("job-running", "job-done"):
            s3.put_object(Bucket="own-bucket", Key=f"jobs/{job_name}/rule-output/ProfilerReport/r.json", Body=b"x")
        sm = boto3.client("sagemaker", region_name=REGION)
        running = _job("job-running", "s3://own-bucket/jobs") | {"TrainingJobStatus": status}
        done = _job("job-done", "s3://own-bucket/jobs")
        with Stubber(sm) as sm_stub:
            sm_stub.add_response("list_training_jobs", _list([running, done]), LIST_PARAMS)
            sm_stub.add_response("describe_training_job", running, {"TrainingJobName": "job-running"})
            sm_stub.add_response("describe_training_job", done, {"TrainingJobName": "job-done"})
            report = audit(sm, s3, since_days=30, now=NOW, expected_owner=ACCOUNT)
        # WHEN cleanup is applied
        result = cleanup(report, AccountClients(sagemaker=sm, s3=s3, account_id=ACCOUNT), apply=True)
        tagged = {
            job_name: s3.get_object_tagging(
                Bucket="own-bucket", Key=f"jobs/{job_name}/rule-output/ProfilerReport/r.json"
            )["TagSet"]
            for job_name in ("job-running", "job-done")
        }
    # THEN only the finished job's output carries the expiry tag; the running job's is left for review, saying why
    assert tagged["job-running"] == []
    assert tagged["job-done"] == [{"Key": LEGACY_RULE_OUTPUT_TAG[0], "Value": LEGACY_RULE_OUTPUT_TAG[1]}]
    assert result.tagged == 1
    (review,) = [f for f in result.left_alone if "job-running" in f.resource]
    assert f"the job is {status}" in review.why
    assert review.verified is False
