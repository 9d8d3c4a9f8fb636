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


def put_unless_changed(
    s3: S3Client, location: S3Location, data: bytes, *, content_type: str, etag: str | None
) -> str | None:
    """Write only if the key still holds what `etag` named (absent when None): S3's conditional write; the ETag of
    what was written. None when someone (the final report) wrote it in between: the caller must not overwrite it."""
    kwargs: dict[str, Any] = {"Bucket": location.bucket, "Key": location.key, "Body": data, "ContentType": content_type}
    if etag is None:
        kwargs["IfNoneMatch"] = "*"
    else:
        kwargs["IfMatch"] = etag
    try:
        written = s3.put_object(**kwargs)
    except ClientError as exc:
        if error_code(exc) in _PRECONDITION:
            return None
        raise
    return str(written.get("ETag") or "")


def etag_of(s3: S3Client, location: S3Location) -> str | None:
    """The ETag at a key now (None: absent)."""
    try:
        return str(s3.head_object(Bucket=location.bucket, Key=location.key)["ETag"])
    except ClientError as exc:
        if error_code(exc) in _ABSENT:
            return None
        raise


def marker_names(s3: S3Client, folder: S3Location) -> set[str]:
    """The names of the e-mail markers (`.notified-*`) in a job's report folder (one listing)."""
    prefix = folder.child(".notified-").key
    page = s3.list_objects_v2(Bucket=folder.bucket, Prefix=prefix, MaxKeys=1000)
    return {str(item["Key"])[len(folder.key.rstrip("/")) + 1 :] for item in page.get("Contents", [])}


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
