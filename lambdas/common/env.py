"""The one way a ProfStack function reads its environment: a frozen pydantic model, validated once at
cold start, whose failure is one `EnvError` naming the variable (a bad deployment fails loudly before
any event is handled)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class EnvError(RuntimeError):
    """The function was deployed with a missing or malformed environment variable."""


class FunctionEnv(BaseModel):
    """Base of each function's environment model; fields carry the variable name as their alias."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        try:
            return cls.model_validate(dict(os.environ if environ is None else environ))
        except (ValidationError, json.JSONDecodeError) as exc:
            raise EnvError(f"invalid function environment: {exc}") from None


class TagFilterEnv(FunctionEnv):
    """A function that acts only on jobs carrying the deployment's tag filter (processing.tag_filter): both
    variables or neither; the stack passes "" when no filter is configured."""

    tag_filter_key: Annotated[str | None, Field(alias="TAG_FILTER_KEY")] = None
    tag_filter_value: Annotated[str | None, Field(alias="TAG_FILTER_VALUE")] = None

    @field_validator("tag_filter_key", "tag_filter_value", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return value or None

    @model_validator(mode="after")
    def _tag_pair(self) -> Self:
        if bool(self.tag_filter_key) != bool(self.tag_filter_value):
            raise ValueError("set both TAG_FILTER_KEY and TAG_FILTER_VALUE, or neither")
        return self

    @property
    def tag_filter(self) -> tuple[str, str] | None:
        if self.tag_filter_key and self.tag_filter_value:
            return (self.tag_filter_key, self.tag_filter_value)
        return None
