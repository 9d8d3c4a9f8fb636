"""Issue 11 item 4: a transient fault is retried (the SQS record fails), never stored as a final partial
report; a file corrupt for good gives a partial report that names it everywhere. Through moto."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from demo.lambda_harness import LambdaContext, sqs_event, sqs_record
from profstack import layout
from tests.functional.processing_support import TRACE_BUCKET, USER, DataPlane, job_event, register_training_job
from tests.functional.test_trace_processor import RANK0, RANK1, log_lines, plane, structured

__all__ = ["plane"]  # the moto data plane fixture, shared with test_trace_processor

GOOD_KEY = "algo-1_1.1.pt.trace.json.gz"
FLAKY_KEY = "algo-2_2.2.pt.trace.json.gz"


def _tb_key(job: str, name: str) -> str:
    return f"{layout.job_tensorboard_prefix(USER, job)}{name}"


def _two_file_job(plane: DataPlane, traces_dir: Path, job: str) -> None:
    register_training_job(plane, job)
    plane.s3.upload_file(str(traces_dir / RANK0), TRACE_BUCKET, _tb_key(job, GOOD_KEY))
    plane.s3.upload_file(str(traces_dir / RANK1), TRACE_BUCKET, _tb_key(job, FLAKY_KEY))


def _error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject"
    )


class _Dropping(io.RawIOBase):
    """A GetObject body that delivers at most 8 KiB per read and raises a connection reset after `good`
    reads."""

    def __init__(self, body: Any, good: int) -> None:
        self.body, self.good, self.reads = body, good, 0

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        if self.reads > self.good:
            raise ConnectionResetError("peer reset")
        return bytes(self.body.read(min(n, 8192) if n >= 0 else 8192))

    def close(self) -> None:
        self.body.close()


def _failures(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """The structured failure log lines."""
    return [d for d in structured(log_lines(capsys)) if d.get("level") == "ERROR" and d.get("reason")]


def _idempotency_statuses() -> list[str]:
    items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName="profstack-idempotency")["Items"]
    return [i["status"]["S"] for i in items]


def _handle(job: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from lambdas.trace_processor import handler

    record = sqs_record(job_event(job))
    return handler.handler(sqs_event(record), LambdaContext()), record


@pytest.mark.parametrize(
    ("code", "status"),
    [("SlowDown", 503), ("PreconditionFailed", 412), ("InvalidRange", 416), ("AccessDenied", 403)],
)
def test_a_failed_read_of_one_file_fails_the_record_and_stores_no_report(  # noqa: PLR0917 - fixtures
    plane: DataPlane,
    traces_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    code: str,
    status: int,
) -> None:
    # GIVEN a two-file job whose second file S3 refuses to serve (throttled, replaced, 416, denied)
    from lambdas.trace_processor import runtime

    job = f"flaky-{status}"
    _two_file_job(plane, traces_dir, job)
    s3 = runtime.clients().s3
    real_get = s3.get_object
    failing = {"on": True}

    def get_object(**kwargs: Any) -> Any:
        if failing["on"] and kwargs["Key"].endswith(FLAKY_KEY):
            raise _error(code, status)
        return real_get(**kwargs)

    monkeypatch.setattr(s3, "get_object", get_object)
    # WHEN processed
    response, record = _handle(job)
    # THEN the record is handed back to SQS with reason io and the S3 code, and nothing final is stored:
    # no summary, no report, no e-mail, no completed idempotency record
    assert response["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    assert [(d["reason"], d["error_code"]) for d in _failures(capsys)] == [("io", code)]
    assert plane.list_keys(f"{layout.job_reports_prefix(USER, job)}summary") == []
    assert plane.notifications() == []
    assert "COMPLETED" not in _idempotency_statuses()
    # AND WHEN SQS redelivers it after the fault has passed THEN the report is complete, with both files
    failing["on"] = False
    response, _ = _handle(job)
    assert response["batchItemFailures"] == []
    summary = json.loads(
        plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{layout.job_reports_prefix(USER, job)}summary.json")[
            "Body"
        ].read()
    )
    assert [i["status"] for i in summary["inputs"]] == ["ok", "ok"]
    assert len(plane.notifications()) == 1


def test_an_object_replaced_during_a_resume_fails_the_record(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a one-file job whose connection drops after the first chunk, and the object was replaced (412)
    from lambdas.trace_processor import runtime

    job = "replaced"
    register_training_job(plane, job)
    plane.s3.upload_file(str(traces_dir / RANK0), TRACE_BUCKET, _tb_key(job, GOOD_KEY))
    s3 = runtime.clients().s3
    real_get = s3.get_object

    def get_object(**kwargs: Any) -> Any:
        if "Range" in kwargs:
            raise _error("PreconditionFailed", 412)
        response = real_get(**kwargs)
        response["Body"] = _Dropping(response["Body"], good=1)
        return response

    monkeypatch.setattr(s3, "get_object", get_object)
    # WHEN processed THEN the record fails with reason io (not corrupt_trace), and no report is stored
    response, record = _handle(job)
    assert response["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    assert [d["reason"] for d in _failures(capsys)] == ["io"]
    assert plane.list_keys(layout.job_reports_prefix(USER, job)) == []


def test_a_stream_dead_beyond_the_resume_budget_is_io_not_a_corrupt_trace(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a one-file job whose every connection dies before delivering a byte after the first chunk
    from lambdas.trace_processor import runtime

    job = "dead-stream"
    register_training_job(plane, job)
    plane.s3.upload_file(str(traces_dir / RANK0), TRACE_BUCKET, _tb_key(job, GOOD_KEY))
    s3 = runtime.clients().s3
    real_get = s3.get_object

    def get_object(**kwargs: Any) -> Any:
        response = real_get(**kwargs)
        response["Body"] = _Dropping(response["Body"], good=0 if "Range" in kwargs else 1)
        return response

    monkeypatch.setattr(s3, "get_object", get_object)
    # WHEN processed THEN the record fails with reason io, the error names the resume budget
    response, record = _handle(job)
    assert response["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    (failure,) = _failures(capsys)
    assert failure["reason"] == "io"
    assert "in a row" in failure["error"]
    assert "COMPLETED" not in _idempotency_statuses()


def _source(plane: DataPlane, data: bytes, s3: Any) -> Any:
    from lambdas.trace_processor.aws import S3Object, S3TraceSource

    plane.s3.put_object(Bucket=TRACE_BUCKET, Key="traces/alice/j/x.pt.trace.json.gz", Body=data)
    return S3TraceSource(s3, S3Object(TRACE_BUCKET, "traces/alice/j/x.pt.trace.json.gz", len(data)), buffer_size=65536)


def test_a_connection_dropped_exactly_at_the_end_of_the_object_is_the_end(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a connection that delivers every byte and then resets
    data = (traces_dir / RANK0).read_bytes()
    s3 = boto3.client("s3", region_name="us-east-1")
    real_get = s3.get_object
    calls: list[dict[str, Any]] = []

    class AllThenReset(io.RawIOBase):
        def __init__(self, body: Any) -> None:
            self.body = body

        def read(self, n: int = -1) -> bytes:
            chunk = bytes(self.body.read(n))
            if not chunk:
                raise ConnectionResetError("reset after the last byte")
            return chunk

    def get_object(**kwargs: Any) -> Any:
        calls.append(kwargs)
        response = real_get(**kwargs)
        if len(calls) == 1:
            response["Body"] = AllThenReset(response["Body"])
        return response

    s3.get_object = get_object  # type: ignore[method-assign]
    source = _source(plane, data, s3)
    # WHEN read through
    with source.open() as fh:
        got = b"".join(iter(lambda: fh.read(65536), b""))
    # THEN the file is whole, and no `Range: bytes=<size>-` was sent (S3 answers it with 416)
    assert got == data
    assert [c.get("Range") for c in calls] == [None]
    assert source.failure is None


def test_the_resume_budget_resets_after_progress(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a connection that drops after every single chunk, far more often than the budget in a row
    from lambdas.trace_processor.aws import MAX_RESUMES

    data = (traces_dir / RANK0).read_bytes()
    s3 = boto3.client("s3", region_name="us-east-1")
    real_get = s3.get_object
    calls: list[dict[str, Any]] = []

    def get_object(**kwargs: Any) -> Any:
        calls.append(kwargs)
        response = real_get(**kwargs)
        response["Body"] = _Dropping(response["Body"], good=1)
        return response

    s3.get_object = get_object  # type: ignore[method-assign]
    source = _source(plane, data, s3)
    # WHEN read through in 64 KiB chunks
    with source.open() as fh:
        got = b"".join(iter(lambda: fh.read(65536), b""))
    # THEN every byte arrives: each drop after progress starts a fresh budget
    assert got == data
    assert len(calls) > 2 * MAX_RESUMES
    assert source.failure is None


def test_a_file_corrupt_for_good_is_named_in_summary_page_and_email(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a job with one good trace and one truncated for good
    job = "half-bad-named"
    register_training_job(plane, job)
    plane.s3.upload_file(str(traces_dir / RANK0), TRACE_BUCKET, _tb_key(job, GOOD_KEY))
    good = (traces_dir / RANK1).read_bytes()
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key=_tb_key(job, FLAKY_KEY), Body=good[: len(good) // 3])
    # WHEN processed
    response, _ = _handle(job)
    # THEN a partial report: the summary, the page and the e-mail name the bad file
    assert response["batchItemFailures"] == []
    reports = layout.job_reports_prefix(USER, job)
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert summary["complete"] is False
    (unreadable,) = [f for f in summary["findings"] if f["rule_id"] == "UnreadableTraceFiles"]
    assert any(name.endswith(FLAKY_KEY) for name in unreadable["evidence"]["files"])
    html = plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}report.html")["Body"].read().decode()
    assert FLAKY_KEY in html
    (note,) = plane.notifications()
    assert FLAKY_KEY in note["Message"]
    assert "partial" in note["Subject"].lower() or "incomplete" in note["Message"].lower()


def test_failure_reasons_are_a_metric_dimension(plane: DataPlane, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a malformed message and a job SageMaker does not know
    from lambdas.trace_processor import handler

    bad = sqs_record("{not json")
    missing = sqs_record(job_event("no-such-job"))
    # WHEN handled
    handler.handler(sqs_event(bad, missing), LambdaContext())
    # THEN the failure count is published per reason (EMF, dimension FailureReason)
    from profstack.jobs import metric_names as m

    docs = structured(log_lines(capsys))
    emf = [d for d in docs if "_aws" in d and m.PROCESSING_FAILURES in d]
    per_reason = [d for d in emf if m.REASON_DIMENSION in d["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]]
    reasons = sorted(str(d[m.REASON_DIMENSION]) for d in per_reason)
    assert reasons == ["job_not_found", "malformed_event"]


def test_an_idempotency_store_failure_has_its_own_reason(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the idempotency table is gone (or DynamoDB fails)
    boto3.client("dynamodb", region_name="us-east-1").delete_table(TableName="profstack-idempotency")
    register_training_job(plane, "store-job")
    # WHEN a job is processed THEN the record fails with reason idempotency_store
    response, record = _handle("store-job")
    assert response["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    assert [d["reason"] for d in _failures(capsys)] == ["idempotency_store"]
