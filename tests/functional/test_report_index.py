"""The per-user report index (issue 36, item 2) through the real handler on moto, and its conditional writes under
concurrent reports: reports/<user>/index.json and index.html after each report, no lost rows, linked from every
report and e-mail, each user's index holding only that user's jobs."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from moto import mock_aws

from demo.lambda_harness import patched_environ
from lambdas.trace_processor import report_index
from profstack import layout
from profstack.report import index as idx
from tests.functional.processing_support import (
    TRACE_BUCKET,
    DataPlane,
    create_data_plane,
    emulate_run,
    job_event,
    processor_environ,
    register_training_job,
    user_role_arn,
)
from tests.functional.test_trace_processor import _CurrentStdout, drain, put_event, upload

HISTORY_ENV = {"HISTORY_ENABLED": "true", "FAMILY_TAG_KEY": "profstack:family", "REGRESSION_THRESHOLDS": "{}"}
W4 = "kineto_tb_plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
W0 = "kineto_tb_plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"


@pytest.fixture
def plane(aws_credentials: None) -> Iterator[DataPlane]:
    with mock_aws():
        data_plane = create_data_plane()
        with patched_environ(processor_environ(data_plane.topic_arn, **HISTORY_ENV)):
            from lambdas.trace_processor import handler, runtime

            for log_handler in logging.getLogger(handler.logger.service).handlers:
                if isinstance(log_handler, logging.StreamHandler):
                    log_handler.stream = _CurrentStdout()
            runtime.reset()
            yield data_plane
            runtime.reset()


def _run_job(plane: DataPlane, traces_dir: Path, name: str, trace: str, end: datetime, *, user: str = "alice") -> None:
    register_training_job(plane, name, user=user)
    emulate_run(name, start=end - timedelta(hours=1), end=end)
    upload(plane, traces_dir, trace, f"{layout.job_tensorboard_prefix(user, name)}algo-1_7.1.pt.trace.json.gz")
    put_event(plane, job_event(name, user=user))
    assert drain(plane) == [{"batchItemFailures": []}]


def _get(plane: DataPlane, key: str) -> bytes:
    return bytes(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=key)["Body"].read())


def _index(plane: DataPlane, user: str) -> list[dict[str, Any]]:
    return idx.parse_rows(_get(plane, f"{layout.user_reports_prefix(user)}index.json"))


def test_each_report_rewrites_its_owners_index_with_every_job_newest_first(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN two of alice's jobs of one family (SageMaker's default names) and one of bob's, an hour each
    end = datetime.now(UTC).replace(microsecond=0)
    first, second = "resnet-2026-12-01-08-00-00-000", "resnet-2026-12-02-08-00-00-000"
    _run_job(plane, traces_dir, first, W4, end - timedelta(days=1))
    # WHEN each job's report is written
    _run_job(plane, traces_dir, second, W0, end)
    _run_job(plane, traces_dir, "bob-job-1", W4, end, user="bob")

    # THEN alice's index.json holds both of her jobs, newest first, with the numbers of their summaries
    rows = _index(plane, "alice")
    assert [r["job"] for r in rows] == [second, first]
    summary = json.loads(_get(plane, f"{layout.job_reports_prefix('alice', second)}summary.json"))
    newest = rows[0]
    assert newest["family"] == "resnet"
    assert newest["status"] == "Completed"
    assert newest["duration_s"] == 3600.0
    assert newest["cost_usd"] == summary["cost"]["total_usd"]
    assert newest["step_p50_us"] == pytest.approx(summary["ranks"][0]["steps"]["p50_us"], rel=1e-3)
    assert newest["top_finding"]["rule_id"] == summary["findings"][0]["rule_id"]
    # AND bob's index holds only bob's job, alice's none of his
    assert [r["job"] for r in _index(plane, "bob")] == ["bob-job-1"]
    # AND the page links each report and charts the family's trend (inline SVG, no script)
    page = _get(plane, "reports/alice/index.html").decode()
    assert f'href="{first}/report.html"' in page
    assert f'href="{second}/report.html"' in page
    assert "bob-job-1" not in page
    assert page.count('<svg class="trend"') == 2  # step time and GPU idle of family resnet
    assert "<script" not in page
    # AND every report and e-mail links the owner's index
    report = _get(plane, f"{layout.job_reports_prefix('alice', second)}report.html").decode()
    assert 'href="../index.html"' in report
    messages = [n["Message"] for n in plane.notifications()]
    assert len(messages) == 3
    # (issue 45: as things that open for the owner, never an s3:// URI alone)
    assert sum("All your reports: profstack reports index --user alice" in m for m in messages) == 2
    assert sum("All your reports: profstack reports index --user bob" in m for m in messages) == 1
    assert all("prefix=reports%2Falice%2Findex.html" in m for m in messages if "--user alice" in m)


def test_a_lost_index_is_rebuilt_from_the_job_row_files(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN one of alice's jobs reported, then her index.json deleted (or overwritten with garbage)
    end = datetime.now(UTC).replace(microsecond=0)
    _run_job(plane, traces_dir, "job-a", W4, end - timedelta(hours=2))
    plane.s3.put_object(Bucket=TRACE_BUCKET, Key="reports/alice/index.json", Body=b"{not json")
    # WHEN her next job is reported
    _run_job(plane, traces_dir, "job-b", W0, end)
    # THEN the index has both jobs: the first came back from reports/alice/job-a/index-row.json
    assert [r["job"] for r in _index(plane, "alice")] == ["job-b", "job-a"]


# ------------------------------------------------------------------------------------------ concurrent writers


def _row(job: str, hours_ago: float) -> dict[str, Any]:
    ended = datetime(2026, 12, 4, 12, tzinfo=UTC) - timedelta(hours=hours_ago)
    return idx.index_row({"findings": [], "ranks": []}, job=job, status="Completed", ended_at=ended)


class _Interleaved:
    """An S3 client that runs `other()` once, just before the first `put_object` of `key`: another report's
    whole index update lands between this writer's read and its write."""

    def __init__(self, s3: Any, key: str, other: Callable[[], None]) -> None:
        self._s3, self._key, self._other, self.puts = s3, key, other, 0

    def put_object(self, **kwargs: Any) -> Any:
        if kwargs["Key"] == self._key:
            self.puts += 1
            if self.puts == 1:
                self._other()
        return self._s3.put_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)


def test_two_concurrent_writers_lose_no_row(plane: DataPlane) -> None:
    # GIVEN an index with one job, and two reports updating it at once: B commits between A's read and A's write
    report_index.commit_row(plane.s3, TRACE_BUCKET, "alice", _row("job-old", 5))

    def writer_b() -> None:
        report_index.commit_row(plane.s3, TRACE_BUCKET, "alice", _row("job-b", 1))

    a_client = _Interleaved(plane.s3, "reports/alice/index.json", writer_b)
    # WHEN A writes
    rows, _ = report_index.commit_row(
        cast(Any, a_client), TRACE_BUCKET, "alice", _row("job-a", 2), sleep=lambda _: None
    )
    # THEN A's first (conditional) write was refused, it read B's index again, and no row is lost
    assert a_client.puts == 2
    assert [r["job"] for r in rows] == ["job-b", "job-a", "job-old"]
    assert [r["job"] for r in _index(plane, "alice")] == ["job-b", "job-a", "job-old"]


def test_an_unconditional_writer_would_have_lost_the_row(plane: DataPlane) -> None:
    # GIVEN the same interleaving against a writer without the condition (what the test above guards against)
    report_index.commit_row(plane.s3, TRACE_BUCKET, "alice", _row("job-old", 5))

    def writer_b() -> None:
        report_index.commit_row(plane.s3, TRACE_BUCKET, "alice", _row("job-b", 1))

    class _Unconditional(_Interleaved):
        def put_object(self, **kwargs: Any) -> Any:
            kwargs.pop("IfMatch", None)
            kwargs.pop("IfNoneMatch", None)
            return super().put_object(**kwargs)

    report_index.commit_row(
        cast(Any, _Unconditional(plane.s3, "reports/alice/index.json", writer_b)),
        TRACE_BUCKET,
        "alice",
        _row("job-a", 2),
    )
    # THEN B's row is gone: the condition is what keeps it
    assert [r["job"] for r in _index(plane, "alice")] == ["job-a", "job-old"]


def test_the_last_page_written_shows_the_last_index_committed(plane: DataPlane) -> None:
    # GIVEN A committed its row, then B committed and wrote its page before A wrote its (older) page
    rows_a, etag_a = report_index.commit_row(plane.s3, TRACE_BUCKET, "alice", _row("job-a", 2))

    def writer_b() -> None:
        rows_b, etag_b = report_index.commit_row(plane.s3, TRACE_BUCKET, "alice", _row("job-b", 1))
        report_index.write_page(plane.s3, TRACE_BUCKET, "alice", rows_b, etag_b)

    a_client = _Interleaved(plane.s3, "reports/alice/index.html", writer_b)
    # WHEN A writes its page from the rows it committed
    report_index.write_page(cast(Any, a_client), TRACE_BUCKET, "alice", rows_a, etag_a)
    # THEN A saw index.json change after its page went out and rendered B's rows: both jobs are on the page
    page = _get(plane, "reports/alice/index.html").decode()
    assert a_client.puts == 2
    assert 'href="job-a/report.html"' in page
    assert 'href="job-b/report.html"' in page


def test_a_writer_that_keeps_losing_fails_the_record_for_a_retry(plane: DataPlane) -> None:
    # GIVEN an index that another writer changes before every one of this writer's attempts
    report_index.commit_row(plane.s3, TRACE_BUCKET, "alice", _row("job-old", 5))
    counter = iter(range(1000))

    class _AlwaysRaced:
        def __init__(self, s3: Any) -> None:
            self._s3 = s3

        def put_object(self, **kwargs: Any) -> Any:
            if kwargs["Key"] == "reports/alice/index.json":
                report_index.commit_row(self._s3, TRACE_BUCKET, "alice", _row(f"other-{next(counter)}", 3))
            return self._s3.put_object(**kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._s3, name)

    # WHEN it tries THEN after MAX_ATTEMPTS it raises (the record is retried), and the others' rows are all there
    with pytest.raises(report_index.IndexConflictError):
        report_index.commit_row(
            cast(Any, _AlwaysRaced(plane.s3)), TRACE_BUCKET, "alice", _row("job-a", 2), sleep=lambda _: None
        )
    assert len(_index(plane, "alice")) == 1 + report_index.MAX_ATTEMPTS


# ------------------------------------------------------------------------------------------ the hook's faults


class _Failing:
    """An S3 client whose GetObject of index.json fails with `exc` (everything else is moto's)."""

    def __init__(self, s3: Any, exc: Exception) -> None:
        self._s3, self._exc = s3, exc

    def get_object(self, **kwargs: Any) -> Any:
        if kwargs["Key"].endswith("/index.json"):
            raise self._exc
        return self._s3.get_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)


def _ctx(job: str = "job-a") -> Any:
    from lambdas.trace_processor.job import JobContext

    return JobContext(job, "Completed", "alice", TRACE_BUCKET, 1_796_000_000.0, None)


def _client_error(code: str) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": code}}, "GetObject")


@pytest.mark.parametrize("code", ["SlowDown", "ServiceUnavailable", "InternalError"])
def test_a_transient_fault_of_the_index_fails_the_record_for_a_retry(plane: DataPlane, code: str) -> None:
    from botocore.exceptions import ClientError

    from profstack.history.family import FamilyRules

    # GIVEN S3 throttling or failing the index read WHEN the hook runs THEN it raises: the record is retried
    with pytest.raises(ClientError):
        report_index.update_index(
            cast(Any, _Failing(plane.s3, _client_error(code))), _ctx(), {}, describe=None, rules=FamilyRules()
        )


@pytest.mark.parametrize("exc", [_client_error("AccessDenied"), ValueError("a defect")], ids=["denied", "defect"])
def test_any_other_fault_of_the_index_is_logged_and_the_job_goes_on(plane: DataPlane, exc: Exception) -> None:
    from profstack.history.family import FamilyRules

    # GIVEN an index read that is refused, or a defect WHEN the hook runs THEN it returns None (the report is out)
    assert (
        report_index.update_index(cast(Any, _Failing(plane.s3, exc)), _ctx(), {}, describe=None, rules=FamilyRules())
        is None
    )
    # AND the job's own row file was still written, so a later rebuild finds it
    assert "reports/alice/job-a/index-row.json" in plane.list_keys("reports/alice/")


def test_the_hook_writes_row_index_and_page_and_names_the_page(plane: DataPlane) -> None:
    from profstack.history.family import FamilyRules

    describe = {"TrainingStartTime": datetime(2026, 12, 1, 8, tzinfo=UTC), "TrainingEndTime": "2026-12-01T09:30:00Z"}
    uri = report_index.update_index(
        plane.s3, _ctx("bert-2026-12-01-08-00-00-000"), {}, describe=describe, rules=FamilyRules()
    )
    assert uri == f"s3://{TRACE_BUCKET}/reports/alice/index.html"
    (row,) = _index(plane, "alice")
    assert row["duration_s"] == 5400.0
    assert row["family"] == "bert"


def test_with_history_on_the_family_is_the_jobs_family_tag_as_in_the_history_rows(
    plane: DataPlane, traces_dir: Path
) -> None:
    # GIVEN a job whose name matches no job-name rule, tagged profstack:family=resnet50 (history is on here)
    end = datetime.now(UTC).replace(microsecond=0)
    plane.sagemaker.create_training_job(
        TrainingJobName="my-run",
        AlgorithmSpecification={"TrainingImage": "pytorch-training:2.5-gpu-py311", "TrainingInputMode": "File"},
        RoleArn=user_role_arn("alice"),
        OutputDataConfig={"S3OutputPath": f"s3://{TRACE_BUCKET}/output"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "VolumeSizeInGB": 100},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        TensorBoardOutputConfig={"S3OutputPath": f"s3://{TRACE_BUCKET}/tensorboard/alice/"},
        Tags=[{"Key": "profstack:user", "Value": "alice"}, {"Key": "profstack:family", "Value": "resnet50"}],
    )
    emulate_run("my-run", start=end - timedelta(hours=1), end=end)
    upload(plane, traces_dir, W4, f"{layout.job_tensorboard_prefix('alice', 'my-run')}algo-1_7.1.pt.trace.json.gz")
    # WHEN its report is written
    put_event(plane, job_event("my-run"))
    assert drain(plane) == [{"batchItemFailures": []}]
    # THEN its index row carries the tag's family, as its history row does
    (row,) = _index(plane, "alice")
    assert row["family"] == "resnet50"
    history = [k for k in plane.list_keys("history/jobs/") if k.endswith("/my-run.jsonl")]
    assert json.loads(_get(plane, history[0]).splitlines()[0])["family"] == "resnet50"
