"""AWS I/O of the alarm manager. Clients are injected; nothing here decides anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from profstack.job_alarms import AlarmSpec, fingerprint_of

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_sagemaker import SageMakerClient

DELETE_BATCH = 100  # DeleteAlarms takes at most 100 names


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


class CloudWatchAlarms:
    """The per-job alarms under one name prefix, and the live dashboard."""

    def __init__(self, client: CloudWatchClient, *, topic_arn: str) -> None:
        self._cw = client
        self._topic = topic_arn

    def list(self, prefix: str) -> dict[str, str | None]:
        """Alarm name -> fingerprint (None when the description carries none) for every alarm under prefix."""
        found: dict[str, str | None] = {}
        for page in self._cw.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm"]
        ):
            for alarm in page.get("MetricAlarms", []):
                found[str(alarm["AlarmName"])] = fingerprint_of(alarm.get("AlarmDescription"))
        return found

    def put(self, spec: AlarmSpec) -> None:
        self._cw.put_metric_alarm(**spec.put_kwargs(self._topic))

    def delete(self, names: Iterable[str]) -> None:
        ordered = sorted(set(names))
        for start in range(0, len(ordered), DELETE_BATCH):
            self._cw.delete_alarms(AlarmNames=ordered[start : start + DELETE_BATCH])

    def put_dashboard(self, name: str, body: str) -> None:
        self._cw.put_dashboard(DashboardName=name, DashboardBody=body)


class SageMakerJobs:
    """DescribeTrainingJob / ListTrainingJobs / ListTags: the truth about which jobs run."""

    def __init__(self, client: SageMakerClient) -> None:
        self._sm = client

    def describe(self, job: str) -> Mapping[str, Any] | None:
        try:
            return dict(self._sm.describe_training_job(TrainingJobName=job))
        except ClientError as exc:
            if error_code(exc) in {"ValidationException", "ResourceNotFound"}:
                return None  # SageMaker answers ValidationException for a job that does not exist
            raise

    def in_progress(self) -> list[str]:
        names: list[str] = []
        for page in self._sm.get_paginator("list_training_jobs").paginate(StatusEquals="InProgress"):
            names.extend(str(s["TrainingJobName"]) for s in page.get("TrainingJobSummaries", []))
        return names

    def tags(self, arn: str) -> dict[str, str]:
        tags: dict[str, str] = {}
        for page in self._sm.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.update({str(t["Key"]): str(t["Value"]) for t in page.get("Tags", [])})
        return tags
