"""Which training jobs run now, as SageMaker says at this moment (never an event): the dispatcher's whole view.

Kept apart from the analyser's code so that the dispatcher's bundle carries no trace-processor code."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from profstack.actions import live_enabled

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

RUNNING = "InProgress"


class JobSource(Protocol):
    def in_progress(self) -> Iterable[str]: ...
    def describe(self, job: str) -> Mapping[str, Any] | None: ...
    def tags(self, arn: str) -> dict[str, str]: ...


class TrainingJobs:
    """ListTrainingJobs / DescribeTrainingJob / ListTags."""

    def __init__(self, client: SageMakerClient) -> None:
        self._sm = client

    def in_progress(self) -> Iterator[str]:
        for page in self._sm.get_paginator("list_training_jobs").paginate(StatusEquals="InProgress"):
            for summary in page.get("TrainingJobSummaries", []):
                yield str(summary["TrainingJobName"])

    def describe(self, job: str) -> dict[str, Any] | None:
        try:
            return dict(self._sm.describe_training_job(TrainingJobName=job))
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in {"ValidationException", "ResourceNotFound"}:
                return None
            raise

    def tags(self, arn: str) -> dict[str, str]:
        tags: dict[str, str] = {}
        for page in self._sm.get_paginator("list_tags").paginate(ResourceArn=arn):
            tags.update({str(t["Key"]): str(t["Value"]) for t in page.get("Tags", [])})
        return tags


def has_tensorboard_output(describe: Mapping[str, Any]) -> bool:
    config = describe.get("TensorBoardOutputConfig")
    path = config.get("S3OutputPath") if isinstance(config, Mapping) else None
    return isinstance(path, str) and path.startswith("s3://") and len(path) > len("s3://")


def eligible(describe: Mapping[str, Any] | None, tags: Mapping[str, str], tag_filter: tuple[str, str] | None) -> bool:
    """Worth an analyser invocation: running now, a TensorBoard output, live not turned off, the deployment's tag
    filter passed. Ownership is the analyser's to verify (it has the users and the ownership mode)."""
    if describe is None or describe.get("TrainingJobStatus") != RUNNING:
        return False
    if not has_tensorboard_output(describe):
        return False
    if not live_enabled(tags):
        return False
    return tag_filter is None or tags.get(tag_filter[0]) == tag_filter[1]


class DispatchError(RuntimeError):
    """Some jobs could not be judged (their DescribeTrainingJob or ListTags failed); every other job was."""


def due_jobs(jobs: JobSource, tag_filter: tuple[str, str] | None, *, failures: list[str] | None = None) -> list[str]:
    """The running jobs to analyse now. A job whose description or tags cannot be read (denied, throttled past the
    retries) is named in `failures` and skipped; it never keeps the other jobs from being judged."""
    due: list[str] = []
    for name in sorted(set(jobs.in_progress())):
        try:
            describe = jobs.describe(name)
            if describe is None or describe.get("TrainingJobStatus") != RUNNING:
                continue
            arn = str(describe.get("TrainingJobArn") or "")
            if arn and eligible(describe, jobs.tags(arn), tag_filter):
                due.append(name)
        except ClientError as exc:
            if failures is None:
                raise
            failures.append(f"{name}: {exc.response.get('Error', {}).get('Code')!s}")
    return due
