"""`profstack reports reanalyze` and `backfill` against the real processor, on moto.

The CLI puts its request on the job queue; the processor's handler runs in-process on what arrives, as the SQS
event-source mapping would call it (tests/functional/test_trace_processor.py's harness). What is checked: a
re-analysis is analysed again although SageMaker's event was (idempotency holds for SageMaker's repeats and for
a repeated request), it files the job only where the job's own tags and role say, and backfill pages
ListTrainingJobs, skips what it should, and queues nothing until --apply.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from demo.lambda_harness import REGION, patched_environ
from profstack import layout
from profstack.cli import main
from profstack.cli.reanalyze import reanalysis_event
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
from tests.functional.test_trace_processor import drain, put_event

RANK0 = "hta/trace_filter/sampled_rank-0.json.gz"


class _CurrentStdout:
    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def plane(aws_credentials: None, capsys: pytest.CaptureFixture[str]) -> Iterator[DataPlane]:
    with mock_aws():
        data_plane = create_data_plane()
        with patched_environ(processor_environ(data_plane.topic_arn)):
            from lambdas.trace_processor import handler, runtime

            for log_handler in logging.getLogger(handler.logger.service).handlers:
                if isinstance(log_handler, logging.StreamHandler):
                    log_handler.stream = _CurrentStdout()
            runtime.reset()
            yield data_plane
            runtime.reset()


def _finished_job(plane: DataPlane, traces_dir: Path, job: str, *, user: str = USER) -> None:
    register_training_job(plane, job, user=user)
    plane.s3.upload_file(
        str(traces_dir / RANK0), TRACE_BUCKET, f"{layout.job_tensorboard_prefix(user, job)}rank0.pt.trace.json.gz"
    )


def _ended(job: str, end: datetime, status: str = "Completed") -> None:
    """The job ran for two hours and ended at `end`; moto compares ListTrainingJobs' time filters with naive
    datetimes, so its last-modified time is stored naive (UTC)."""
    from moto.sagemaker.models import sagemaker_backends

    from demo.lambda_harness import ACCOUNT

    emulate_run(job, start=end - timedelta(hours=2), end=end, status=status)
    fake = sagemaker_backends[ACCOUNT][REGION].training_jobs[job]
    fake.last_modified_time = end.replace(tzinfo=None)


def _report(job: str, user: str = USER) -> str:
    return layout.job_reports_prefix(user, job) + "report.html"


def _exists(plane: DataPlane, key: str) -> bool:
    return bool(plane.s3.list_objects_v2(Bucket=TRACE_BUCKET, Prefix=key).get("KeyCount"))


def _waiting(plane: DataPlane) -> int:
    attributes = plane.sqs.get_queue_attributes(
        QueueUrl=plane.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_reanalyze_runs_the_pipeline_again_under_the_jobs_own_owner(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN alice's finished job, reported once from SageMaker's event, and the report then lost
    job = "resnet-reanalyze-1"
    _finished_job(plane, traces_dir, job)
    put_event(plane, job_event(job))
    drain(plane)
    assert _exists(plane, _report(job))
    assert len(plane.notifications()) == 1
    plane.s3.delete_object(Bucket=TRACE_BUCKET, Key=_report(job))
    # AND SageMaker's own event repeated is answered from the idempotency record (nothing is redone)
    put_event(plane, job_event(job))
    drain(plane)
    assert not _exists(plane, _report(job))

    # WHEN an administrator asks for a dry run THEN nothing is queued, and the line says how to do it
    rc, out, _ = _cli(capsys, "reports", "reanalyze", job, "--queue-url", plane.queue_url, "--region", REGION)
    assert rc == 0
    assert out.startswith("dry run: would queue re-analysis reanalyze-")
    assert "rerun with --apply" in out
    assert _waiting(plane) == 0

    # WHEN it is applied THEN one request is queued, and the processor analyses the job again
    rc, out, _ = _cli(capsys, "reports", "reanalyze", job, "--apply", "--queue-url", plane.queue_url, "--json")
    assert rc == 0
    queued = json.loads(out)
    assert queued["queued"] is True
    assert queued["status"] == "Completed"
    assert _waiting(plane) == 1
    responses = drain(plane)
    assert responses
    assert not responses[0]["batchItemFailures"]
    # THEN the report is back under alice's reports, and the owner is not e-mailed a second time
    assert _exists(plane, _report(job))
    assert plane.notifications() == []


def test_one_request_delivered_twice_is_analysed_once(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN one re-analysis request of a reported job
    job = "resnet-reanalyze-2"
    _finished_job(plane, traces_dir, job)
    put_event(plane, job_event(job))
    drain(plane)
    described = plane.sagemaker.describe_training_job(TrainingJobName=job)
    body = json.dumps(reanalysis_event(described, "reanalyze-0123456789ab", datetime.now(UTC)))
    plane.sqs.send_message(QueueUrl=plane.queue_url, MessageBody=body)
    drain(plane)
    plane.s3.delete_object(Bucket=TRACE_BUCKET, Key=_report(job))
    # WHEN SQS delivers the same request again (at-least-once)
    plane.sqs.send_message(QueueUrl=plane.queue_url, MessageBody=body)
    drain(plane)
    # THEN it is answered from the idempotency record: the job is not analysed a second time for it
    assert not _exists(plane, _report(job))


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda e: e["detail"].update({"Tags": {"profstack:user": "alice"}}), "not_owned"),
        (lambda e: e["detail"].update({"TrainingJobStatus": "Failed"}), "status_mismatch"),
    ],
    ids=["claims-another-owner", "claims-another-status"],
)
def test_a_request_files_a_job_under_no_one_else(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str], tamper: Any, reason: str
) -> None:
    # GIVEN bob's finished job, and a re-analysis request edited to claim alice or another status
    job = "bob-secret-reanalyze"
    _finished_job(plane, traces_dir, job, user="bob")
    described = plane.sagemaker.describe_training_job(TrainingJobName=job)
    event = reanalysis_event(described, "reanalyze-aaaaaaaaaaaa", datetime.now(UTC))
    tamper(event)
    plane.sqs.send_message(QueueUrl=plane.queue_url, MessageBody=json.dumps(event))
    capsys.readouterr()
    # WHEN the processor takes it
    responses = drain(plane)
    # THEN the record fails with the reason SageMaker's forged events get, and nothing is filed anywhere
    assert responses[0]["batchItemFailures"]
    assert f'"reason":"{reason}"' in capsys.readouterr().out.replace(" ", "")
    assert not _exists(plane, "reports/")


def test_reanalyze_refuses_a_running_or_unknown_job(plane: DataPlane, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a job that is still training
    register_training_job(plane, "still-running")
    from moto.sagemaker.models import sagemaker_backends

    from demo.lambda_harness import ACCOUNT

    sagemaker_backends[ACCOUNT][REGION].training_jobs["still-running"].training_job_status = "InProgress"
    # WHEN asked to re-analyse it THEN one line says why not, and nothing is queued
    rc, _, err = _cli(capsys, "reports", "reanalyze", "still-running", "--apply", "--queue-url", plane.queue_url)
    assert rc == 2
    assert err.startswith("profstack: error: 'still-running' is InProgress: its report is written when it ends")
    # AND an unknown job, or a name SageMaker would not accept, is one line too
    rc, _, err = _cli(capsys, "reports", "reanalyze", "no-such-job", "--queue-url", plane.queue_url)
    assert rc == 2
    assert "no training job 'no-such-job'" in err
    rc, _, err = _cli(capsys, "reports", "reanalyze", "../bob", "--queue-url", plane.queue_url)
    assert rc == 2
    assert "is not a SageMaker training job name" in err
    assert _waiting(plane) == 0


def test_backfill_queues_only_unreported_jobs_of_the_window_after_apply(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN jobs that ended before the deployment: one never reported, one with a report, one Stopped, one too old,
    # and one that ended after the window
    now = datetime.now(UTC)
    jobs = {
        "old-unreported": (now - timedelta(days=10), "Completed"),
        "old-reported": (now - timedelta(days=9), "Completed"),
        "old-stopped": (now - timedelta(days=8), "Stopped"),
        "too-old": (now - timedelta(days=40), "Completed"),
        "after-deploy": (now - timedelta(hours=1), "Completed"),
    }
    for job, (end, status) in jobs.items():
        _finished_job(plane, traces_dir, job)
        _ended(job, end, status)
    plane.s3.put_object(
        Bucket=TRACE_BUCKET, Key=layout.job_reports_prefix(USER, "old-reported") + "summary.json", Body=b"{}"
    )
    window = ["--since", "30d", "--until", (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")]
    common = [*window, "--status", "Completed", "--queue-url", plane.queue_url, "--bucket", TRACE_BUCKET]

    # WHEN it runs as a dry run THEN it lists the window's jobs with what it would do, and queues nothing
    rc, out, _ = _cli(capsys, "reports", "backfill", *common)
    assert rc == 0
    lines = out.splitlines()
    assert any("old-unreported" in ln and ln.rstrip().endswith("queue") for ln in lines)
    assert any("old-reported" in ln and "skip: has a report" in ln for ln in lines)
    assert not any("too-old" in ln or "after-deploy" in ln or "old-stopped" in ln for ln in lines)
    assert lines[-1] == "dry run: would queue 1 of 2 job(s); rerun with --apply"
    assert _waiting(plane) == 0

    # WHEN applied THEN exactly the unreported job is queued, and the processor writes its report
    rc, out, _ = _cli(capsys, "reports", "backfill", *common, "--apply", "--rate", "10", "--json")
    assert rc == 0
    rows = {row["job"]: row for row in json.loads(out)["jobs"]}
    assert rows["old-unreported"]["request"].startswith("backfill-")
    assert rows["old-reported"]["request"] is None
    assert _waiting(plane) == 1
    drain(plane)
    assert _exists(plane, _report("old-unreported"))


def test_backfill_honours_the_tag_filter_and_pages(
    plane: DataPlane, traces_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from tests.conftest import EXAMPLE_CONFIG

    # GIVEN a deployment that processes only jobs tagged profstack:profile=true, and 130 jobs (two pages)
    data = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    data["processing"]["job_tag_filter"] = {"key": "profstack:profile", "value": "true"}
    config = tmp_path / "filtered.yaml"
    config.write_text(yaml.safe_dump(data))
    now = datetime.now(UTC)
    for i in range(130):
        job = f"sweep-{i:03d}"
        register_training_job(plane, job, tensorboard=False)
        _ended(job, now - timedelta(days=2))
    arn = plane.sagemaker.describe_training_job(TrainingJobName="sweep-007")["TrainingJobArn"]
    plane.sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": "profstack:profile", "Value": "true"}])
    # WHEN backfill looks at the window
    rc, out, _ = _cli(
        capsys,
        "reports", "backfill", "--since", "7d", "--until", "1d", "--include-reported", "--config", str(config),
        "--queue-url", plane.queue_url, "--region", REGION, "--json",
    )  # fmt: skip
    # THEN every job of both pages was judged, and only the tagged one would be queued
    assert rc == 0
    rows = json.loads(out)["jobs"]
    assert len(rows) == 130
    assert [r["job"] for r in rows if r["action"] == "queue"] == ["sweep-007"]
    assert {r["action"] for r in rows if r["job"] != "sweep-007"} == {
        "skip: no tag profstack:profile=true (processing.job_tag_filter)"
    }


def test_backfill_defaults_to_the_jobs_before_the_deployment(
    plane: DataPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a deployed processing stack (its creation time is when the pipeline started seeing jobs)
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    template = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}
    cloudformation.create_stack(StackName="profstack-processing", TemplateBody=json.dumps(template))
    # WHEN backfill runs without --until THEN its window ends when that stack was created
    rc, out, _ = _cli(
        capsys, "reports", "backfill", "--since", "30d", "--include-reported", "--queue-url", plane.queue_url, "--json"
    )
    assert rc == 0
    until = datetime.fromisoformat(json.loads(out)["until"])
    assert abs((until - datetime.now(UTC)).total_seconds()) < 120
