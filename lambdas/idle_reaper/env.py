"""Environment of the idle reaper (set by stacks/components/idle_reaper.py from the `tensorboard` config)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, field_validator

from lambdas.common.env import EnvError, FunctionEnv
from profstack.tensorboard.names import DOMAIN_ID_PATTERN

__all__ = ["EnvError", "ReaperEnv"]


class ReaperEnv(FunctionEnv):
    domain_id: Annotated[str, Field(alias="DOMAIN_ID", pattern=DOMAIN_ID_PATTERN)]
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
