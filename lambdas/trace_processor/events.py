"""Typed model of the `SageMaker Training Job State Change` event (docs/platform-facts.md A5).

The event does not carry TensorBoardOutputConfig/ProfilerConfig, so the processor calls
DescribeTrainingJob for those; only the fields ProfStack relies on are modelled.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from profstack.jobs.events import REANALYSIS_FIELD, REANALYSIS_ID_PATTERN, TERMINAL_STATUSES
from profstack.tensorboard.names import TRAINING_JOB_NAME_RE


class EventError(ValueError):
    """The SQS body is not a training-job state-change event ProfStack handles."""


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class OutputDataConfig(_Loose):
    s3_output_path: Annotated[str, Field(alias="S3OutputPath")]


class TrainingJobDetail(_Loose):
    training_job_name: Annotated[str, Field(alias="TrainingJobName", min_length=1, max_length=63)]
    training_job_arn: Annotated[str | None, Field(alias="TrainingJobArn")] = None
    training_job_status: Annotated[str, Field(alias="TrainingJobStatus")]
    output_data_config: Annotated[OutputDataConfig | None, Field(alias="OutputDataConfig")] = None
    tags: Annotated[dict[str, str], Field(alias="Tags")] = {}
    training_end_time: Annotated[int | None, Field(alias="TrainingEndTime")] = None
    #: set only by `profstack reports reanalyze` / `backfill` (profstack/cli/reanalyze.py): a fresh id that makes
    #: the idempotency key and the fan-out execution new; everything else is checked as for SageMaker's events
    reanalysis: Annotated[str | None, Field(alias=REANALYSIS_FIELD, pattern=REANALYSIS_ID_PATTERN)] = None

    @field_validator("training_job_name")
    @classmethod
    def _sagemaker_name(cls, value: str) -> str:
        # What SageMaker accepts (full match: "job\n", "../bob", "a.b" are not job names). The name goes
        # into S3 keys and API calls; anything else is a forged message.
        if not TRAINING_JOB_NAME_RE.fullmatch(value):
            raise ValueError(f"{value[:80]!r} is not a SageMaker training job name")
        return value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> Any:
        # The schema says map; a Key/Value list is accepted too, as DescribeTrainingJob-style input.
        if isinstance(value, list):
            return {str(t["Key"]): str(t["Value"]) for t in value if isinstance(t, dict)}
        return value or {}


class TrainingJobStateChange(_Loose):
    id: str
    source: Literal["aws.sagemaker"]
    detail_type: Annotated[Literal["SageMaker Training Job State Change"], Field(alias="detail-type")]
    account: str = ""  # always present from EventBridge; moto omits it
    region: str
    time: str
    detail: TrainingJobDetail

    @property
    def job_name(self) -> str:
        return self.detail.training_job_name

    @property
    def status(self) -> str:
        return self.detail.training_job_status

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


def parse_event(body: str | dict[str, Any]) -> TrainingJobStateChange:
    """Parse an SQS message body holding the EventBridge event; raise EventError with one line."""
    try:
        data = json.loads(body) if isinstance(body, str) else body
    except json.JSONDecodeError as exc:
        raise EventError(f"message body is not JSON: {exc.msg} at {exc.pos}") from None
    try:
        event = TrainingJobStateChange.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise EventError(f"not a training-job state-change event: {where}: {first['msg']}") from None
    return event
