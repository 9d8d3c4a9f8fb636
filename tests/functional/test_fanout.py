"""Fan-out path through moto: the processor starts the state machine; the map item and aggregate
steps run in-process on what Step Functions would pass them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from demo.lambda_harness import LambdaContext, patched_environ, sqs_event, sqs_record
from lambdas.trace_processor.events import parse_event
from profstack import layout
from tests.functional.processing_support import (
    TRACE_BUCKET,
    USER,
    DataPlane,
    create_data_plane,
    job_event,
    processor_environ,
    register_training_job,
)

RANK0 = "hta/trace_filter/sampled_rank-0.json.gz"
RANK1 = "hta/trace_filter/sampled_rank-1.json.gz"
PASS_DEFINITION = json.dumps({"StartAt": "Wait", "States": {"Wait": {"Type": "Pass", "End": True}}})


@pytest.fixture
def fanout_plane(aws_credentials: None, traces_dir: Path) -> Iterator[tuple[DataPlane, Any]]:
    with mock_aws():
        plane = create_data_plane()
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        machine = sfn.create_state_machine(
            name="profstack-fanout", definition=PASS_DEFINITION, roleArn="arn:aws:iam::123456789012:role/sfn"
        )["stateMachineArn"]
        environ = processor_environ(
            plane.topic_arn,
            FANOUT_FILE_THRESHOLD="1",  # two files -> fan out
            # rank-0's gzip is 124 kB (~1.86 MB of JSON at 15:1), rank-1's 120 kB: only rank-0 -> Processing job
            SINGLE_LAMBDA_MAX_FILE_BYTES=str(122_000 * 15),
            STATE_MACHINE_ARN=machine,
        )
        with patched_environ(environ):
            from lambdas.trace_processor import runtime

            runtime.reset()
            yield plane, sfn
            runtime.reset()


def _setup_job(plane: DataPlane, traces_dir: Path, job: str) -> None:
    register_training_job(plane, job)
    for i, rel in enumerate((RANK0, RANK1)):
        key = f"{layout.job_tensorboard_prefix(USER, job)}algo-{i + 1}_1.1.pt.trace.json.gz"
        plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)


def test_big_job_fans_out_once_and_the_aggregate_builds_the_job_report(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor import handler, runtime
    from lambdas.trace_processor.pipeline import process_job

    plane, sfn = fanout_plane
    job = "big-job"
    _setup_job(plane, traces_dir, job)
    # WHEN the job-completed event is processed
    response = handler.handler(sqs_event(sqs_record(job_event(job))), LambdaContext())
    # THEN one execution starts, named after the job and status, with a manifest of routed items
    assert response["batchItemFailures"] == []
    (execution,) = sfn.list_executions(stateMachineArn=runtime.env().state_machine_arn)["executions"]
    assert execution["name"] == f"{job}-Completed"
    payload = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    manifest = json.loads(
        plane.s3.get_object(Bucket=payload["manifest"]["bucket"], Key=payload["manifest"]["key"])["Body"].read()
    )
    assert [item["route"] for item in manifest] == ["processing", "lambda"]
    assert manifest[1]["partial_prefix"] == f"{layout.job_reports_prefix(USER, job)}partials/00001/"

    # AND a repeat while it runs joins the same execution (same name and input: StartExecution is idempotent)
    def start_again() -> str:
        outcome = process_job(
            parse_event(job_event(job)), env=runtime.env(), clients=runtime.clients(), engine=runtime.engine()
        )
        return outcome.action

    assert start_again() == "fanned_out"
    assert len(sfn.list_executions(stateMachineArn=runtime.env().state_machine_arn)["executions"]) == 1
    # AND once it has finished, the name is taken: no second run
    sfn.stop_execution(executionArn=execution["executionArn"])
    assert start_again() == "fanout_already_started"
    assert len(sfn.list_executions(stateMachineArn=runtime.env().state_machine_arn)["executions"]) == 1

    # WHEN the map analyses every item (in-process here; the Processing job runs the same engine) and
    # the aggregate step runs
    # (through the two Lambda entry points, with what the state machine passes them)
    from lambdas.trace_processor import aggregate as aggregate_entry
    from lambdas.trace_processor import analyze_file as analyze_entry

    item_selector = {"context": payload["context"], "partials": payload["partials"]}
    for item in manifest:
        result = analyze_entry.handler({**item_selector, "item": item}, LambdaContext())
        assert result["index"] == item["index"]
    outcome = aggregate_entry.handler(payload, LambdaContext())
    # THEN the job report covers both ranks, with the cross-rank table rebuilt over them
    reports = layout.job_reports_prefix(USER, job)
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert sorted(r["rank"] for r in summary["ranks"]) == [0, 1]
    assert summary["cross_rank"]["rank_count"] == 2
    assert len(summary["cross_rank"]["table"]) == 2
    assert "load_balance" in summary["cross_rank"]
    assert outcome["action"] == "reported"
    assert f"{reports}perfetto/rank-0.trace.json.gz" in plane.list_keys(reports)
    assert len(plane.notifications()) == 1


def test_aggregate_flags_a_file_whose_partial_never_arrived(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor import handler, runtime
    from lambdas.trace_processor.fanout import aggregate, analyze_one

    plane, sfn = fanout_plane
    job = "half-done"
    _setup_job(plane, traces_dir, job)
    handler.handler(sqs_event(sqs_record(job_event(job))), LambdaContext())
    (execution,) = sfn.list_executions(stateMachineArn=runtime.env().state_machine_arn)["executions"]
    payload = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    manifest = json.loads(
        plane.s3.get_object(Bucket=payload["manifest"]["bucket"], Key=payload["manifest"]["key"])["Body"].read()
    )
    # GIVEN only the Lambda-routed item finished (the Processing job for the big file failed)
    analyze_one({**payload, "item": manifest[1]}, env=runtime.env(), clients=runtime.clients(), engine=runtime.engine())
    # WHEN the aggregate runs (the map tolerates failed items)
    aggregate(payload, env=runtime.env(), clients=runtime.clients(), engine=runtime.engine())
    # THEN the report covers rank 1 and flags the missing file with the Processing-job reason
    reports = layout.job_reports_prefix(USER, job)
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert [r["rank"] for r in summary["ranks"]] == [1]
    assert summary["complete"] is False
    flagged = [i for i in summary["inputs"] if i["status"] == "failed"]
    assert len(flagged) == 1
    assert flagged[0]["name"].endswith("algo-1_1.1.pt.trace.json.gz")
    assert "Processing job" in flagged[0]["error"]["message"]
    assert summary["findings"][0]["rule_id"] == "UnreadableTraceFiles"


# --- a forged execution input (anyone allowed states:StartExecution or lambda:InvokeFunction) -------------


def _fanned_out(plane: DataPlane, sfn: Any, traces_dir: Path, job: str, user: str) -> tuple[dict[str, Any], list[Any]]:
    """`user`'s job, fanned out by the processor: its execution input and its manifest."""
    from lambdas.trace_processor import handler, runtime

    register_training_job(plane, job, user=user)
    for i, rel in enumerate((RANK0, RANK1)):
        key = f"{layout.job_tensorboard_prefix(user, job)}{user}-secret-{i}.pt.trace.json.gz"
        plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)
    assert handler.handler(sqs_event(sqs_record(job_event(job, user=user))), LambdaContext())["batchItemFailures"] == []
    executions = sfn.list_executions(stateMachineArn=runtime.env().state_machine_arn)["executions"]
    (execution,) = [e for e in executions if e["name"] == f"{job}-Completed"]
    payload = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    manifest = json.loads(
        plane.s3.get_object(Bucket=payload["manifest"]["bucket"], Key=payload["manifest"]["key"])["Body"].read()
    )
    return payload, manifest


def _report_etags(plane: DataPlane) -> dict[str, str]:
    """Every object under reports/ and its ETag: what a refused step must leave as it was."""
    return {k: plane.s3.head_object(Bucket=TRACE_BUCKET, Key=k)["ETag"] for k in plane.list_keys("reports/")}


def _step(name: str, payload: dict[str, Any]) -> Any:
    from lambdas.trace_processor import runtime
    from lambdas.trace_processor.fanout import aggregate, analyze_one

    step = {"analyze": analyze_one, "aggregate": aggregate}[name]
    return step(payload, env=runtime.env(), clients=runtime.clients(), engine=runtime.engine())


def test_a_forged_input_pairing_ones_own_job_with_another_users_manifest_reads_nothing(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor.fanout import FanoutInputError

    plane, sfn = fanout_plane
    # GIVEN bob's and alice's fanned-out jobs
    bob, bob_manifest = _fanned_out(plane, sfn, traces_dir, "bob-big", "bob")
    alice, _ = _fanned_out(plane, sfn, traces_dir, "alice-big", "alice")
    before = set(plane.list_keys("reports/alice/"))
    # WHEN alice starts an execution (or invokes the steps) with her job's context and bob's manifest and items
    forged = {**alice, "manifest": bob["manifest"]}
    for item in bob_manifest:  # not alice's manifest's items (and outside her space: checked too)
        with pytest.raises(FanoutInputError, match="of this job's manifest"):
            _step("analyze", {**forged, "item": item})
    with pytest.raises(FanoutInputError, match="manifest is not what the processor sent"):
        _step("aggregate", forged)
    # THEN nothing was written into alice's space: no partial, trimmed trace or report of bob's files
    assert set(plane.list_keys("reports/alice/")) == before
    assert "bob-secret" not in json.dumps([plane.s3.get_object(Bucket=TRACE_BUCKET, Key=k)["Body"].read().decode(
        errors="replace") for k in plane.list_keys("reports/alice/")])  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [
        {"status": "Failed"},  # bob's job "failed": a second report and a Failed e-mail
        {"user": "alice"},  # bob's job, filed under alice
        {"tensorboard": f"s3://{TRACE_BUCKET}/tensorboard/bob/other-run/"},  # scalars into another folder
        {"warnings": [{"source": "x", "error_type": "Phish", "message": "re-enter your password", "fatal": False}]},
        {"trace_bucket": "attacker-bucket"},  # a stored "context" the attacker wrote in their own bucket
    ],
)
def test_a_forged_job_context_is_refused_by_both_steps(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path, change: dict[str, Any]
) -> None:
    from lambdas.trace_processor.fanout import FanoutInputError

    plane, sfn = fanout_plane
    # GIVEN bob's fanned-out job
    bob, bob_manifest = _fanned_out(plane, sfn, traces_dir, "bob-big", "bob")
    before = _report_etags(plane)
    # WHEN its execution input is replayed with one field of the job context changed
    forged = {**bob, "context": {**bob["context"], **change}}
    with pytest.raises(FanoutInputError):
        _step("analyze", {**forged, "item": bob_manifest[1]})
    with pytest.raises(FanoutInputError):
        _step("aggregate", forged)
    # THEN neither step wrote anything, and no e-mail went out
    after = _report_etags(plane)
    assert after == before
    assert plane.notifications() == []


@pytest.mark.parametrize(
    "change",
    [
        {"job": {"TrainingJobName": "bob-big", "TrainingJobStatus": "Failed", "FailureReason": "Visit evil.example"}},
        {"job": None},  # no description: the report would say its system view is "unavailable"
        {"partials": {"bucket": TRACE_BUCKET, "prefix": "reports/alice/x/partials/"}},
    ],
)
def test_the_aggregate_refuses_a_replayed_input_with_another_job_description(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path, change: dict[str, Any]
) -> None:
    from lambdas.trace_processor.fanout import FanoutInputError

    plane, sfn = fanout_plane
    # GIVEN bob's fanned-out job
    bob, _ = _fanned_out(plane, sfn, traces_dir, "bob-big", "bob")
    before = _report_etags(plane)
    # WHEN its genuine context and manifest come with another job description (the e-mail's FailureReason, the
    # system view's hosts and times) THEN the aggregate refuses, and writes and sends nothing
    with pytest.raises(FanoutInputError, match="is not what the processor sent"):
        _step("aggregate", {**bob, **change})
    after = _report_etags(plane)
    assert after == before
    assert plane.notifications() == []


def test_a_job_that_was_never_fanned_out_gets_no_fanout_steps(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor.fanout import FanoutInputError

    plane, sfn = fanout_plane
    # GIVEN bob's fanned-out job and a context for a job of bob's that never fanned out (or does not exist)
    bob, bob_manifest = _fanned_out(plane, sfn, traces_dir, "bob-big", "bob")
    invented = {**bob, "context": {**bob["context"], "job": "bob-invented"}}
    # WHEN the steps are called with it THEN they refuse: no stored context for that job
    with pytest.raises(FanoutInputError, match="no fan-out was started"):
        _step("analyze", {**invented, "item": bob_manifest[1]})
    with pytest.raises(FanoutInputError):
        _step("aggregate", invented)
    assert not plane.list_keys("reports/bob/bob-invented/")
    # AND the genuine input still works for both steps (the check does not get in the way)
    for item in bob_manifest:
        if item["route"] == "lambda":
            assert _step("analyze", {**bob, "item": item})["index"] == item["index"]
    assert _step("aggregate", bob).action == "reported"


def test_an_execution_squatting_the_jobs_execution_name_does_not_cost_the_job_its_report(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor import handler, runtime

    plane, sfn = fanout_plane
    machine = runtime.env().state_machine_arn
    # GIVEN alice (allowed states:StartExecution) started an execution under the name bob's fan-out will take
    squat = sfn.start_execution(
        stateMachineArn=machine, name="bob-late-Completed", input=json.dumps({"context": {"job": "junk"}})
    )["executionArn"]
    sfn.stop_execution(executionArn=squat)
    # WHEN bob's job ends and fans out
    register_training_job(plane, "bob-late", user="bob")
    for i, rel in enumerate((RANK0, RANK1)):
        key = f"{layout.job_tensorboard_prefix('bob', 'bob-late')}algo-{i + 1}_1.1.pt.trace.json.gz"
        plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)
    assert handler.handler(sqs_event(sqs_record(job_event("bob-late", user="bob"))), LambdaContext()) == {
        "batchItemFailures": []
    }
    # THEN bob's fan-out runs under a name of its own, with bob's input (before, the processor took the squatter's
    # execution for its own: "fanout_already_started", and no report ever came)
    executions = {e["name"]: e["executionArn"] for e in sfn.list_executions(stateMachineArn=machine)["executions"]}
    inputs = {n: json.loads(sfn.describe_execution(executionArn=arn)["input"]) for n, arn in executions.items()}
    (name,) = [n for n, payload in inputs.items() if payload.get("context", {}).get("user") == "bob"]
    assert name != "bob-late-Completed"
    assert name.startswith("bob-late-Completed-")
    payload = inputs[name]
    manifest = json.loads(
        plane.s3.get_object(Bucket=payload["manifest"]["bucket"], Key=payload["manifest"]["key"])["Body"].read()
    )
    for item in manifest:
        if item["route"] == "lambda":
            _step("analyze", {**payload, "item": item})
    assert _step("aggregate", payload).action == "reported"
    assert len(plane.notifications()) == 1
    # AND once it has finished, a repeat of the event finds it (by its input) instead of starting a third
    from lambdas.trace_processor.pipeline import process_job

    sfn.stop_execution(executionArn=executions[name])

    repeat = process_job(
        parse_event(job_event("bob-late", user="bob")), env=runtime.env(), clients=runtime.clients(),
        engine=runtime.engine(),
    )  # fmt: skip
    assert repeat.action == "fanout_already_started"
    assert len(sfn.list_executions(stateMachineArn=machine)["executions"]) == 2


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "is not JSON"),
        (json.dumps({"schema_version": "9.0", "ranks": []}).encode(), "summary schema '9.0'"),
        (json.dumps({"schema_version": "1.3", "ranks": "all of them"}).encode(), "'ranks' is a str"),
        (json.dumps([1, 2, 3]).encode(), "not a summary object"),
    ],
)
def test_a_bad_partial_is_one_bad_rank_named_in_the_report_not_a_lost_job(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path, body: bytes, reason: str
) -> None:
    from lambdas.trace_processor.job import JobContext
    from lambdas.trace_processor.routing import partial_location

    plane, sfn = fanout_plane
    # GIVEN a fanned-out job whose two partials were written, then one replaced by a malformed or foreign one
    payload, manifest = _fanned_out(plane, sfn, traces_dir, "bad-partial", USER)
    for item in manifest:
        _step("analyze", {**payload, "item": item})
    ctx = JobContext.from_json(payload["context"])
    bad = partial_location(ctx, int(manifest[0]["index"]))
    plane.s3.put_object(Bucket=bad.bucket, Key=bad.key, Body=body)
    # WHEN the aggregate runs
    _step("aggregate", payload)
    # THEN the job still gets its report and its e-mail (before: the whole job got neither), built from the good
    # rank, with the bad one named as a failed input saying why
    reports = layout.job_reports_prefix(USER, "bad-partial")
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert len(summary["ranks"]) == 1
    assert summary["complete"] is False
    (failed,) = [i for i in summary["inputs"] if i["status"] == "failed"]
    assert failed["name"].endswith(manifest[0]["key"])
    assert reason in failed["error"]["message"]
    assert len(plane.notifications()) == 1


def test_a_map_item_of_the_owners_other_job_is_refused_and_the_real_partial_stays(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    """#42 item 8b: items were checked against the owner's whole space, so an item of bob's other job, sent with a
    genuine context of this job, was analysed and its partial overwrote this job's."""
    from lambdas.trace_processor.fanout import FanoutInputError
    from lambdas.trace_processor.job import JobContext
    from lambdas.trace_processor.routing import partial_location

    plane, sfn = fanout_plane
    # GIVEN two fanned-out jobs of bob's, and job A's partials written by its own map items
    job_a, manifest_a = _fanned_out(plane, sfn, traces_dir, "bob-job-a", "bob")
    _, manifest_b = _fanned_out(plane, sfn, traces_dir, "bob-job-b", "bob")
    for item in manifest_a:
        _step("analyze", {**job_a, "item": item})
    ctx = JobContext.from_json(job_a["context"])
    real = {
        i: plane.s3.get_object(Bucket=TRACE_BUCKET, Key=partial_location(ctx, i).key)["Body"].read() for i in (0, 1)
    }
    # WHEN items of job B (inside bob's space, same indexes) are sent with job A's genuine context, as they are and
    # with job A's index; and an item of A's with its size or route changed
    forged = [
        *manifest_b,
        {**manifest_b[1], "index": 0},
        {**manifest_a[1], "size": 1},
        {**manifest_a[1], "route": "processing"},
        {**manifest_a[1], "index": 7},
    ]
    for item in forged:
        with pytest.raises(FanoutInputError, match=r"is not item .* of this job's manifest"):
            _step("analyze", {**job_a, "item": item})
    # THEN job A's partials are the ones its own items wrote
    for i in (0, 1):
        assert plane.s3.get_object(Bucket=TRACE_BUCKET, Key=partial_location(ctx, i).key)["Body"].read() == real[i]
    # AND job A's own items are still accepted (the manifest is read once per container, checked by its digest)
    assert _step("analyze", {**job_a, "item": manifest_a[1]})["index"] == 1


def test_a_manifest_changed_after_the_fanout_started_is_refused(
    fanout_plane: tuple[DataPlane, Any], traces_dir: Path
) -> None:
    from lambdas.trace_processor.fanout import FanoutInputError, _manifests

    plane, sfn = fanout_plane
    # GIVEN a fanned-out job whose stored manifest is then replaced (say by a later re-delivery with other files)
    payload, manifest = _fanned_out(plane, sfn, traces_dir, "changed-manifest", USER)
    _manifests.clear()
    changed = [{**manifest[0], "key": manifest[1]["key"]}, manifest[1]]
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key=payload["manifest"]["key"], Body=json.dumps(changed).encode())
    # WHEN an item runs THEN it is refused: the manifest is not the one whose digest the execution input holds
    with pytest.raises(FanoutInputError, match="not the manifest this fan-out was started with"):
        _step("analyze", {**payload, "item": changed[0]})
