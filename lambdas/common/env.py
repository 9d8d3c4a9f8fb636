"""The one way a ProfStack function reads its environment: a frozen pydantic model, validated once at
cold start, whose failure is one `EnvError` naming the variable (a bad deployment fails loudly before
any event is handled)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Self

from pydantic import BaseModel, ConfigDict, ValidationError


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
