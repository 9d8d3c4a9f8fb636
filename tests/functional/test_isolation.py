"""Issue 11, processor side: attacks by one user on another's traces and reports, through moto.

Every test here is an attack found by the audit (or a variant of one): it failed before the fix (see the
commit message) and must keep failing to succeed. Owners are alice and bob, both configured users.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from demo.lambda_harness import ACCOUNT, REGION, LambdaContext, patched_environ, sqs_event, sqs_record
from profstack import layout
from tests.functional.processing_support import (
    TRACE_BUCKET,
    DataPlane,
    create_data_plane,
    emulate_run,
    job_event,
    processor_environ,
    user_role_arn,
)
from tests.functional.test_trace_processor import RANK0, RANK1, _CurrentStdout, log_lines, structured
from tests.infra.iam_eval import Request, is_allowed

READER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/profstack-trace-reader"
TRACE_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/00000000-0000-0000-0000-000000000000"
BOB_KERNEL_MARKER = "bob-only"


@pytest.fixture
def plane(aws_credentials: None, capsys: pytest.CaptureFixture[str]) -> Iterator[DataPlane]:
    import logging

    with mock_aws():
        data_plane = create_data_plane()
        environ = processor_environ(
            data_plane.topic_arn, READER_ROLE_ARN=READER_ROLE, TRACE_KEY_ARN=TRACE_KEY, USERS='["alice", "bob"]'
        )
        with patched_environ(environ):
            from lambdas.trace_processor import handler, runtime

            for log_handler in logging.getLogger(handler.logger.service).handlers:
                if isinstance(log_handler, logging.StreamHandler):
                    log_handler.stream = _CurrentStdout()
            runtime.reset()
            yield data_plane
            runtime.reset()


RUN_START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
RUN_END = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _register(
    plane: DataPlane,
    job: str,
    *,
    tag: str | None,
    tensorboard: str | None,
    status: str = "Completed",
    runs_as: str | None = "",
    tags: dict[str, str] | None = None,
) -> None:
    """A moto training job; `status` is what DescribeTrainingJob reports (moto creates jobs Completed). It runs as
    `runs_as`'s ProfStack execution role (default: the tagged user's), or with None as a shared training role."""
    kwargs: dict[str, Any] = {}
    who = tag if runs_as == "" else runs_as
    role = user_role_arn(who) if who else f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole"
    extra = [{"Key": k, "Value": v} for k, v in (tags or {}).items()]
    if tensorboard is not None:
        kwargs["TensorBoardOutputConfig"] = {"S3OutputPath": tensorboard}
    plane.sagemaker.create_training_job(
        TrainingJobName=job,
        AlgorithmSpecification={"TrainingImage": "pytorch-training:2.5-gpu-py311", "TrainingInputMode": "File"},
        RoleArn=role,
        OutputDataConfig={"S3OutputPath": f"s3://{TRACE_BUCKET}/output"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 100},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        Tags=([{"Key": "profstack:user", "Value": tag}] if tag is not None else []) + extra,
        **kwargs,
    )
    if status != "Completed":
        emulate_run(job, start=RUN_START, end=RUN_END, status=status)


def _plant_bob(plane: DataPlane, traces_dir: Path, *prefixes: str) -> None:
    """bob's traces (rank 0 and 1 of a real job) under each of these prefixes."""
    for prefix in prefixes:
        for i, rel in enumerate((RANK0, RANK1)):
            key = f"{prefix}{BOB_KERNEL_MARKER}-rank{i}.pt.trace.json.gz"
            plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)


def _handle(event: dict[str, Any]) -> dict[str, Any]:
    from lambdas.trace_processor import handler

    record = sqs_record(event)
    response = handler.handler(sqs_event(record), LambdaContext())
    return {"failed": [f["itemIdentifier"] for f in response["batchItemFailures"]], "record": record}


def _summary(plane: DataPlane, user: str, job: str) -> dict[str, Any]:
    key = f"{layout.job_reports_prefix(user, job)}summary.json"
    doc: dict[str, Any] = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=key)["Body"].read())
    return doc


def _written_by_processor(plane: DataPlane) -> list[str]:
    """Every key the processor may have written: reports and TensorBoard scalars."""
    return [k for k in plane.list_keys() if k.startswith(layout.REPORTS_PREFIX) or "/profstack/" in k]


# --- who owns the job -------------------------------------------------------------------------------


def test_a_tag_naming_an_unknown_user_is_rejected(plane: DataPlane, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a job tagged with a user ProfStack does not know
    _register(plane, "who-job", tag="mallory", tensorboard=None)
    # WHEN its event is processed
    result = _handle(job_event("who-job", user="mallory"))
    # THEN the record fails with reason not_owned and nothing is written anywhere
    assert result["failed"] == [result["record"]["messageId"]]
    assert any(d.get("reason") == "not_owned" for d in structured(log_lines(capsys)))
    assert _written_by_processor(plane) == []


def test_a_message_claiming_another_owner_than_the_job_is_rejected(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN alice's job, and a message (e.g. from another EventBridge rule's input transformer) saying bob
    _register(plane, "alice-job", tag="alice", tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/alice/")
    plane.s3.upload_file(
        str(traces_dir / RANK0),
        TRACE_BUCKET,
        f"{layout.job_tensorboard_prefix('alice', 'alice-job')}r0.pt.trace.json.gz",
    )
    # WHEN processed
    result = _handle(job_event("alice-job", user="bob"))
    # THEN it is rejected (not_owned) and no report lands in bob's space, or anywhere
    assert result["failed"] == [result["record"]["messageId"]]
    assert any(d.get("reason") == "not_owned" for d in structured(log_lines(capsys)))
    assert _written_by_processor(plane) == []


def test_the_owner_comes_from_sagemaker_when_the_message_has_no_tags(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN alice's job and a message without Tags
    _register(plane, "quiet-job", tag="alice", tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/alice/")
    plane.s3.upload_file(
        str(traces_dir / RANK0),
        TRACE_BUCKET,
        f"{layout.job_tensorboard_prefix('alice', 'quiet-job')}r0.pt.trace.json.gz",
    )
    event = job_event("quiet-job")
    event["detail"].pop("Tags")
    # WHEN processed THEN the report is alice's (the job's ListTags), not _unowned
    assert _handle(event)["failed"] == []
    assert _summary(plane, "alice", "quiet-job")["ranks"]
    assert not [k for k in plane.list_keys(layout.REPORTS_PREFIX) if not k.startswith("reports/alice/")]


def test_a_job_of_alices_role_tagged_bob_is_rejected(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a job that runs as alice's ProfStack execution role but carries the tag profstack:user=bob
    _register(plane, "tagged-bob", tag="bob", runs_as="alice", tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/bob/")
    plane.s3.upload_file(
        str(traces_dir / RANK0),
        TRACE_BUCKET,
        f"{layout.job_tensorboard_prefix('bob', 'tagged-bob')}r0.pt.trace.json.gz",
    )
    # WHEN processed THEN it is rejected (not_owned), and nothing lands in bob's (or anyone's) reports
    # (before: the tag alone made it bob's, with a planted report and a row in bob's baseline)
    result = _handle(job_event("tagged-bob", user="bob"))
    assert result["failed"] == [result["record"]["messageId"]]
    assert any(d.get("reason") == "not_owned" for d in structured(log_lines(capsys)))
    assert _written_by_processor(plane) == []


@pytest.mark.parametrize("traces", [True, False])
def test_a_tag_nothing_confirms_is_filed_for_an_administrator_not_for_the_claimed_user(
    plane: DataPlane, traces_dir: Path, traces: bool
) -> None:
    # GIVEN a job tagged bob that runs as a shared training role, in the default deployment (guard off), with
    # or without traces in bob's space
    _register(plane, "claims-bob", tag="bob", runs_as=None, tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/bob/")
    if traces:
        key = f"{layout.job_tensorboard_prefix('bob', 'claims-bob')}r0.pt.trace.json.gz"
        plane.s3.upload_file(str(traces_dir / RANK0), TRACE_BUCKET, key)
    # WHEN processed
    assert _handle(job_event("claims-bob", user="bob"))["failed"] == []
    # THEN nothing is filed under bob (no report, no "no traces" report, no history row), the report is
    # _unowned's, and it says why (before: reports/bob/claims-bob/ and a row in bob's baseline)
    assert not [k for k in plane.list_keys() if "/bob/" in k and "claims-bob" in k and "tensorboard/" not in k]
    assert not [k for k in plane.list_keys(layout.HISTORY_PREFIX) if "user=bob" in k]
    summary = _summary(plane, layout.UNOWNED_USER, "claims-bob")
    assert any(w.get("type") == "UnverifiedOwnerError" for w in summary["warnings"])
    # AND bob's folder was not read for it (the _unowned space is not bob's)
    assert not summary.get("ranks")


def test_with_the_guard_on_a_directly_created_jobs_tag_is_trusted_but_not_a_pipelines(
    plane: DataPlane, traces_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lambdas.trace_processor import runtime

    # GIVEN the owner-tag guard (processing.owner_tag_guard.enabled), a job tagged bob created directly with a
    # shared role, and one created by SageMaker Pipelines (which the guard cannot see)
    monkeypatch.setenv("OWNER_TAG_GUARD", "true")
    runtime.reset()
    _register(plane, "direct-bob", tag="bob", runs_as=None, tensorboard=None)
    pipeline = {"sagemaker:pipeline-execution-arn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:pipeline/p/execution/1"}
    _register(plane, "pipe-bob", tag="bob", runs_as=None, tensorboard=None, tags=pipeline)
    # WHEN both are processed
    assert _handle(job_event("direct-bob", user="bob"))["failed"] == []
    assert _handle(job_event("pipe-bob", user="bob"))["failed"] == []
    # THEN the direct one is bob's and the pipeline's goes to _unowned, saying why
    assert _summary(plane, "bob", "direct-bob")["no_traces"] is True
    summary = _summary(plane, layout.UNOWNED_USER, "pipe-bob")
    assert any("SageMaker Pipelines" in w["message"] for w in summary["warnings"])
    runtime.reset()


# --- where the job's traces are ------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["Completed", "Failed"])
@pytest.mark.parametrize(
    ("job", "tensorboard"),
    [
        ("bob", f"s3://{TRACE_BUCKET}/traces/"),  # -> traces/bob/: every trace of bob's
        ("bob", f"s3://{TRACE_BUCKET}/tensorboard/"),  # -> tensorboard/bob/
        ("exp1", f"s3://{TRACE_BUCKET}/tensorboard/bob/"),  # -> tensorboard/bob/exp1/
        ("exp1", f"s3://{TRACE_BUCKET}/tensorboard/alice/../bob/"),  # dot segments
        ("exp1", f"s3://{TRACE_BUCKET}/tensorboard/alice/%2e%2e/bob/"),  # percent-encoded dot segments
        ("exp1", f"s3://{TRACE_BUCKET}/tensorboard/alice//bob/"),  # empty segment
    ],
)
def test_a_tensorboard_output_outside_the_owners_space_is_neither_read_nor_written(
    plane: DataPlane, traces_dir: Path, job: str, tensorboard: str, status: str
) -> None:
    # GIVEN bob's traces (his traces/ and tensorboard/ folders), and alice's job whose TensorBoard output
    # points into bob's space
    _plant_bob(plane, traces_dir, "traces/bob/bob-run/", "tensorboard/bob/bob-run/", "tensorboard/bob/exp1/")
    plane.s3.upload_file(str(traces_dir / RANK0), TRACE_BUCKET, "tensorboard/alice/../bob/exp1/x.pt.trace.json.gz")
    _register(plane, job, tag="alice", tensorboard=tensorboard, status=status)
    bob_keys = set(plane.list_keys("traces/bob/")) | set(plane.list_keys("tensorboard/bob/"))
    # WHEN the job ends (also when it fails at once)
    assert _handle(job_event(job, status, user="alice"))["failed"] == []
    # THEN alice's report holds none of bob's files, names the ignored path, and is marked incomplete
    summary = _summary(plane, "alice", job)
    assert summary.get("no_traces") is True
    assert summary["inputs"] == []
    assert summary["complete"] is False
    (warning,) = summary["warnings"]
    assert warning["source"].startswith(tensorboard.rstrip("/"))
    assert "outside" in warning["message"]
    html = plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{layout.job_reports_prefix('alice', job)}report.html")
    assert "outside" in html["Body"].read().decode()
    assert BOB_KERNEL_MARKER not in json.dumps(summary)
    # AND nothing was written into bob's space (no scalars), and nothing outside alice's reports
    assert set(plane.list_keys("traces/bob/")) | set(plane.list_keys("tensorboard/bob/")) == bob_keys
    assert all(k.startswith("reports/alice/") for k in _written_by_processor(plane))
    assert not [k for k in plane.list_keys() if ".." in k and "profstack" in k]


def test_scalars_are_written_in_the_owners_tensorboard_folder_only(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN alice's job with its TensorBoard output in her own space
    _register(plane, "own-tb", tag="alice", tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/alice/")
    plane.s3.upload_file(
        str(traces_dir / RANK0), TRACE_BUCKET, f"{layout.job_tensorboard_prefix('alice', 'own-tb')}r0.pt.trace.json.gz"
    )
    # WHEN processed THEN the scalars land in tensorboard/alice/own-tb/profstack/ and the report is complete
    assert _handle(job_event("own-tb"))["failed"] == []
    assert [k for k in plane.list_keys("tensorboard/alice/own-tb/profstack/") if "tfevents" in k]
    assert _summary(plane, "alice", "own-tb")["warnings"] == []


@pytest.mark.parametrize(("described", "claimed"), [("InProgress", "Completed"), ("Stopping", "Stopped")])
def test_a_message_saying_another_users_running_job_ended_is_not_processed(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str], described: str, claimed: str
) -> None:
    # GIVEN bob's job still running (DescribeTrainingJob says so) with a first, half-written trace uploaded
    job = "bob-live"
    _register(plane, job, tag="bob", tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/bob/", status=described)
    key = f"{layout.job_tensorboard_prefix('bob', job)}r0.pt.trace.json.gz"
    plane.s3.upload_file(str(traces_dir / RANK0), TRACE_BUCKET, key)
    # WHEN a message that anyone with sqs:SendMessage could put on the queue says it ended (owner right: bob)
    result = _handle(job_event(job, claimed, user="bob"))
    # THEN the record fails with its own reason, and no report, scalars or e-mail exist for bob's job
    assert result["failed"] == [result["record"]["messageId"]]
    assert any(d.get("reason") == "status_mismatch" for d in structured(log_lines(capsys)))
    assert _written_by_processor(plane) == []
    assert plane.notifications() == []
    # AND when the job really ends, SageMaker's own event is not swallowed by an idempotency record: bob gets
    # his one report and one e-mail
    emulate_run(job, start=RUN_START, end=RUN_END, status=claimed)
    assert _handle(job_event(job, claimed, user="bob"))["failed"] == []
    assert _summary(plane, "bob", job)["ranks"]
    assert len(plane.notifications()) == 1


def test_a_message_with_another_terminal_status_than_sagemakers_is_not_processed(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN bob's job that completed, and its report
    _register(plane, "bob-done", tag="bob", tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/bob/")
    key = f"{layout.job_tensorboard_prefix('bob', 'bob-done')}r0.pt.trace.json.gz"
    plane.s3.upload_file(str(traces_dir / RANK0), TRACE_BUCKET, key)
    assert _handle(job_event("bob-done", user="bob"))["failed"] == []
    before = {k: plane.s3.head_object(Bucket=TRACE_BUCKET, Key=k)["ETag"] for k in _written_by_processor(plane)}
    assert len(plane.notifications()) == 1
    # WHEN a forged message says it Failed THEN it is refused: no second report run, no "Failed" e-mail
    result = _handle(job_event("bob-done", "Failed", user="bob"))
    assert result["failed"] == [result["record"]["messageId"]]
    assert any(d.get("reason") == "status_mismatch" for d in structured(log_lines(capsys)))
    after = {k: plane.s3.head_object(Bucket=TRACE_BUCKET, Key=k)["ETag"] for k in _written_by_processor(plane)}
    assert after == before
    assert plane.notifications() == []


@pytest.mark.parametrize("name", ["evil\n", "../bob", "a.b", "bob/x", "-lead"])
def test_a_job_name_sagemaker_would_not_accept_is_rejected(
    plane: DataPlane, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a job of that name (moto accepts any name; SageMaker would not)
    _register(plane, name, tag="alice", tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/alice/")
    # WHEN its event is processed THEN it is rejected as malformed and nothing is written
    result = _handle(job_event(name))
    assert result["failed"] == [result["record"]["messageId"]]
    assert any(d.get("reason") == "malformed_event" for d in structured(log_lines(capsys)))
    assert _written_by_processor(plane) == []


# --- reads under a session policy ----------------------------------------------------------------------


def test_reads_run_under_a_session_policy_naming_only_the_owners_job_folders(
    plane: DataPlane, traces_dir: Path
) -> None:
    # GIVEN alice's job with traces in her TensorBoard folder, and bob's traces next door
    from lambdas.trace_processor import runtime

    _register(plane, "scoped", tag="alice", tensorboard=f"s3://{TRACE_BUCKET}/tensorboard/alice/")
    plane.s3.upload_file(
        str(traces_dir / RANK0), TRACE_BUCKET, f"{layout.job_tensorboard_prefix('alice', 'scoped')}r0.pt.trace.json.gz"
    )
    _plant_bob(plane, traces_dir, "traces/bob/scoped/")
    clients = runtime.clients()
    assert clients.sts is not None
    assumed: list[dict[str, Any]] = []
    clients.sts.meta.events.register(
        "provide-client-params.sts.AssumeRole", lambda params, **_: assumed.append(dict(params))
    )
    own_reads: list[str] = []

    def record_own(params: dict[str, Any], **_: Any) -> None:
        where = str(params.get("Prefix", params.get("Key", "")))
        if where.startswith((layout.TRACES_PREFIX, layout.TENSORBOARD_PREFIX)):
            own_reads.append(where)

    clients.s3.meta.events.register("provide-client-params.s3.GetObject", record_own)
    clients.s3.meta.events.register("provide-client-params.s3.ListObjectsV2", record_own)
    # WHEN processed
    assert _handle(job_event("scoped"))["failed"] == []
    # THEN the traces were read with the reader role's session, never with the function's own role
    assert own_reads == []
    (call,) = assumed
    assert call["RoleArn"] == READER_ROLE
    assert call["RoleSessionName"].startswith("profstack-")
    policy = json.loads(call["Policy"])
    assert len(call["Policy"]) < 2048  # AssumeRole's inline session policy limit
    statements = policy["Statement"]
    # AND the session policy lets the session read alice's job folders and nothing of bob's
    arn = f"arn:aws:s3:::{TRACE_BUCKET}"

    def get(key: str) -> bool:
        return is_allowed(statements, Request("s3:GetObject", f"{arn}/{key}"))

    def list_(prefix: str) -> bool:
        return is_allowed(statements, Request("s3:ListBucket", arn, {"s3:prefix": prefix}))

    assert get("tensorboard/alice/scoped/r0.pt.trace.json.gz")
    assert get("traces/alice/scoped/r0.pt.trace.json.gz")
    assert list_("tensorboard/alice/scoped/")
    assert list_("traces/alice/scoped/")
    for key in ("traces/bob/scoped/x.pt.trace.json.gz", "tensorboard/bob/x", "traces/alice/other-job/x", "reports/"):
        assert not get(key)
    for prefix in ("traces/bob/", "traces/", "tensorboard/alice/", "traces/alice/scoped-2/", ""):
        assert not list_(prefix)
    assert not is_allowed(statements, Request("s3:PutObject", f"{arn}/tensorboard/alice/scoped/x"))
    assert is_allowed(statements, Request("kms:Decrypt", TRACE_KEY))
    assert not is_allowed(statements, Request("kms:Decrypt", TRACE_KEY.replace("0000-0000", "1111-1111")))


def test_extra_prefix_templates_are_read_for_the_owner_only(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN an extra prefix template, alice's job with traces in her folder there, and bob's traces there too
    from lambdas.trace_processor import runtime

    plane.s3.create_bucket(Bucket="team-profiles")
    template = "s3://team-profiles/runs/{user}/{job}/"
    with patched_environ({"EXTRA_TRACE_PREFIXES": json.dumps([template])}):
        runtime.reset()
        _register(plane, "teamjob", tag="alice", tensorboard=None)
        plane.s3.upload_file(str(traces_dir / RANK0), "team-profiles", "runs/alice/teamjob/r0.pt.trace.json.gz")
        plane.s3.upload_file(str(traces_dir / RANK1), "team-profiles", "runs/bob/teamjob/r1.pt.trace.json.gz")
        plane.s3.upload_file(str(traces_dir / RANK1), "team-profiles", "runs/teamjob/r1.pt.trace.json.gz")
        # WHEN processed
        assert _handle(job_event("teamjob"))["failed"] == []
    # THEN only alice's file there was analysed
    summary = _summary(plane, "alice", "teamjob")
    assert [i["name"] for i in summary["inputs"]] == ["s3://team-profiles/runs/alice/teamjob/r0.pt.trace.json.gz"]


# --- the legacy rule-output expiry tag (it deletes what it marks) ------------------------------------------


@pytest.mark.parametrize(
    ("output", "tagged"),
    [
        (f"s3://{TRACE_BUCKET}/traces/bob/", False),  # bob's traces
        (f"s3://{TRACE_BUCKET}/reports/bob/", False),  # bob's reports
        (f"s3://{TRACE_BUCKET}/tensorboard/bob/", False),  # bob's TensorBoard logs
        (f"s3://{TRACE_BUCKET}/traces/alice/../bob/", False),  # dot segments
        (f"s3://{TRACE_BUCKET}/traces/alice/", True),  # her own space: tagged
    ],
)
def test_a_jobs_output_path_cannot_point_the_expiry_tag_at_another_users_objects(
    plane: DataPlane, output: str, tagged: bool
) -> None:
    # GIVEN objects under <output>/<alice's job>/rule-output/ (as SageMaker Debugger would write them)
    job = "alice-legacy"
    key = f"{output.removeprefix(f's3://{TRACE_BUCKET}/')}{job}/rule-output/ProfilerReport/profiler-report.html"
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key=key, Body=b"<html></html>")
    # AND alice's job whose OutputDataConfig (and ProfilerConfig) point there
    plane.sagemaker.create_training_job(
        TrainingJobName=job,
        AlgorithmSpecification={"TrainingImage": "pytorch-training:2.5-gpu-py311", "TrainingInputMode": "File"},
        RoleArn=user_role_arn("alice"),
        OutputDataConfig={"S3OutputPath": output},
        ProfilerConfig={"S3OutputPath": output},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 100},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        Tags=[{"Key": "profstack:user", "Value": "alice"}],
    )
    # WHEN its event is processed
    assert _handle(job_event(job, user="alice"))["failed"] == []
    # THEN the expiry tag lands only in alice's own space, never on another user's object
    tags = {t["Key"]: t["Value"] for t in plane.s3.get_object_tagging(Bucket=TRACE_BUCKET, Key=key)["TagSet"]}
    assert (tags.get(layout.LEGACY_RULE_OUTPUT_TAG[0]) == layout.LEGACY_RULE_OUTPUT_TAG[1]) is tagged


# --- the history baseline -----------------------------------------------------------------------------------


def test_the_history_baseline_reads_only_the_owners_rows(plane: DataPlane) -> None:
    from lambdas.trace_processor.history import S3HistoryReader
    from profstack.history.rows import partition_prefix

    # GIVEN rows of the same family "resnet" in bob's and alice's partitions, on the same day
    day = "2026-11-30"
    for user, job in (("bob", "resnet-bob-1"), ("alice", "resnet-alice-1")):
        row = {"job": job, "user": user, "family": "resnet", "ended_at": f"{day}T08:00:00Z", "step_p50_us": 1.0}
        key = f"{partition_prefix('jobs', day, user)}{job}.jsonl"
        plane.s3.put_object(Bucket=TRACE_BUCKET, Key=key, Body=(json.dumps(row) + "\n").encode())
    kernels = f"{partition_prefix('kernels', day, 'bob')}resnet-bob-1.jsonl"
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key=kernels, Body=b'{"job": "resnet-bob-1", "name": "bob_only_gemm"}\n')
    reader = S3HistoryReader(plane.s3, TRACE_BUCKET)
    assert reader.kernels(user="bob", row={"job": "resnet-bob-1", "ended_at": f"{day}T08:00:00Z"})  # bob's own: read
    # WHEN alice's job looks for its family's baseline
    found = reader.recent_jobs(
        user="alice", family="resnet", before=datetime(2026, 12, 1, tzinfo=UTC), lookback_days=7, limit=10
    )
    # THEN only her own rows are candidates: bob's job (name, numbers) never reaches her report
    assert [r["job"] for r in found] == ["resnet-alice-1"]
    # AND a row that names bob's job cannot pull bob's kernels into hers (the key is built from her partition)
    assert reader.kernels(user="alice", row={"job": "resnet-bob-1", "ended_at": f"{day}T08:00:00Z"}) == []
