"""Environment of the trace-processor functions (set by stacks/components/trace_processor.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from lambdas.common.env import EnvError, FunctionEnv
from profstack import layout
from profstack.jobs.instance_rules import check_system_thresholds

__all__ = ["EnvError", "ProcessorEnv"]


class ProcessorEnv(FunctionEnv):
    """Settings the stack passes to the processor functions (stacks/components/trace_processor.py)."""

    trace_bucket: Annotated[str, Field(min_length=3, alias="TRACE_BUCKET")]
    idempotency_table: Annotated[str, Field(min_length=1, alias="IDEMPOTENCY_TABLE")]
    topic_arn: Annotated[str, Field(pattern=r"^arn:aws[a-z-]*:sns:", alias="TOPIC_ARN")]
    user_tag_key: Annotated[str, Field(min_length=1, alias="USER_TAG_KEY")] = "profstack:user"
    #: config processing.ownership: "verified" (the tag must be confirmed, job.owner_of) or "tag"
    ownership: Annotated[Literal["verified", "tag"], Field(alias="OWNERSHIP")] = "verified"
    #: config processing.owner_tag_guard.enabled: the IAM guardrail makes directly created jobs' tags trustworthy
    owner_tag_guard: Annotated[bool, Field(alias="OWNER_TAG_GUARD")] = False
    extra_trace_prefixes: Annotated[list[str], Field(alias="EXTRA_TRACE_PREFIXES", default_factory=list)]
    fanout_file_threshold: Annotated[int, Field(ge=1, alias="FANOUT_FILE_THRESHOLD")] = 8
    #: the analyze-file function's reserved concurrency: the slots the owners of running fan-outs share (slots.py)
    fanout_reserved_concurrency: Annotated[int, Field(ge=1, le=1000, alias="FANOUT_RESERVED_CONCURRENCY")] = 40
    #: the functions' timeout: a slot's lease outlives it, so a function killed mid-item frees its slot by itself
    function_timeout_s: Annotated[int, Field(ge=1, le=900, alias="FUNCTION_TIMEOUT_S")] = 900
    #: config processing.max_files_per_job: files beyond it are left out, and the report says so
    max_files_per_job: Annotated[int, Field(ge=1, alias="MAX_FILES_PER_JOB")] = 5000
    fanout_bytes_threshold: Annotated[int, Field(ge=1, alias="FANOUT_BYTES_THRESHOLD")] = 2048 * 2**20
    single_lambda_max_file_bytes: Annotated[int, Field(ge=1, alias="SINGLE_LAMBDA_MAX_FILE_BYTES")] = 4096 * 2**20
    #: a file with more (sampled) events goes to the Processing job: 100 M events parse in ~60 s with the Python
    #: loop (5 M in 3.0 s measured), far inside the 900 s Lambda, whatever its compressed size says
    single_lambda_max_events: Annotated[int, Field(ge=1, alias="SINGLE_LAMBDA_MAX_EVENTS")] = 100_000_000
    state_machine_arn: Annotated[str | None, Field(alias="STATE_MACHINE_ARN")] = None
    top_k: Annotated[int, Field(ge=1, le=100, alias="TOP_K")] = 15
    #: profstack.analysis.trim window of the trimmed timelines: median | slowest | all | A:B
    timeline_window: Annotated[str, Field(pattern=r"^(median|slowest|all|\d+(:\d+)?)$", alias="TIMELINE_WINDOW")] = (
        "median"
    )
    rule_thresholds: Annotated[dict[str, float], Field(alias="RULE_THRESHOLDS", default_factory=dict)]
    #: overrides of the system rules' thresholds (config processing.system_rule_thresholds)
    system_rule_thresholds: Annotated[dict[str, float], Field(alias="SYSTEM_RULE_THRESHOLDS", default_factory=dict)]
    #: the deployment's name prefix: the per-job alarms the console links point at are <prefix>/job/<job>/...
    name_prefix: Annotated[str, Field(alias="NAME_PREFIX", pattern=r"^[a-z][a-z0-9-]{1,20}$")] = "profstack"
    #: the function's region (Lambda sets AWS_REGION): the console links of reports and e-mails
    region: Annotated[str, Field(alias="AWS_REGION", pattern=r"^([a-z]{2}(-gov)?-[a-z]+-\d)?$")] = ""
    #: keep the last ProfilerStep (config processing.include_last_step; default: dropped, like HTA)
    include_last_step: Annotated[bool, Field(alias="INCLUDE_LAST_STEP")] = False
    legacy_tagging: Annotated[bool, Field(alias="LEGACY_TAGGING")] = True
    #: the job queue's maxReceiveCount (config processing.max_receive_count): the delivery that is the last
    #: before the DLQ publishes with what it could read instead of retrying a transient CloudWatch fault
    max_receive_count: Annotated[int, Field(ge=1, le=20, alias="MAX_RECEIVE_COUNT")] = 3
    #: how many times Step Functions runs the fan-out aggregate step for a transient CloudWatch fault (its
    #: Retry on SystemMetricsTransientError; set on that function only, by stacks/components/fanout_workflow.py
    #: from AGGREGATE_ATTEMPTS): the attempt that is the last publishes instead of raising. None elsewhere.
    aggregate_max_attempts: Annotated[int | None, Field(ge=1, le=20, alias="AGGREGATE_MAX_ATTEMPTS")] = None
    idempotency_ttl_seconds: Annotated[int, Field(ge=60, alias="IDEMPOTENCY_TTL_SECONDS")] = 7 * 86400
    #: the configured users: a job's owner tag must name one of them (empty: only untagged jobs pass)
    users: Annotated[frozenset[str], Field(alias="USERS", default_factory=frozenset)]
    #: the trace-reader role: every trace read runs under it, with a session policy naming only the
    #: job owner's folders (scope.py). Unset (local runs, the demo): reads use the function's own role.
    reader_role_arn: Annotated[
        str | None, Field(pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/", alias="READER_ROLE_ARN")
    ] = None
    trace_key_arn: Annotated[str | None, Field(pattern=r"^arn:aws[a-z-]*:kms:", alias="TRACE_KEY_ARN")] = None

    @field_validator("extra_trace_prefixes", "rule_thresholds", "system_rule_thresholds", "users", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else None
        return value

    @field_validator("extra_trace_prefixes")
    @classmethod
    def _templates(cls, value: list[str]) -> list[str]:
        return [layout.check_prefix_template(v) for v in value]  # LayoutError is a ValueError

    @field_validator("system_rule_thresholds", mode="before")
    @classmethod
    def _system_thresholds(cls, value: Any) -> Any:
        # runs before _json (pydantic runs "before" validators last-defined first), so it parses itself
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if isinstance(value, Mapping):
            check_system_thresholds(value)  # SystemThresholdError is a ValueError: one EnvError at cold start
        return value

    @field_validator("users")
    @classmethod
    def _segments(cls, value: frozenset[str]) -> frozenset[str]:
        bad = sorted(u for u in value if not layout.is_segment(u) or u == layout.UNOWNED_USER)
        if bad:
            raise ValueError(f"not a user name: {bad[0]!r}")
        return value

    @model_validator(mode="after")
    def _reader_needs_key(self) -> ProcessorEnv:
        if self.reader_role_arn and not self.trace_key_arn:
            raise ValueError("READER_ROLE_ARN needs TRACE_KEY_ARN (the session policy names the key it decrypts with)")
        return self

    @field_validator("state_machine_arn", "reader_role_arn", "trace_key_arn", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None
