"""AWS I/O of the live analysis. Clients are injected; nothing here decides anything."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lambdas.trace_processor.aws import S3Location, error_code

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

_PRECONDITION = {"PreconditionFailed", "ConditionalRequestConflict"}
_ABSENT = {"404", "NoSuchKey", "NotFound"}


@dataclass(frozen=True)
class Existing:
    """What is at a report key now: its ETag (None: absent) and, for a summary, whether it is an in-progress one."""

    etag: str | None
    in_progress: bool = False


def existing(s3: S3Client, location: S3Location, *, summary: bool = False) -> Existing:
    try:
        if not summary:
            return Existing(str(s3.head_object(Bucket=location.bucket, Key=location.key)["ETag"]))
        got = s3.get_object(Bucket=location.bucket, Key=location.key)
        body = got["Body"].read()
    except ClientError as exc:
        if error_code(exc) in _ABSENT:
            return Existing(None)
        raise
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    return Existing(str(got["ETag"]), isinstance(data, Mapping) and data.get("in_progress") is True)


def put_unless_changed(s3: S3Client, location: S3Location, data: bytes, *, content_type: str, etag: str | None) -> bool:
    """Write only if the key still holds what `etag` named (absent when None): S3's conditional write. False when
    someone (the final report) wrote it in between: the caller must not overwrite it."""
    kwargs: dict[str, Any] = {"Bucket": location.bucket, "Key": location.key, "Body": data, "ContentType": content_type}
    if etag is None:
        kwargs["IfNoneMatch"] = "*"
    else:
        kwargs["IfMatch"] = etag
    try:
        s3.put_object(**kwargs)
    except ClientError as exc:
        if error_code(exc) in _PRECONDITION:
            return False
        raise
    return True


def stop_training_job(sagemaker: SageMakerClient, job: str) -> str:
    """'stopped', or 'not_running' when SageMaker refuses because the job is no longer running (ValidationException:
    already stopping, stopped or finished)."""
    try:
        sagemaker.stop_training_job(TrainingJobName=job)
    except ClientError as exc:
        if error_code(exc) == "ValidationException":
            return "not_running"
        raise
    return "stopped"
