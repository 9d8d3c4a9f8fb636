"""Environment of the live analyser, validated once at cold start (set by
stacks/components/live_analysis.py)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, field_validator

from lambdas.common.env import EnvError
from lambdas.trace_processor.env import ProcessorEnv
from profstack.actions import ActionPolicy

__all__ = ["EnvError", "LiveEnv"]


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
