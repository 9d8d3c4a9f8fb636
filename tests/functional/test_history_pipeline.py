"""Across jobs through the real handler on moto: two jobs of one family (tag profstack:family) -> history rows
under history/, cost in the summary, a Regression finding naming the baseline job, in the report, the
metrics and the e-mail."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from demo.lambda_harness import patched_environ, set_emulated_training_times
from demo.local_emf import publish_emf
from profstack import layout
from profstack.history.rows import from_jsonl
from profstack.jobs import metric_names as m
from tests.functional.processing_support import (
    OUTPUT_BUCKET,
    TRACE_BUCKET,
    USER,
    DataPlane,
    create_data_plane,
    job_event,
    processor_environ,
    user_role_arn,
)
from tests.functional.test_trace_processor import _CurrentStdout, drain, log_lines, put_event, upload

HISTORY_ENV = {"HISTORY_ENABLED": "true", "FAMILY_TAG_KEY": "profstack:family", "REGRESSION_THRESHOLDS": "{}"}


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


def _job(plane: DataPlane, traces_dir: Path, name: str, trace: str, end: datetime) -> None:
    plane.sagemaker.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "pytorch-training:2.5-gpu-py311", "TrainingInputMode": "File"},
        RoleArn=user_role_arn(USER),
        OutputDataConfig={"S3OutputPath": f"s3://{OUTPUT_BUCKET}/output"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        TensorBoardOutputConfig={"S3OutputPath": f"s3://{TRACE_BUCKET}/tensorboard/{USER}/"},
        Tags=[{"Key": "profstack:user", "Value": USER}, {"Key": "profstack:family", "Value": "resnet50"}],
    )
    set_emulated_training_times(name, start=end - timedelta(hours=1), end=end)
    upload(plane, traces_dir, trace, f"{layout.job_tensorboard_prefix(USER, name)}algo-1_7.1.pt.trace.json.gz")


def _summary(plane: DataPlane, job: str) -> dict[str, Any]:
    key = f"{layout.job_reports_prefix(USER, job)}summary.json"
    return dict(json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=key)["Body"].read()))


def test_the_second_job_of_a_family_is_compared_with_the_first(
    plane: DataPlane, traces_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN two jobs of family resnet50, an hour each on 2 x ml.p4d.24xlarge: with 4 DataLoader workers, then 0
    end = datetime.now(UTC).replace(microsecond=0)
    _job(
        plane,
        traces_dir,
        "resnet50-w4",
        "kineto_tb_plugin/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
        end - timedelta(hours=3),
    )
    put_event(plane, job_event("resnet50-w4"))
    assert drain(plane) == [{"batchItemFailures": []}]
    _job(
        plane,
        traces_dir,
        "resnet50-w0",
        "kineto_tb_plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
        end,
    )
    put_event(plane, job_event("resnet50-w0"))
    capsys.readouterr()
    # WHEN the second job-completed event is processed
    assert drain(plane) == [{"batchItemFailures": []}]
    lines = log_lines(capsys)

    # THEN both jobs have history rows in their date/user partition
    keys = plane.list_keys("history/")
    for table in ("jobs", "ranks", "kernels"):
        assert f"history/{table}/dt={end.date().isoformat()}/user={USER}/resnet50-w0.jsonl" in keys
    row = from_jsonl(
        plane.s3.get_object(
            Bucket=TRACE_BUCKET, Key=f"history/jobs/dt={end.date().isoformat()}/user={USER}/resnet50-w0.jsonl"
        )["Body"].read()
    )[0]
    assert row["family"] == "resnet50"
    assert row["family_source"] == "tag"
    assert row["baseline_jobs"] == "resnet50-w4"
    # AND the summary carries the cost from DescribeTrainingJob and the pinned prices
    summary = _summary(plane, "resnet50-w0")
    assert summary["cost"]["gpu_hours"] == 16.0
    assert summary["cost"]["total_usd"] == pytest.approx(75.38, abs=0.01)
    assert row["total_usd"] == summary["cost"]["total_usd"]
    # AND a Regression finding that names the baseline job
    (regression,) = [f for f in summary["findings"] if f["rule_id"] == "Regression"]
    assert regression["evidence"]["baseline_jobs"] == ["resnet50-w4"]
    assert "dataloader_share_pct" in regression["evidence"]["regressed"]
    assert not [f for f in _summary(plane, "resnet50-w4")["findings"] if f["rule_id"] == "Regression"]
    # AND the report shows the regression and the cost
    html = (
        plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{layout.job_reports_prefix(USER, 'resnet50-w0')}report.html")[
            "Body"
        ]
        .read()
        .decode()
    )
    assert "Regression" in html
    assert "resnet50-w4" in html
    assert "GPU cost" in html
    # AND the e-mail says it, with the cost lines
    notes = plane.notifications()
    message = next(n["Message"] for n in notes if "resnet50-w0" in n["Subject"])
    assert "Regression: regressed against family 'resnet50'" in message
    assert "Baseline jobs: resnet50-w4" in message
    assert "GPU cost: about $75.38 for 16.0 GPU-hours" in message
    assert "of GPU time" in message
    # AND the metrics
    assert publish_emf(lines, plane.cloudwatch) > 0
    names = {x["MetricName"] for x in plane.cloudwatch.list_metrics(Namespace=m.NAMESPACE)["Metrics"]}
    assert {m.REGRESSIONS, m.GPU_COST_USD, m.LOST_GPU_COST_USD, m.GPU_HOURS} <= names


def test_history_run_again_on_a_job_does_not_make_it_its_own_baseline(plane: DataPlane, traces_dir: Path) -> None:
    # GIVEN a processed job of the family (its rows are in history/)
    end = datetime.now(UTC).replace(microsecond=0)
    trace = "kineto_tb_plugin/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    _job(plane, traces_dir, "resnet50-a", trace, end)
    put_event(plane, job_event("resnet50-a"))
    assert drain(plane) == [{"batchItemFailures": []}]
    first = _summary(plane, "resnet50-a")
    # WHEN the history step runs again on it (a retry after a later step failed, or the fan-out aggregate)
    from lambdas.trace_processor import runtime
    from lambdas.trace_processor.history import record_history
    from lambdas.trace_processor.job import JobContext

    ctx = JobContext("resnet50-a", "Completed", USER, TRACE_BUCKET, end.timestamp(), None)
    again = record_history(runtime.clients(), ctx, json.loads(json.dumps(first)))
    # THEN its own rows are not its baseline: no Regression finding, the same cost, rows rewritten in place
    assert not [f for f in again["findings"] if f["rule_id"] == "Regression"]
    assert again["cost"] == first["cost"]
    assert not [w for w in again.get("warnings", []) if w["error_type"] == "HistoryFailed"]
    assert len([k for k in plane.list_keys("history/jobs/") if k.endswith("/resnet50-a.jsonl")]) == 1
