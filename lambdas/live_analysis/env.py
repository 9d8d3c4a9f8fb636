"""Environments of the live-analysis functions, validated once at cold start (set by
stacks/components/live_analysis.py)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from lambdas.common.env import EnvError, FunctionEnv
from lambdas.trace_processor.env import ProcessorEnv
from profstack.actions import ActionPolicy

__all__ = ["DispatchEnv", "EnvError", "LiveEnv"]


class LiveEnv(ProcessorEnv):
    """The analyser: everything the trace processor validates (owner, folders, engine settings, reader role),
    plus the live settings and the action policy (config processing.live, processing.actions)."""

    settle_seconds: Annotated[int, Field(ge=0, le=3600, alias="LIVE_SETTLE_SECONDS")] = 120
    max_files: Annotated[int, Field(ge=1, le=1000, alias="LIVE_MAX_FILES")] = 64
    interval_minutes: Annotated[int, Field(ge=1, le=1440, alias="LIVE_INTERVAL_MINUTES")] = 15
    actions: Annotated[dict[str, Any], Field(alias="ACTIONS", default_factory=dict)]

    @field_validator("actions", mode="before")
    @classmethod
    def _actions_json(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    @field_validator("actions")
    @classmethod
    def _actions_policy(cls, value: dict[str, Any]) -> dict[str, Any]:
        ActionPolicy.from_json(value)  # ValueError: one EnvError at cold start
        return value

    def policy(self) -> ActionPolicy:
        return ActionPolicy.from_json(self.actions)


class DispatchEnv(FunctionEnv):
    """The dispatcher: which function analyses a job, and the deployment's job tag filter."""

    analyser_function: Annotated[str, Field(alias="ANALYSER_FUNCTION", min_length=1)]
    tag_filter_key: Annotated[str | None, Field(alias="TAG_FILTER_KEY")] = None
    tag_filter_value: Annotated[str | None, Field(alias="TAG_FILTER_VALUE")] = None

    @field_validator("tag_filter_key", "tag_filter_value", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return value or None

    @model_validator(mode="after")
    def _tag_pair(self) -> DispatchEnv:
        if bool(self.tag_filter_key) != bool(self.tag_filter_value):
            raise ValueError("set both TAG_FILTER_KEY and TAG_FILTER_VALUE, or neither")
        return self

    @property
    def tag_filter(self) -> tuple[str, str] | None:
        if self.tag_filter_key and self.tag_filter_value:
            return (self.tag_filter_key, self.tag_filter_value)
        return None
