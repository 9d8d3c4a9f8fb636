"""What a job is to the processor: its name, owner, status and where its outputs go (`JobContext`),
built from the event, DescribeTrainingJob and the job's own tags (ListTags); and what happened to it
(`Outcome`).

The owner is the job's `<user_tag_key>` tag as SageMaker returns it, never the message: it must name a
configured user, and a message that claims another owner is rejected (NotOwnedError). So is the status: a
message whose status DescribeTrainingJob does not report is not processed (StatusMismatchError).

A tag is set by whoever creates the job, so by default (processing.ownership "verified") it counts only when
something the creator cannot choose confirms it (`owner_of`): the job's execution role is that user's ProfStack
role (its IAM path names the user, and IAM path and PassRole are the administrator's), or the owner-tag guard
is on and the job was created directly. An unconfirmed claim is filed under `_unowned`, for an administrator,
with a warning: never in the claimed user's reports, e-mails or baseline."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lambdas.common.owner import created_by_service, role_user
from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import S3Location, S3UriError, parse_s3_uri
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.errors import JobNotFoundError, NotOwnedError, StatusMismatchError
from lambdas.trace_processor.events import TrainingJobStateChange
from lambdas.trace_processor.scope import owned_tensorboard
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
    tensorboard: S3Location | None  # <TensorBoardOutputConfig.S3OutputPath>/<job>/, only inside the owner's space
    region: str = ""
    #: summary `warnings[]` entries about the job itself (e.g. a TensorBoard output that was ignored)
    warnings: tuple[Mapping[str, Any], ...] = ()

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
            "warnings": [dict(w) for w in self.warnings],
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
            warnings=tuple(dict(w) for w in data.get("warnings") or [] if isinstance(w, Mapping)),
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


def job_tags(sagemaker: SageMakerClient, describe: Mapping[str, Any]) -> dict[str, str]:
    """The job's tags as SageMaker holds them (ListTags on its ARN)."""
    arn = describe.get("TrainingJobArn")
    if not isinstance(arn, str) or not arn:
        raise JobNotFoundError(
            f"DescribeTrainingJob returned no TrainingJobArn for {describe.get('TrainingJobName')!r}"
        )
    return aws.list_tags(sagemaker, arn)


def resolve_user(tags: Mapping[str, str], tag_key: str, users: frozenset[str]) -> str:
    """The owner named by the job's own tag: a configured user (full match), or `_unowned` when the
    job has no such tag. A tag naming anyone else is refused (NotOwnedError)."""
    user = tags.get(tag_key)
    if user is None or user == "":
        return layout.UNOWNED_USER
    if user not in users or not layout.is_segment(user):
        raise NotOwnedError(f"the job's {tag_key} tag names {user[:80]!r}, which is not a configured user")
    return user


def owner_of(
    describe: Mapping[str, Any], tags: Mapping[str, str], env: ProcessorEnv
) -> tuple[str, list[dict[str, Any]]]:
    """(owner, summary warnings). The tag names the claim; under "verified" ownership it stands only when the
    execution role or the owner-tag guard confirms it. A role that names another user than the tag is an
    attack (NotOwnedError); a claim nothing confirms goes to `_unowned` with a warning."""
    claimed = resolve_user(tags, env.user_tag_key, env.users)
    if env.ownership == "tag":
        return claimed, []
    by_role = role_user(describe.get("RoleArn"), env.name_prefix)
    if by_role is not None:
        if by_role not in env.users:
            raise NotOwnedError(f"the job runs as the execution role of {by_role!r}, which is not a configured user")
        if claimed not in (by_role, layout.UNOWNED_USER):
            raise NotOwnedError(
                f"the job's {env.user_tag_key} tag says {claimed!r} but it runs as {by_role!r}'s execution role; "
                "rejected"
            )
        return by_role, []
    if claimed == layout.UNOWNED_USER:
        return claimed, []
    service = created_by_service(describe, tags)
    if env.owner_tag_guard and service is None:
        return claimed, []
    why = (
        f"it was created by {service}, which the owner-tag guard cannot see"
        if service
        else "it does not run as a ProfStack user's execution role and the owner-tag guard is off"
    )
    warning = {
        "type": "UnverifiedOwnerError",
        "message": f"the job's {env.user_tag_key} tag says {claimed!r}, but nothing its creator cannot choose "
        f"confirms it ({why}): filed under {layout.UNOWNED_USER} for an administrator (docs/security.md)",
    }
    return layout.UNOWNED_USER, [warning]


def check_claimed_owner(event: TrainingJobStateChange, owner: str, tag_key: str) -> None:
    """A message that names an owner must name the job's real one (a rule with an input transformer
    could otherwise claim another user's job)."""
    claimed = event.detail.tags.get(tag_key)
    real = "" if owner == layout.UNOWNED_USER else owner
    if claimed is not None and claimed != real:
        raise NotOwnedError(
            f"the message says {tag_key}={claimed[:80]!r} but the job's own tag says {real or '(none)'!r}; rejected"
        )


def check_status(event: TrainingJobStateChange, describe: Mapping[str, Any]) -> None:
    """The message's terminal status must be the one SageMaker reports. A message put on the queue by anyone
    with sqs:SendMessage could otherwise say "Completed" for another user's running job: a report of a
    half-written trace filed as that job's final one, its e-mail sent, and the idempotency record of
    (job, Completed) swallowing SageMaker's real event for the record's lifetime. A genuine event that the API
    does not reflect yet passes on a redelivery."""
    actual = describe.get("TrainingJobStatus")
    if actual != event.status:
        raise StatusMismatchError(
            f"the message says {event.job_name!r} is {event.status!r} but DescribeTrainingJob says {actual!r}; "
            "not processed"
        )


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


def job_context(
    event: TrainingJobStateChange, describe: Mapping[str, Any], tags: Mapping[str, str], env: ProcessorEnv
) -> JobContext:
    """The job as the processor sees it. The TensorBoard folder is kept only inside the owner's space
    (scope.owned_tensorboard); otherwise it is dropped and a warning says so."""
    job = event.job_name
    check_status(event, describe)
    # the message may only repeat the job's own tag (genuine SageMaker events carry it)
    check_claimed_owner(event, resolve_user(tags, env.user_tag_key, env.users), env.user_tag_key)
    user, owner_warnings = owner_of(describe, tags, env)
    raw_tb = describe.get("TensorBoardOutputConfig")
    raw_path = raw_tb.get("S3OutputPath") if isinstance(raw_tb, Mapping) else None
    tensorboard, warnings = owned_tensorboard(raw_path if isinstance(raw_path, str) else None, user, job, env)
    warnings = [*owner_warnings, *warnings]
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
        user=user,
        trace_bucket=env.trace_bucket,
        end_time_s=end_s,
        tensorboard=tensorboard,
        region=event.region,
        warnings=tuple(warnings),
    )
