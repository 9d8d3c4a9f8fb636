"""Environment of the trace-processor functions (set by stacks/components/trace_processor.py)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, field_validator

from lambdas.common.env import EnvError, FunctionEnv

__all__ = ["EnvError", "ProcessorEnv"]


class ProcessorEnv(FunctionEnv):
    """Settings the stack passes to the processor functions (stacks/components/trace_processor.py)."""

    trace_bucket: Annotated[str, Field(min_length=3, alias="TRACE_BUCKET")]
    idempotency_table: Annotated[str, Field(min_length=1, alias="IDEMPOTENCY_TABLE")]
    topic_arn: Annotated[str, Field(pattern=r"^arn:aws[a-z-]*:sns:", alias="TOPIC_ARN")]
    user_tag_key: Annotated[str, Field(min_length=1, alias="USER_TAG_KEY")] = "profstack:user"
    extra_trace_prefixes: Annotated[list[str], Field(alias="EXTRA_TRACE_PREFIXES", default_factory=list)]
    fanout_file_threshold: Annotated[int, Field(ge=1, alias="FANOUT_FILE_THRESHOLD")] = 8
    fanout_bytes_threshold: Annotated[int, Field(ge=1, alias="FANOUT_BYTES_THRESHOLD")] = 2048 * 2**20
    single_lambda_max_file_bytes: Annotated[int, Field(ge=1, alias="SINGLE_LAMBDA_MAX_FILE_BYTES")] = 4096 * 2**20
    state_machine_arn: Annotated[str | None, Field(alias="STATE_MACHINE_ARN")] = None
    top_k: Annotated[int, Field(ge=1, le=100, alias="TOP_K")] = 15
    #: profstack.analysis.trim window of the trimmed timelines: median | slowest | all | A:B
    timeline_window: Annotated[str, Field(pattern=r"^(median|slowest|all|\d+(:\d+)?)$", alias="TIMELINE_WINDOW")] = (
        "median"
    )
    rule_thresholds: Annotated[dict[str, float], Field(alias="RULE_THRESHOLDS", default_factory=dict)]
    legacy_tagging: Annotated[bool, Field(alias="LEGACY_TAGGING")] = True
    idempotency_ttl_seconds: Annotated[int, Field(ge=60, alias="IDEMPOTENCY_TTL_SECONDS")] = 7 * 86400

    @field_validator("extra_trace_prefixes", "rule_thresholds", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else None
        return value

    @field_validator("state_machine_arn", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None
