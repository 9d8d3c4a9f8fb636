"""AWS I/O of the alarm manager. Clients are injected; nothing here decides anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from profstack.jobs.alarms import MANAGED_BY_TAG, AlarmSpec, fingerprint_of

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_sagemaker import SageMakerClient

DELETE_BATCH = 100  # DeleteAlarms takes at most 100 names


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


class CloudWatchAlarms:
    """The per-job alarms under one name prefix that this deployment created, and the live dashboard.

    Ownership is the MANAGED_BY_TAG with this deployment's name prefix, set when the alarm is created, never the
    name: an alarm under the prefix without the tag (another team's, or one made by hand) is listed in
    `foreign` and never updated or deleted."""

    def __init__(self, client: CloudWatchClient, *, topic_arn: str, manager: str = "profstack") -> None:
        self._cw = client
        self._topic = topic_arn
        self._manager = manager
        self.foreign: list[str] = []  # names under the prefix that this deployment did not create

    def _ours(self, arn: str) -> bool:
        tags = self._cw.list_tags_for_resource(ResourceARN=arn).get("Tags", [])
        return any(t.get("Key") == MANAGED_BY_TAG and t.get("Value") == self._manager for t in tags)

    def list(self, prefix: str) -> dict[str, str | None]:
        """Alarm name -> fingerprint (None when the description carries none) for every alarm under prefix that
        carries this deployment's MANAGED_BY_TAG."""
        found: dict[str, str | None] = {}
        for page in self._cw.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm"]
        ):
            for alarm in page.get("MetricAlarms", []):
                name = str(alarm["AlarmName"])
                if self._ours(str(alarm["AlarmArn"])):
                    found[name] = fingerprint_of(alarm.get("AlarmDescription"))
                elif name not in self.foreign:
                    self.foreign.append(name)
        return found

    def put(self, spec: AlarmSpec) -> None:
        self._cw.put_metric_alarm(**spec.put_kwargs(self._topic, manager=self._manager))

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
