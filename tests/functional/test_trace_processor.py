"""End to end through moto: EventBridge -> SQS -> trace-processor handler -> S3 report, metrics, SNS.

The handler runs in-process (moto's Lambda needs Docker), fed exactly what the SQS event-source
mapping would deliver, with the real analysis engine on the sample traces in samples/traces.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from demo.lambda_harness import LambdaContext, patched_environ, sqs_event, sqs_record
from demo.local_emf import publish_emf
from lambdas.trace_processor.tb_scalars import snake
from lambdas.trace_processor.tfevents import read_event_file
from profstack import layout
from profstack.jobs import metric_names as m
from tests.functional.processing_support import (
    TRACE_BUCKET,
    USER,
    DataPlane,
    create_data_plane,
    emulate_run,
    job_event,
    processor_environ,
    register_training_job,
)

RANK0 = "hta/trace_filter/sampled_rank-0.json.gz"
RANK1 = "hta/trace_filter/sampled_rank-1.json.gz"


class _CurrentStdout:
    """Whatever sys.stdout is at write time (pytest swaps it per test; Powertools keeps a reference)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def plane(aws_credentials: None, traces_dir: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[DataPlane]:
    with mock_aws():
        data_plane = create_data_plane()
        with patched_environ(processor_environ(data_plane.topic_arn)):
            from lambdas.trace_processor import handler, runtime

            # Powertools' handler keeps the stdout of the test that imported it: point it at this capture.
            for log_handler in logging.getLogger(handler.logger.service).handlers:
                if isinstance(log_handler, logging.StreamHandler):
                    log_handler.stream = _CurrentStdout()
            runtime.reset()
            yield data_plane
            runtime.reset()


def _tb_key(job: str, name: str) -> str:
    return f"{layout.job_tensorboard_prefix(USER, job)}{name}"


def upload(plane: DataPlane, traces_dir: Path, rel: str, key: str) -> None:
    plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)


def put_event(plane: DataPlane, event: dict[str, Any]) -> None:
    entry = {
        "Source": event["source"],
        "DetailType": event["detail-type"],
        "Detail": json.dumps(event["detail"]),
        "Resources": event.get("resources", []),
    }
    result = plane.events.put_events(Entries=[entry])
    assert result["FailedEntryCount"] == 0


def drain(plane: DataPlane, capsys: pytest.CaptureFixture[str] | None = None, rounds: int = 1) -> list[dict[str, Any]]:
    """Receive from the job queue and run the handler the way the event-source mapping does:
    successes are deleted, reported failures stay (and are redriven to the DLQ after max receives)."""
    from lambdas.trace_processor import handler

    responses = []
    for _ in range(rounds):
        got = plane.sqs.receive_message(
            QueueUrl=plane.queue_url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"]
        )
        messages = got.get("Messages", [])
        if not messages:
            break
        records = [
            sqs_record(
                msg["Body"],
                receive_count=int(msg["Attributes"]["ApproximateReceiveCount"]),
                message_id=msg["MessageId"],
            )
            for msg in messages
        ]
        response = handler.handler(sqs_event(*records), LambdaContext())
        failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        for msg in messages:
            if msg["MessageId"] not in failed:
                plane.sqs.delete_message(QueueUrl=plane.queue_url, ReceiptHandle=msg["ReceiptHandle"])
        responses.append(response)
    return responses


def log_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    out = capsys.readouterr()
    return (out.out + out.err).splitlines()


def structured(lines: list[str]) -> list[dict[str, Any]]:
    docs = []
    for line in lines:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    return docs


def test_finished_job_yields_report_metrics_scalars_and_one_notification(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a two-rank job whose traces sit in its TensorBoard output, and a legacy rule-output object
    job = "resnet-ddp-e2e"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_101.1796565600000.pt.trace.json.gz"))
    upload(plane, traces_dir, RANK1, _tb_key(job, "algo-2_102.1796565600000.pt.trace.json.gz"))
    legacy_key = f"output/{job}/rule-output/ProfilerReport-1796565600/profiler-output/profiler-report.html"
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key=legacy_key, Body=b"<html/>", Tagging="team=vision")
    # WHEN the job-completed event goes through EventBridge and SQS to the handler
    put_event(plane, job_event(job))
    responses = drain(plane)
    lines = log_lines(capsys)

    # THEN the batch succeeded
    assert responses
    assert responses[0] == {"batchItemFailures": []}
    reports = layout.job_reports_prefix(USER, job)
    keys = plane.list_keys(reports)
    assert f"{reports}summary.json" in keys
    assert f"{reports}report.html" in keys
    assert f"{reports}perfetto/rank-0.trace.json.gz" in keys
    assert f"{reports}perfetto/rank-1.trace.json.gz" in keys
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert sorted(r["rank"] for r in summary["ranks"]) == [0, 1]
    assert summary["cross_rank"]["rank_count"] == 2
    html = plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}report.html")["Body"].read().decode()
    assert html.lstrip().lower().startswith("<!doctype html")
    assert f"<title>Profile report: {job}</title>" in html  # titled with the job, not the file names
    assert "job_name" not in summary  # the page title does not leak into the versioned summary
    # AND the trimmed trace is a gzip Perfetto/Chrome JSON document
    trimmed = plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}perfetto/rank-0.trace.json.gz")["Body"].read()
    assert json.loads(gzip.decompress(trimmed))["traceEvents"]
    # AND TensorBoard scalars land in the job's TensorBoard folder, readable as TFRecords
    tb_keys = [k for k in plane.list_keys(layout.job_tensorboard_prefix(USER, job)) if "tfevents" in k]
    assert len(tb_keys) == 1
    events = read_event_file(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=tb_keys[0])["Body"].read())
    # (one tag style, issue #13: profstack/<snake_case metric>[/rank_<r>])
    assert f"profstack/{snake(m.TRACE_BYTES)}" in events[1].scalars
    assert "profstack/trace_bytes" in events[1].scalars
    assert any(tag.startswith("profstack/step_time_ms") for e in events[2:] for tag in e.scalars)
    # AND exactly one notification names the job and the report
    notes = plane.notifications()
    assert len(notes) == 1
    assert job in notes[0]["Subject"]
    assert f"s3://{TRACE_BUCKET}/{reports}report.html" in notes[0]["Message"]
    # AND the legacy rule-output object got the expiry tag, keeping its own tag
    tags = plane.s3.get_object_tagging(Bucket=TRACE_BUCKET, Key=legacy_key)["TagSet"]
    assert {(t["Key"], t["Value"]) for t in tags} == {("team", "vision"), layout.LEGACY_RULE_OUTPUT_TAG}
    # AND the EMF metrics, once CloudWatch ingests them, are queryable with and without the job dimension
    assert publish_emf(lines, plane.cloudwatch) > 0
    listed = plane.cloudwatch.list_metrics(Namespace=m.NAMESPACE, MetricName=m.TRACE_BYTES)["Metrics"]
    dimension_sets = {tuple(sorted(d["Name"] for d in metric["Dimensions"])) for metric in listed}
    assert ("service",) in dimension_sets
    assert (m.JOB_DIMENSION,) in dimension_sets or (m.JOB_DIMENSION, "service") in dimension_sets
    per_job = [metric for metric in listed if {"Name": m.JOB_DIMENSION, "Value": job} in metric["Dimensions"]]
    assert per_job


def test_duplicate_events_produce_one_report_and_one_notification(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a job and SageMaker sending its Completed event twice (docs/platform-facts.md A5)
    job = "dup-job"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_1.1.pt.trace.json.gz"))
    put_event(plane, job_event(job))
    put_event(plane, job_event(job))
    # WHEN both are delivered (one batch or two)
    drain(plane, rounds=3)
    docs = structured(log_lines(capsys))
    # THEN the engine ran once: one "job processed" log, one notification, one idempotency record
    assert sum(1 for d in docs if d.get("message") == "job processed") == 1
    assert len(plane.notifications()) == 1
    table = boto3.client("dynamodb", region_name="us-east-1").scan(TableName="profstack-idempotency")
    assert table["Count"] == 1
    assert (
        plane.sqs.get_queue_attributes(QueueUrl=plane.queue_url, AttributeNames=["All"])["Attributes"][
            "ApproximateNumberOfMessages"
        ]
        == "0"
    )


def test_redelivery_after_a_crash_finishes_without_duplicates(
    plane: DataPlane, traces_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a job whose first attempt dies after writing the report, before the notification is sent
    from lambdas.trace_processor import handler, runtime

    job = "crash-job"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_1.1.pt.trace.json.gz"))
    record = sqs_record(job_event(job))
    clients = runtime.clients()
    real_publish = clients.sns.publish
    calls = {"n": 0}

    def flaky_publish(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("simulated crash while publishing")
        return real_publish(**kwargs)

    monkeypatch.setattr(clients.sns, "publish", flaky_publish)
    first = handler.handler(sqs_event(record), LambdaContext())
    assert first["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    reports = layout.job_reports_prefix(USER, job)
    assert f"{reports}summary.json" in plane.list_keys(reports)  # the crash happened after the report
    # WHEN SQS redelivers the same message
    second = handler.handler(
        sqs_event(dict(record, attributes={**record["attributes"], "ApproximateReceiveCount": "2"})),
        LambdaContext(),
    )
    # THEN it finishes: one notification in total, and the report is still one set of fixed keys
    assert second["batchItemFailures"] == []
    assert len(plane.notifications()) == 1
    assert plane.list_keys(f"{reports}summary") == [f"{reports}summary.json"]


def test_redelivery_after_a_timeout_takes_over_the_expired_in_progress_record(
    plane: DataPlane, traces_dir: Path
) -> None:
    # GIVEN an invocation that timed out mid-job: its idempotency record is INPROGRESS, in-progress expiry passed
    from lambdas.trace_processor import handler, runtime

    job = "timeout-job"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_1.1.pt.trace.json.gz"))
    record = sqs_record(job_event(job))
    config, store = runtime.idempotency()
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    # Let Powertools compute the exact key it would use, by running once and reading the record back.
    assert handler.handler(sqs_event(record), LambdaContext())["batchItemFailures"] == []
    item = ddb.scan(TableName="profstack-idempotency")["Items"][0]
    ddb.put_item(
        TableName="profstack-idempotency",
        Item={
            "id": item["id"],
            "status": {"S": "INPROGRESS"},
            "expiration": {"N": "9999999999"},
            "in_progress_expiration": {"N": "1"},  # the dead invocation's deadline is long gone
        },
    )
    plane.s3.delete_object(Bucket=TRACE_BUCKET, Key=f"{layout.job_reports_prefix(USER, job)}summary.json")
    # WHEN the message is redelivered
    response = handler.handler(sqs_event(record), LambdaContext())
    # THEN the new invocation redoes the job instead of waiting on the dead one
    assert response["batchItemFailures"] == []
    reports = layout.job_reports_prefix(USER, job)
    assert f"{reports}summary.json" in plane.list_keys(reports)
    assert len(plane.notifications()) == 1  # the marker from the first run prevents a second e-mail
    del config, store


def test_poison_message_goes_to_the_dlq_with_its_reason_logged(
    plane: DataPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a message that is not a training-job event
    plane.sqs.send_message(QueueUrl=plane.queue_url, MessageBody="{not json")
    # WHEN it is received and fails more often than maxReceiveCount (2)
    drain(plane, rounds=4)
    docs = structured(log_lines(capsys))
    # THEN SQS moved it to the DLQ, and each failure was logged as structured JSON with the reason
    dlq = plane.sqs.receive_message(QueueUrl=plane.dlq_url, MaxNumberOfMessages=10).get("Messages", [])
    assert [msg["Body"] for msg in dlq] == ["{not json"]
    failures = [d for d in docs if d.get("reason") == "malformed_event"]
    assert len(failures) == 2
    assert {d["receive_count"] for d in failures} == {1, 2}
    assert all(d["level"] == "ERROR" and "not JSON" in d["error"] for d in failures)


def test_partial_batch_failure_reports_only_the_failed_record(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a batch with a good job and a job SageMaker does not know
    from lambdas.trace_processor import handler

    register_training_job(plane, "good-job")
    upload(plane, traces_dir, RANK0, _tb_key("good-job", "algo-1_1.1.pt.trace.json.gz"))
    good = sqs_record(job_event("good-job"))
    missing = sqs_record(job_event("no-such-job"))
    # WHEN the batch is handled
    response = handler.handler(sqs_event(good, missing), LambdaContext())
    # THEN only the missing job's record is returned for retry, with reason job_not_found
    assert response == {"batchItemFailures": [{"itemIdentifier": missing["messageId"]}]}
    assert f"{layout.job_reports_prefix(USER, 'good-job')}summary.json" in plane.list_keys()
    docs = structured(log_lines(capsys))
    assert any(d.get("reason") == "job_not_found" and d.get("message_id") == missing["messageId"] for d in docs)


def test_one_corrupt_file_is_flagged_and_the_others_are_analysed(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a job with one good trace and one truncated gzip trace
    job = "half-bad"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_1.1.pt.trace.json.gz"))
    good = (traces_dir / RANK1).read_bytes()
    plane.s3.put_object(
        Bucket=TRACE_BUCKET, Key=_tb_key(job, "algo-2_2.2.pt.trace.json.gz"), Body=good[: len(good) // 3]
    )
    from lambdas.trace_processor import handler

    # WHEN processed
    response = handler.handler(sqs_event(sqs_record(job_event(job))), LambdaContext())
    # THEN the job is reported, with the bad file flagged up front and the good rank analysed
    assert response["batchItemFailures"] == []
    summary = json.loads(
        plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{layout.job_reports_prefix(USER, job)}summary.json")[
            "Body"
        ].read()
    )
    statuses = {i["name"].rsplit("/", 1)[-1]: i["status"] for i in summary["inputs"]}
    assert statuses["algo-1_1.1.pt.trace.json.gz"] == "ok"
    assert statuses["algo-2_2.2.pt.trace.json.gz"] != "ok"
    assert summary["ranks"]
    assert summary["findings"][0]["rule_id"] == "UnreadableTraceFiles" or any(
        f["rule_id"] == "UnreadableTraceFiles" for f in summary["findings"]
    )


def test_all_files_corrupt_is_retried(plane: DataPlane, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a job whose only trace is garbage
    job = "all-bad"
    register_training_job(plane, job)
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key=_tb_key(job, "algo-1_1.1.pt.trace.json.gz"), Body=b"\x1f\x8bnope")
    from lambdas.trace_processor import handler

    record = sqs_record(job_event(job))
    # WHEN processed THEN the record fails (retry, then DLQ) with reason corrupt_trace
    assert handler.handler(sqs_event(record), LambdaContext())["batchItemFailures"] == [
        {"itemIdentifier": record["messageId"]}
    ]
    assert any(d.get("reason") == "corrupt_trace" for d in structured(log_lines(capsys)))


def test_job_without_traces_gets_a_summary_that_says_so(plane: DataPlane) -> None:
    # GIVEN a finished job that never wrote a trace
    job = "no-trace-job"
    register_training_job(plane, job)
    # that failed: DescribeTrainingJob says so too (the processor refuses a status SageMaker does not report)
    now = datetime.now(UTC)
    emulate_run(job, start=now - timedelta(hours=1), end=now, status="Failed")
    from lambdas.trace_processor import handler

    # WHEN processed
    response = handler.handler(sqs_event(sqs_record(job_event(job, "Failed"))), LambdaContext())
    # THEN no error loop: a no-traces summary, a page, and a notification that says so
    assert response["batchItemFailures"] == []
    reports = layout.job_reports_prefix(USER, job)
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert summary["no_traces"] is True
    assert any(job in uri for uri in summary["searched"])
    notes = plane.notifications()
    assert len(notes) == 1
    assert "no traces" in notes[0]["Subject"]


def test_throttled_describe_is_retried_with_reason_logged(
    plane: DataPlane, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN SageMaker throttling DescribeTrainingJob (Stubber: botocore answers, no retries consumed)
    from lambdas.trace_processor import handler, runtime

    clients = runtime.clients()
    stubbed = boto3.client("sagemaker", region_name="us-east-1")
    stubber = Stubber(stubbed)
    stubber.add_client_error("describe_training_job", service_error_code="ThrottlingException", http_status_code=400)
    stubber.activate()
    monkeypatch.setattr(clients, "sagemaker", stubbed)
    record = sqs_record(job_event("busy-job"))
    # WHEN processed THEN the record is failed for retry and the log says throttled
    assert handler.handler(sqs_event(record), LambdaContext())["batchItemFailures"] == [
        {"itemIdentifier": record["messageId"]}
    ]
    assert any(d.get("reason") == "throttled" for d in structured(log_lines(capsys)))
    stubber.assert_no_pending_responses()


def test_access_denied_on_traces_is_retried_with_reason_logged(
    plane: DataPlane, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a job, and S3 refusing to list its traces (e.g. a bucket policy the role does not satisfy)
    from lambdas.trace_processor import handler, runtime

    register_training_job(plane, "locked-job")
    s3 = runtime.clients().s3
    stubber = Stubber(s3)
    stubber.add_client_error("list_objects_v2", service_error_code="AccessDenied", http_status_code=403)
    stubber.activate()
    record = sqs_record(job_event("locked-job"))
    # WHEN processed THEN it fails for retry with reason access_denied
    response = handler.handler(sqs_event(record), LambdaContext())
    stubber.deactivate()
    assert response["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    assert any(d.get("reason") == "access_denied" for d in structured(log_lines(capsys)))


@pytest.mark.parametrize("failure", ["socket", "botocore"])
def test_trace_source_streams_in_chunks_and_resumes_a_dropped_connection(
    plane: DataPlane, traces_dir: Path, failure: str
) -> None:
    # GIVEN a trace in S3 and a connection that drops after the first chunk
    from lambdas.trace_processor.aws import S3Object, S3TraceSource

    data = (traces_dir / RANK0).read_bytes()
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key="traces/alice/j/x.pt.trace.json.gz", Body=data)
    s3 = boto3.client("s3", region_name="us-east-1")
    real_get = s3.get_object
    calls: list[dict[str, Any]] = []

    class Dropping(io.RawIOBase):
        def __init__(self, body: Any) -> None:
            self.body, self.reads = body, 0

        def read(self, n: int = -1) -> bytes:
            self.reads += 1
            if self.reads == 2:
                if failure == "socket":
                    raise ConnectionResetError("peer reset")
                from botocore.exceptions import ResponseStreamingError

                raise ResponseStreamingError(error="Connection broken: IncompleteRead")
            return bytes(self.body.read(n))

        def close(self) -> None:
            self.body.close()

    def get_object(**kwargs: Any) -> Any:
        calls.append(kwargs)
        response = real_get(**kwargs)
        if len(calls) == 1:
            response["Body"] = Dropping(response["Body"])
        return response

    s3.get_object = get_object  # type: ignore[method-assign]
    source = S3TraceSource(
        s3, S3Object(TRACE_BUCKET, "traces/alice/j/x.pt.trace.json.gz", len(data)), buffer_size=65536
    )
    # WHEN read through
    with source.open() as fh:
        got = b"".join(iter(lambda: fh.read(65536), b""))
    # THEN every byte arrives once, and the second request resumed with a Range from the break
    assert got == data
    assert calls[1]["Range"] == "bytes=65536-"
    assert "IfMatch" in calls[1]


def test_duplicate_arriving_while_the_first_runs_is_retried_later(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a job whose first delivery is still running (INPROGRESS record, deadline in the future)
    from lambdas.trace_processor import handler

    job = "busy-dup"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_1.1.pt.trace.json.gz"))
    record = sqs_record(job_event(job))
    assert handler.handler(sqs_event(record), LambdaContext())["batchItemFailures"] == []
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    item = ddb.scan(TableName="profstack-idempotency")["Items"][0]
    ddb.put_item(
        TableName="profstack-idempotency",
        Item={
            "id": item["id"],
            "status": {"S": "INPROGRESS"},
            "expiration": {"N": "9999999999"},
            "in_progress_expiration": {"N": "99999999999999"},  # ms: the other invocation is alive
        },
    )
    capsys.readouterr()
    # WHEN the duplicate arrives
    duplicate = sqs_record(job_event(job))
    response = handler.handler(sqs_event(duplicate), LambdaContext())
    # THEN it is handed back to SQS (retried after the visibility timeout), not processed twice
    assert response["batchItemFailures"] == [{"itemIdentifier": duplicate["messageId"]}]
    docs = structured(log_lines(capsys))
    assert any(d.get("reason") == "duplicate_in_progress" for d in docs)
    assert not any(d.get("message") == "job processed" for d in docs)


def test_perfetto_keys_follow_the_one_naming_plan(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a job with two files of rank 0 (a re-run: they overlap, so they are analysed apart) and rank 1
    from lambdas.trace_processor import handler

    job = "two-of-rank0"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_1.1.pt.trace.json.gz"))
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_2.2.pt.trace.json.gz"))
    upload(plane, traces_dir, RANK1, _tb_key(job, "algo-2_3.3.pt.trace.json.gz"))
    # WHEN processed
    assert handler.handler(sqs_event(sqs_record(job_event(job))), LambdaContext())["batchItemFailures"] == []
    # THEN the Perfetto keys are profstack.analysis.perfetto_plan's names, as `profstack analyze` writes them
    from profstack.analysis.perfetto_plan import perfetto_plan

    reports = layout.job_reports_prefix(USER, job)
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    expected = sorted(f"{reports}perfetto/{o.file_name}" for o in perfetto_plan(summary).outputs)
    assert expected == [
        f"{reports}perfetto/rank-0.0.trace.json.gz",
        f"{reports}perfetto/rank-0.1.trace.json.gz",
        f"{reports}perfetto/rank-1.trace.json.gz",
    ]
    assert plane.list_keys(f"{reports}perfetto/") == expected
    # AND the unreadable-files finding is the engine's alone (none invented here)
    assert [f["rule_id"] for f in summary["findings"]].count("UnreadableTraceFiles") == 0


def test_summary_json_is_written_last_as_the_deliverys_commit_marker(plane: DataPlane, traces_dir: Path) -> None:
    from lambdas.trace_processor import runtime

    # GIVEN a job, and every PutObject the processor makes, in order
    job = "commit-order"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_101.1796565600000.pt.trace.json.gz"))
    written: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        written.append(str(params["Key"]))

    s3 = runtime.clients().s3
    s3.meta.events.register("provide-client-params.s3.PutObject", record)
    try:
        # WHEN it is processed
        put_event(plane, job_event(job))
        assert drain(plane)[0] == {"batchItemFailures": []}
    finally:
        s3.meta.events.unregister("provide-client-params.s3.PutObject", record)
    # THEN report.html (and system.json) come before summary.json: a reader that finds the summary finds the report
    # of the same delivery (before: the summary was written first, visible without its report between the writes)
    reports = layout.job_reports_prefix(USER, job)
    assert f"{reports}summary.json" in written
    assert written.index(f"{reports}report.html") < written.index(f"{reports}summary.json")
    later = written[written.index(f"{reports}summary.json") + 1 :]
    assert not [k for k in later if k.startswith(reports) and k.rsplit("/", 1)[-1] in {"report.html", "system.json"}]


def test_a_file_with_more_events_than_a_timeline_is_made_from_gets_a_report_and_says_so(
    plane: DataPlane, traces_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lambdas.trace_processor import outputs

    # GIVEN the trimmed-timeline bound below this job's event count (a crafted .json.gz of 31.6 M tiny events
    # spent 426 s in the trim's three passes; the same rule, at a size a test can hold)
    monkeypatch.setattr(outputs, "TRIM_MAX_INPUT_EVENTS", 1_000)
    job = "many-events"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_101.1796565600000.pt.trace.json.gz"))
    # WHEN processed
    put_event(plane, job_event(job))
    assert drain(plane)[0] == {"batchItemFailures": []}
    # THEN the report is there, without a trimmed timeline, and the summary says why and what to do
    reports = layout.job_reports_prefix(USER, job)
    keys = plane.list_keys(reports)
    assert f"{reports}report.html" in keys
    assert not [k for k in keys if "/perfetto/" in k]
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    (warning,) = [w for w in summary["warnings"] if w["error_type"] == "TimelineNotTrimmed"]
    assert "--timeline-window" in warning["message"]


def test_a_job_with_more_files_than_the_cap_is_reported_on_its_first_files_and_says_so(
    plane: DataPlane, traces_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lambdas.trace_processor import runtime

    # GIVEN processing.max_files_per_job = 1 and a job with two trace files
    monkeypatch.setenv("MAX_FILES_PER_JOB", "1")
    runtime.reset()
    job = "many-files"
    register_training_job(plane, job)
    upload(plane, traces_dir, RANK0, _tb_key(job, "algo-1_101.1796565600000.pt.trace.json.gz"))
    upload(plane, traces_dir, RANK1, _tb_key(job, "algo-2_102.1796565600000.pt.trace.json.gz"))
    # WHEN processed
    put_event(plane, job_event(job))
    assert drain(plane)[0] == {"batchItemFailures": []}
    # THEN the first file by key is analysed, and the summary names the cap (before: no cap on files per job)
    reports = layout.job_reports_prefix(USER, job)
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert [i["name"].rsplit("/", 1)[-1] for i in summary["inputs"]] == ["algo-1_101.1796565600000.pt.trace.json.gz"]
    assert any(w.get("type") == "TooManyTraceFiles" for w in summary["warnings"])
    runtime.reset()


def test_an_mi300x_job_gets_a_complete_report_and_no_incomplete_email(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a job whose trace is a real MI300X ROCm trace (366 hipMemcpyAsync events write "bytes": "32768"; issue
    # #34: every ROCm job got a "partial report" e-mail)
    job = "mi300x-resnet"
    register_training_job(plane, job)
    upload(
        plane, traces_dir, "tracelens/mi300/resnet_act_checkpoint.json.gz", _tb_key(job, "algo-1_1.1.pt.trace.json.gz")
    )
    from lambdas.trace_processor import handler

    # WHEN the pipeline processes its completion
    response = handler.handler(sqs_event(sqs_record(job_event(job))), LambdaContext())
    # THEN the report is complete, the input is "ok", and no finding or e-mail line says it is incomplete
    assert response["batchItemFailures"] == []
    key = f"{layout.job_reports_prefix(USER, job)}summary.json"
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=key)["Body"].read())
    assert summary["complete"] is True
    assert [i["status"] for i in summary["inputs"]] == ["ok"]
    assert not any(f["rule_id"] == "UnreadableTraceFiles" for f in summary["findings"])
    assert summary["ranks"][0]["device"]["name"] == "AMD Instinct MI300X"
    (note,) = plane.notifications()
    assert "Incomplete" not in note["Message"]
    assert "partial" not in note["Subject"].lower()


def test_a_multi_gpu_xspace_job_gets_one_rank_and_one_timeline_per_device(plane: DataPlane) -> None:
    from tests.unit.analysis.test_xplane import _tf_host_gpu_space

    # GIVEN a job whose profile is a TensorFlow-style XSpace of one host with three GPUs (launches merged into
    # /host:CPU, named after their kernels, linked by correlation id), as TensorBoard's profile plugin writes it
    job = "tf-multi-gpu"
    register_training_job(plane, job)
    key = _tb_key(job, "plugins/profile/run1/host0.xplane.pb")
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key=key, Body=_tf_host_gpu_space(3))
    from lambdas.trace_processor import handler

    # WHEN the pipeline processes its completion
    response = handler.handler(sqs_event(sqs_record(job_event(job))), LambdaContext())
    # THEN the summary has one complete rank per device, as `profstack analyze` reads the same file (before: the
    # Lambda read the XSpace whole, one rank over three GPUs), and each device has its own trimmed timeline
    assert response["batchItemFailures"] == []
    reports = layout.job_reports_prefix(USER, job)
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert summary["complete"], summary["warnings"]
    assert [r["rank"] for r in summary["ranks"]] == [0, 1, 2]
    assert [s.rsplit("#", 1)[-1] for r in summary["ranks"] for s in r["sources"]] == [
        "/device:GPU:0",
        "/device:GPU:1",
        "/device:GPU:2",
    ]
    perfetto = sorted(k.rsplit("/", 1)[-1] for k in plane.list_keys(reports) if "/perfetto/" in k)
    assert perfetto == [f"rank-{r}.trace.json.gz" for r in (0, 1, 2)]
