"""AWS I/O of the processor: every AWS call the trace processor makes is a function here, taking its
boto3 client as an argument (injected; `runtime.clients()` builds the real ones lazily)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, BinaryIO, cast

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from profstack.migrate.rule_output import merge_object_tag

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_stepfunctions import SFNClient

# Errors worth naming in the structured failure log; every one of them is retried, then DLQ'd.
THROTTLING_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded"}
)
ACCESS_CODES = frozenset({"AccessDenied", "AccessDeniedException", "KMS.AccessDeniedException"})
_MAX_RESUMES = 5


class S3UriError(ValueError):
    """A string that is not s3://bucket[/prefix]."""


class NotFoundError(LookupError):
    """AWS answered that the named resource does not exist; the message is AWS's."""


@dataclass
class Clients:
    """The boto3 clients the processor uses, injected into every step."""

    s3: S3Client
    sagemaker: SageMakerClient
    sns: SNSClient
    sfn: SFNClient | None = None


@dataclass(frozen=True)
class S3Location:
    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def child(self, *parts: str) -> S3Location:
        base = self.key if not self.key or self.key.endswith("/") else self.key + "/"
        return S3Location(self.bucket, base + "/".join(p.strip("/") for p in parts))


def parse_s3_uri(uri: str) -> S3Location:
    if not uri.startswith("s3://"):
        raise S3UriError(f"not an s3:// URI: {uri!r}")
    bucket, _, key = uri[5:].partition("/")
    if not bucket:
        raise S3UriError(f"no bucket in {uri!r}")
    return S3Location(bucket, key)


@dataclass(frozen=True)
class S3Object:
    bucket: str
    key: str
    size: int

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


def list_objects(s3: S3Client, bucket: str, prefix: str) -> Iterator[S3Object]:
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            yield S3Object(bucket, item["Key"], int(item.get("Size", 0)))


class _ResumableS3Reader(io.RawIOBase):
    """Raw stream over GetObject's body. A dropped connection resumes with a Range request,
    so a multi-GB trace is read once, in chunks, never held whole."""

    def __init__(self, s3: S3Client, obj: S3Object) -> None:
        super().__init__()
        self._s3 = s3
        self._obj = obj
        self._pos = 0
        self._resumes = 0
        self._etag: str | None = None
        self._body: Any = self._open()

    def _open(self) -> Any:
        kwargs: dict[str, Any] = {"Bucket": self._obj.bucket, "Key": self._obj.key}
        if self._pos:
            kwargs["Range"] = f"bytes={self._pos}-"
            if self._etag:
                kwargs["IfMatch"] = self._etag  # the object must not change under us
        response = self._s3.get_object(**kwargs)
        self._etag = response.get("ETag")
        return response["Body"]

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while True:
            try:
                chunk = self._body.read(len(view))
                break
            # botocore wraps dropped streams as ResponseStreamingError / ReadTimeoutError (BotoCoreError);
            # raw socket errors surface as OSError.
            except (OSError, BotoCoreError) as exc:
                self._resumes += 1
                if self._resumes > _MAX_RESUMES:
                    raise OSError(f"{self._obj.uri}: stream failed after {_MAX_RESUMES} resumes") from exc
                self._body.close()
                self._body = self._open()
        n = len(chunk)
        view[:n] = chunk
        self._pos += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()


class S3TraceSource:
    """`profstack.analysis.TraceSource` over an S3 object: streamed, gzip detected by the engine."""

    def __init__(self, s3: S3Client, obj: S3Object, *, buffer_size: int = 1 << 20) -> None:
        self._s3 = s3
        self.obj = obj
        self.name = obj.uri
        self.size_hint: int | None = obj.size
        self._buffer_size = buffer_size

    def open(self) -> BinaryIO:
        reader = io.BufferedReader(_ResumableS3Reader(self._s3, self.obj), buffer_size=self._buffer_size)
        return cast(BinaryIO, reader)


def put_bytes(
    s3: S3Client,
    location: S3Location,
    data: bytes,
    *,
    content_type: str,
    content_encoding: str | None = None,
    only_if_absent: bool = False,
) -> bool:
    """Write an object; with only_if_absent it is a conditional create and returns False if it exists."""
    kwargs: dict[str, Any] = {
        "Bucket": location.bucket,
        "Key": location.key,
        "Body": data,
        "ContentType": content_type,
    }
    if content_encoding:
        kwargs["ContentEncoding"] = content_encoding
    if only_if_absent:
        kwargs["IfNoneMatch"] = "*"
    try:
        s3.put_object(**kwargs)
    except ClientError as exc:
        if only_if_absent and error_code(exc) in {"PreconditionFailed", "ConditionalRequestConflict"}:
            return False
        raise
    except ParamValidationError:
        if not only_if_absent:
            raise
        # A botocore older than conditional writes (Aug 2024): check, then write. Not atomic, but the
        # idempotency record already keeps two invocations of one job from running at once.
        return _put_if_absent_without_condition(s3, location, kwargs)
    return True


def _put_if_absent_without_condition(s3: S3Client, location: S3Location, kwargs: dict[str, Any]) -> bool:
    try:
        s3.head_object(Bucket=location.bucket, Key=location.key)
    except ClientError as exc:
        if error_code(exc) not in {"404", "NoSuchKey", "NotFound"}:
            raise
    else:
        return False
    kwargs.pop("IfNoneMatch", None)
    s3.put_object(**kwargs)
    return True


def put_json(s3: S3Client, location: S3Location, value: Any) -> None:
    put_bytes(
        s3,
        location,
        json.dumps(value, indent=2, sort_keys=True, default=str).encode(),
        content_type="application/json",
    )


def get_json(s3: S3Client, location: S3Location) -> Any:
    body = s3.get_object(Bucket=location.bucket, Key=location.key)["Body"]
    try:
        return json.loads(body.read())
    finally:
        body.close()


def upload_fileobj(
    s3: S3Client, location: S3Location, fileobj: IO[bytes], *, content_type: str, content_encoding: str | None = None
) -> None:
    """A managed (multipart when large) upload from a file object, never held whole in memory."""
    extra = {"ContentType": content_type}
    if content_encoding:
        extra["ContentEncoding"] = content_encoding
    s3.upload_fileobj(fileobj, location.bucket, location.key, ExtraArgs=extra)


def delete_object(s3: S3Client, location: S3Location) -> None:
    s3.delete_object(Bucket=location.bucket, Key=location.key)


def describe_training_job(sagemaker: SageMakerClient, job: str) -> dict[str, Any]:
    """DescribeTrainingJob; NotFoundError when SageMaker does not know the job."""
    try:
        return dict(sagemaker.describe_training_job(TrainingJobName=job))
    except ClientError as exc:
        message = str(exc.response.get("Error", {}).get("Message", ""))
        lowered = message.lower()
        # AWS: "Requested resource not found."; moto: "Could not find training job ...".
        if error_code(exc) in {"ValidationException", "ResourceNotFound"} and (
            "not found" in lowered or "could not find" in lowered
        ):
            raise NotFoundError(message) from exc
        raise


def start_execution(sfn: SFNClient, *, state_machine_arn: str, name: str, payload: Any) -> bool:
    """StartExecution with a JSON input; False when an execution of that name already exists."""
    try:
        sfn.start_execution(stateMachineArn=state_machine_arn, name=name, input=json.dumps(payload))
    except ClientError as exc:
        if error_code(exc) == "ExecutionAlreadyExists":
            return False
        raise
    return True


def publish(sns: SNSClient, *, topic_arn: str, subject: str, message: str, attributes: Mapping[str, str]) -> None:
    """Publish to an SNS topic; every attribute is a String message attribute."""
    sns.publish(
        TopicArn=topic_arn,
        Subject=subject,
        Message=message,
        MessageAttributes={name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()},
    )


def add_object_tag(s3: S3Client, obj: S3Object, key: str, value: str) -> bool:
    """Merge one tag into the object's tag set (profstack.migrate.rule_output); False when already there."""
    return merge_object_tag(s3, obj.bucket, obj.key, key, value)
