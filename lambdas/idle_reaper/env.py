"""Environment of the idle reaper, validated once at cold start."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class EnvError(RuntimeError):
    """The function was deployed with a missing or malformed environment variable."""


class ReaperEnv(BaseModel):
    """Set by stacks/components/idle_reaper.py from the `tensorboard` config section."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    domain_id: Annotated[str, Field(alias="DOMAIN_ID", pattern=r"^d-[a-z0-9]{12}$")]
    idle_ttl_minutes: Annotated[int, Field(alias="IDLE_TTL_MINUTES", ge=1, le=10080)]
    dry_run: Annotated[bool, Field(alias="DRY_RUN")] = False
    # Only these profiles' apps are touched: an imported domain may hold apps ProfStack does not own.
    user_profiles: Annotated[frozenset[str], Field(alias="USER_PROFILES")]

    @field_validator("user_profiles", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            parsed = json.loads(value)
            if not isinstance(parsed, list):
                raise ValueError("USER_PROFILES must be a JSON list of profile names")
            return parsed
        return value

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ReaperEnv:
        try:
            return cls.model_validate(dict(os.environ if environ is None else environ))
        except (ValidationError, json.JSONDecodeError) as exc:
            raise EnvError(f"invalid function environment: {exc}") from None
