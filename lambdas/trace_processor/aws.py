"""AWS I/O of the processor: every AWS call the trace processor makes is a function here, taking its
boto3 client as an argument (injected; `runtime.clients()` builds the real ones lazily)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, BinaryIO, cast

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from profstack import escape
from profstack.migrate.rule_output import merge_object_tag

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_stepfunctions import SFNClient
    from mypy_boto3_sts import STSClient

# Errors worth naming in the structured failure log; every one of them is retried, then DLQ'd.
THROTTLING_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "TooManyRequestsException", "RequestLimitExceeded"}
)
ACCESS_CODES = frozenset({"AccessDenied", "AccessDeniedException", "KMS.AccessDeniedException"})
# Answers to a (resumed) GetObject worth another try within the resume budget; botocore's own retries
# have already backed off on these by the time they reach us.
TRANSIENT_CODES = THROTTLING_CODES | {
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "RequestTimeout",
    "500",
    "503",
}
# Standard retry mode backs off on S3 SlowDown / API throttling before the record fails.
BOTO_CONFIG = Config(retries={"max_attempts": 8, "mode": "standard"}, connect_timeout=10, read_timeout=120)
#: Reconnects in a row without a byte of progress before a read gives up (reset by progress).
MAX_RESUMES = 5


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
    sts: STSClient | None = None  # assumes the trace-reader role (READER_ROLE_ARN)
    #: GetMetricData: the job's instance metrics (system_view.py); None: the report says they are unavailable
    cloudwatch: CloudWatchClient | None = None
    #: the fan-out's fair shares of the analyze-file slots (slots.py); None: no admission (local runs)
    dynamodb: DynamoDBClient | None = None


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
    #: sampled from the file's head (routing.sample_estimates): its JSON bytes and events; None: not sampled
    json_bytes: int | None = None
    events: int | None = None
    #: as the listing gave them (evidence.py judges the object by them): when S3 stored this version, and its ETag,
    #: which every read of it then requires (If-Match), so what is analysed is the object that was judged
    modified: datetime | None = None
    etag: str | None = None

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
            modified = item.get("LastModified")
            etag = item.get("ETag")
            yield S3Object(
                bucket,
                item["Key"],
                int(item.get("Size", 0)),
                modified=modified if isinstance(modified, datetime) else None,
                etag=str(etag) if etag else None,
            )


class TraceReadError(OSError):
    """A trace object could not be read (throttled, reset past the resume budget, replaced (412),
    416, access denied). Transient or not, the job's record is retried: never a partial report."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class _ResumableS3Reader(io.RawIOBase):
    """Raw stream over GetObject's body. A dropped connection resumes with a Range request (IfMatch the
    first answer's ETag), so a multi-GB trace is read once, in chunks, never held whole. Resuming at the
    end of the object is the end of the object (no `Range: bytes=<size>-`, which S3 answers with 416).
    MAX_RESUMES reconnects in a row without progress give up; a chunk read resets the count."""

    def __init__(self, s3: S3Client, obj: S3Object, on_failure: Callable[[TraceReadError], None]) -> None:
        super().__init__()
        self._s3 = s3
        self._obj = obj
        self._on_failure = on_failure
        self._pos = 0
        self._resumes = 0
        self._etag: str | None = None
        self._size: int | None = None
        self._body: Any = None
        self._body = self._open()

    def _fail(self, message: str, code: str, cause: BaseException | None = None) -> TraceReadError:
        error = TraceReadError(f"{self._obj.uri}: {message}", code=code)
        error.__cause__ = cause
        self._on_failure(error)
        return error

    def _open(self) -> Any:
        while True:
            kwargs: dict[str, Any] = {"Bucket": self._obj.bucket, "Key": self._obj.key}
            # the object must be the one listed (and judged, evidence.py), and must not change under us: a 412 is a
            # TraceReadError, so the job is retried and listed afresh, never analysed from a swapped object
            pinned = self._etag or self._obj.etag
            if pinned:
                kwargs["IfMatch"] = pinned
            if self._pos:
                kwargs["Range"] = f"bytes={self._pos}-"
            try:
                response = self._s3.get_object(**kwargs)
            except ClientError as exc:
                code = error_code(exc)
                if code in TRANSIENT_CODES and self._count_resume():
                    continue
                raise self._fail(f"GetObject failed ({code})", code, exc) from exc
            except (OSError, BotoCoreError) as exc:
                if self._count_resume():
                    continue
                raise self._fail(f"GetObject failed ({type(exc).__name__})", type(exc).__name__, exc) from exc
            self._etag = self._etag or response.get("ETag")
            if self._size is None:
                length = response.get("ContentLength")
                self._size = int(length) + self._pos if isinstance(length, int) else None
            return response["Body"]

    def _count_resume(self) -> bool:
        """One more reconnect without progress; False when the budget is spent."""
        self._resumes += 1
        return self._resumes <= MAX_RESUMES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while True:
            if self._body is None:
                return 0  # resumed at the end of the object
            try:
                chunk = self._body.read(len(view))
                break
            # botocore wraps dropped streams as ResponseStreamingError / ReadTimeoutError (BotoCoreError);
            # raw socket errors surface as OSError.
            except (OSError, BotoCoreError) as exc:
                if not self._count_resume():
                    raise self._fail(
                        f"stream failed {MAX_RESUMES + 1} times in a row at byte {self._pos}", "StreamReset", exc
                    ) from exc
                self._body.close()
                if self._size is not None and self._pos >= self._size:
                    self._body = None
                    return 0
                self._body = self._open()
        n = len(chunk)
        view[:n] = chunk
        self._pos += n
        if n:
            self._resumes = 0  # progress: the budget is for reconnects in a row
        return n

    def close(self) -> None:
        if not self.closed and self._body is not None:
            self._body.close()
        super().close()


class S3TraceSource:
    """`profstack.analysis.TraceSource` over an S3 object: streamed, gzip detected by the engine.

    `failure` is the first read failure of any open() (the engine records a failed read as a bad file;
    the processor must instead retry the job, so it checks this after the engine is done)."""

    def __init__(self, s3: S3Client, obj: S3Object, *, buffer_size: int = 1 << 20) -> None:
        self._s3 = s3
        self.obj = obj
        self.name = obj.uri
        self.size_hint: int | None = obj.size
        self._buffer_size = buffer_size
        self.failure: TraceReadError | None = None

    def _record(self, error: TraceReadError) -> None:
        if self.failure is None:
            self.failure = error

    def open(self) -> BinaryIO:
        reader = io.BufferedReader(_ResumableS3Reader(self._s3, self.obj, self._record), buffer_size=self._buffer_size)
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


def list_tags(sagemaker: SageMakerClient, arn: str) -> dict[str, str]:
    """Every tag of a SageMaker resource (ListTags, all pages)."""
    tags: dict[str, str] = {}
    kwargs: dict[str, Any] = {"ResourceArn": arn, "MaxResults": 100}
    while True:
        page = sagemaker.list_tags(**kwargs)
        for tag in page.get("Tags", []):
            tags[str(tag["Key"])] = str(tag.get("Value", ""))
        token = page.get("NextToken")
        if not token:
            return tags
        kwargs["NextToken"] = token


def assumed_s3_client(
    sts: STSClient, *, role_arn: str, session_name: str, policy: str, config: Config = BOTO_CONFIG
) -> S3Client:
    """An S3 client whose credentials are an AssumeRole session of `role_arn` limited by the inline
    session `policy` (effective permissions: the role's policies AND the session policy)."""
    credentials = sts.assume_role(RoleArn=role_arn, RoleSessionName=session_name, Policy=policy)["Credentials"]
    client: S3Client = boto3.client(
        "s3",
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        config=config,
    )
    return client


def start_execution(sfn: SFNClient, *, state_machine_arn: str, name: str, payload: Any) -> bool:
    """StartExecution with a JSON input; False when an execution of that name already exists."""
    try:
        sfn.start_execution(stateMachineArn=state_machine_arn, name=name, input=json.dumps(payload))
    except ClientError as exc:
        if error_code(exc) == "ExecutionAlreadyExists":
            return False
        raise
    return True


def execution_input(sfn: SFNClient, *, state_machine_arn: str, name: str) -> Any:
    """The parsed input of the state machine's execution called `name` (DescribeExecution)."""
    arn = state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"
    return json.loads(sfn.describe_execution(executionArn=arn).get("input") or "null")


#: SNS: a Subject of "printable ASCII characters ... less than 100 characters"
SUBJECT_MAX = 99


def publish(sns: SNSClient, *, topic_arn: str, subject: str, message: str, attributes: Mapping[str, str]) -> None:
    """Publish to an SNS topic; every attribute is a String message attribute. Every e-mail leaves through here, so
    here the one escaping rule (profstack.escape) is applied to all of it: the subject becomes one line of printable
    ASCII, the message keeps its line breaks and shows every other control or bidi character as a visible escape
    (callers escape each line first, so that a name cannot add a line; this makes sure nothing else slips through)."""
    sns.publish(
        TopicArn=topic_arn,
        Subject=escape.ascii_line(subject, SUBJECT_MAX),
        Message=escape.lines(message),
        MessageAttributes={name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()},
    )


def add_object_tag(s3: S3Client, obj: S3Object, key: str, value: str) -> bool:
    """Merge one tag into the object's tag set (profstack.migrate.rule_output); False when already there."""
    return merge_object_tag(s3, obj.bucket, obj.key, key, value)
