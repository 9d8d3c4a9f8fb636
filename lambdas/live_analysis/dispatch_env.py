"""Environment of the live-analysis dispatcher, validated once at cold start (stacks/components/live_analysis.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from lambdas.common.env import EnvError, FunctionEnv

__all__ = ["DispatchEnv", "EnvError"]


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
