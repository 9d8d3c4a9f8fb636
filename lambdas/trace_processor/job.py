"""What a job is to the processor: its name, owner, status and where its outputs go (`JobContext`),
built from the event and DescribeTrainingJob; and what happened to it (`Outcome`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import S3Location, S3UriError, parse_s3_uri
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.errors import JobNotFoundError
from lambdas.trace_processor.events import TrainingJobStateChange
from profstack import layout

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


@dataclass(frozen=True)
class JobContext:
    job: str
    status: str
    user: str
    trace_bucket: str
    end_time_s: float
    tensorboard: S3Location | None  # <TensorBoardOutputConfig.S3OutputPath>/<job>/
    region: str = ""

    @property
    def reports(self) -> S3Location:
        """reports/<user>/<job>/ in the trace bucket: every output key of the job is under it."""
        return S3Location(self.trace_bucket, layout.job_reports_prefix(self.user, self.job))

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "status": self.status,
            "user": self.user,
            "trace_bucket": self.trace_bucket,
            "end_time_s": self.end_time_s,
            "tensorboard": self.tensorboard.uri if self.tensorboard else None,
            "region": self.region,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobContext:
        tb = data.get("tensorboard")
        return cls(
            job=str(data["job"]),
            status=str(data["status"]),
            user=str(data["user"]),
            trace_bucket=str(data["trace_bucket"]),
            end_time_s=float(data["end_time_s"]),
            tensorboard=parse_s3_uri(tb) if tb else None,
            region=str(data.get("region") or ""),
        )


@dataclass
class Outcome:
    """What happened, for the structured log and the metrics the handler publishes."""

    job: str
    status: str
    action: str  # reported | no_traces | fanned_out | fanout_already_started | ignored
    report: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    flagged_files: list[str] = field(default_factory=list)
    tagged_rule_output: int = 0
    notified: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "status": self.status,
            "action": self.action,
            "report": self.report,
            "metrics": self.metrics,
            "flagged_files": self.flagged_files,
            "tagged_rule_output": self.tagged_rule_output,
            "notified": self.notified,
        }


def describe_job(sagemaker: SageMakerClient, job: str) -> dict[str, Any]:
    try:
        return aws.describe_training_job(sagemaker, job)
    except aws.NotFoundError as exc:
        raise JobNotFoundError(f"training job {job!r} not found: {exc}") from exc


def resolve_user(tags: Mapping[str, str], tag_key: str) -> str:
    user = tags.get(tag_key)
    if not user:
        return layout.UNOWNED_USER
    try:
        layout.user_reports_prefix(user)
    except layout.LayoutError:
        return layout.UNOWNED_USER  # an unusable tag value must not break the report
    return user


def s3_path(describe: Mapping[str, Any], *config: str) -> S3Location | None:
    """An S3 path from DescribeTrainingJob, e.g. s3_path(d, "TensorBoardOutputConfig", "S3OutputPath")."""
    value: Any = describe
    for part in config:
        value = value.get(part) if isinstance(value, Mapping) else None
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_s3_uri(value)
    except S3UriError:
        return None


def job_context(event: TrainingJobStateChange, describe: Mapping[str, Any], env: ProcessorEnv) -> JobContext:
    job = event.job_name
    tb_root = s3_path(describe, "TensorBoardOutputConfig", "S3OutputPath")
    end = describe.get("TrainingEndTime") or describe.get("LastModifiedTime")
    if isinstance(end, datetime):
        end_s = end.timestamp()
    elif event.detail.training_end_time:
        end_s = event.detail.training_end_time / 1000.0
    else:
        end_s = time.time()
    return JobContext(
        job=job,
        status=event.status,
        user=resolve_user(event.detail.tags, env.user_tag_key),
        trace_bucket=env.trace_bucket,
        end_time_s=end_s,
        tensorboard=tb_root.child(job) if tb_root else None,
        region=event.region,
    )
